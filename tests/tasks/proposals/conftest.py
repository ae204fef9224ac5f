"""Fixtures of the proposals tests."""

import pytest


@pytest.fixture
def torchvision_ops():
    """torchvision.ops with its own compiled kernels; skipped where they do not load (a CUDA
    torchvision next to a CPU torch), since a stand-in kernel would make the comparison moot."""
    pytest.importorskip("torch")
    from reasonvqa.torchvision_cpu import real_ops_loaded

    if not real_ops_loaded():
        pytest.skip("torchvision's compiled ops do not load here")
    import torchvision

    return torchvision.ops
