from types import SimpleNamespace

from prefect import task

from benchmarks.bench_operations import loaded_tasks, runs_by_task


@task(name="read-source-unit", task_run_name="read-{kind}-unit-{n:05d}")
def read_unit(kind: str, n: int) -> int:
    return n


@task(name="partition-step")
def step(n: int) -> int:
    return n


def test_runs_are_counted_by_their_task_key_whatever_their_names():
    runs = [SimpleNamespace(task_key=read_unit.task_key, name="read-vg-unit-00000"),
            SimpleNamespace(task_key=read_unit.task_key, name="read-gldv2-unit-00003"),
            SimpleNamespace(task_key=step.task_key, name="partition-spill_file"),
            SimpleNamespace(task_key=step.task_key, name="partition-seen_in_bucket"),
            SimpleNamespace(task_key=step.task_key, name="partition-spill_file"),
            SimpleNamespace(task_key="other-1a2b", name="other-1a2b-x")]
    assert runs_by_task(runs, [read_unit, step]) == {"other-1a2b": 1, "partition-step": 3, "read-source-unit": 2}
    assert runs_by_task([], [read_unit]) == {}


def test_the_build_stages_are_among_the_loaded_tasks():
    from reasonvqa.flows import build_reasonvqa

    names = {t.name for t in loaded_tasks()}
    assert build_reasonvqa.link_shard in loaded_tasks()
    assert {"read-source-unit", "link-shard", "facts-shard", "questions-shard", "partition-step"} <= names
