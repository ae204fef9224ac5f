import pyarrow as pa

from reasonvqa.model_stage import CallCache, ModelStage, Resources, instance, run_model_shard, teardown_all
from reasonvqa.stage import Rejects, StageResult, read_table


class Doubler(ModelStage):
    name = "doubler"
    resources = Resources(device="cpu", memory_mb=64)
    setups = 0

    def setup(self) -> None:
        type(self).setups += 1
        self.calls: list[int] = []

    def process(self, inputs, ctx):
        values = inputs["numbers"]["n"].to_pylist()
        out = []
        for n in values:
            def compute(n=n):
                self.calls.append(n)
                return n * 2
            out.append(ctx.cache.call("double", {"n": n}, compute))
        return StageResult({"doubled": pa.table({"n": out})}, Rejects(self.name, ctx.shard), rows_in=len(values))


def test_call_cache_replays_finished_calls_and_ignores_a_torn_line(tmp_path):
    cache = CallCache(tmp_path / "calls.jsonl")
    assert cache.call("f", {"x": 1}, lambda: [1, "a"]) == [1, "a"]
    with (tmp_path / "calls.jsonl").open("a") as handle:
        handle.write('{"k": "abc", "v"')  # a process killed mid-write
    again = CallCache(tmp_path / "calls.jsonl")
    assert len(again) == 1
    assert again.call("f", {"x": 1}, lambda: 1 / 0) == [1, "a"] and again.hits == 1


def test_instance_sets_up_once_per_process_and_shard_runs_under_the_runner(tmp_path):
    Doubler.setups = 0
    stage = instance(Doubler)
    assert instance(Doubler) is stage and Doubler.setups == 1
    stats = run_model_shard(tmp_path / "doubler", 0, stage, lambda: {"numbers": pa.table({"n": [1, 2, 3]})})
    assert read_table(tmp_path / "doubler", "doubled")["n"].to_pylist() == [2, 4, 6]
    assert stats["calls_made"] == 3 and not (tmp_path / "doubler" / "_calls" / "part-00000.jsonl").exists()
    teardown_all()
