import numpy as np

from reasonvqa.splitmix import GOLDEN, mix64, splitmix64

MASK = (1 << 64) - 1


def mix64_python(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def test_splitmix64_first_output_of_state_zero_is_the_published_one():
    assert int(splitmix64(np.array([0], dtype=np.uint64))[0]) == 0xE220A8397B1DCDAF


def test_mix64_equals_the_plain_python_finalizer_and_leaves_its_input_alone():
    values = np.array([0, 1, GOLDEN, MASK, 123456789, 1 << 63], dtype=np.uint64)
    before = values.copy()
    assert mix64(values).tolist() == [mix64_python(int(v)) for v in before]
    assert values.tolist() == before.tolist()
    assert mix64(np.arange(5)).tolist() == [mix64_python(v) for v in range(5)]  # any integer dtype
    assert mix64(np.array([-1])).tolist() == [mix64_python(MASK)]  # signed input wraps, as before
    scalar = mix64(np.uint64(7))
    assert np.ndim(scalar) == 0 and int(scalar) == mix64_python(7)
