from typing import Any, Iterator

import pytest

from reasonvqa import schemas, sources
from reasonvqa.stage import Rejects, RereadUnit, StageResult
from reasonvqa.tasks.sources.ingest import ingest_unit

from tests.tasks.sources.conftest import rows


class Counting(sources.Source):
    """Yields ``unit`` shards of one image each; a unit ``("fast", n)`` asks to be reread after its first shard."""

    kind = "counting"
    visual_domain = "robotics"
    license = "MIT"

    def __init__(self) -> None:
        self.reads: list[Any] = []

    def check(self, config: sources.SourceConfig) -> None:
        pass

    def read(self, config: sources.SourceConfig, unit: Any, shard_size: int) -> Iterator[StageResult]:
        self.reads.append(unit)
        mode, n = unit
        for shard in range(n):
            if mode == "fast" and shard == 1:
                raise RereadUnit(("slow", n), "not in order")
            images = schemas.from_rows([{"image_id": f"counting:{mode}{shard}", "source": "counting"}], schemas.IMAGES)
            yield StageResult(outputs={"images": images}, rejects=Rejects("sources_counting", shard), rows_in=1)


def _config(tmp_path):
    return sources.SourceConfig(kind="counting", path=tmp_path)


def test_a_reread_discards_the_first_pass_and_writes_the_second(tmp_path):
    source, stage = Counting(), tmp_path / "unit"
    stats = ingest_unit(source, _config(tmp_path), ("fast", 3), stage, shard_size=1)
    assert source.reads == [("fast", 3), ("slow", 3)]
    assert [s["shard"] for s in stats] == [0, 1, 2]
    images = rows(stage, "images")
    assert [r["image_id"] for r in images] == ["counting:slow0", "counting:slow1", "counting:slow2"]
    assert {(r["visual_domain"], r["license"]) for r in images} == {("robotics", "MIT")}
    # a finished unit is not read again
    assert ingest_unit(source, _config(tmp_path), ("fast", 3), stage, shard_size=1) == stats
    assert len(source.reads) == 2


def test_shard_size_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="shard_size must be >= 1"):
        ingest_unit(Counting(), _config(tmp_path), ("slow", 1), tmp_path / "unit", shard_size=0)
