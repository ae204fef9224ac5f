from importlib.metadata import EntryPoint
from typing import Any, Iterator

import pyarrow as pa
import pytest
from pydantic import ValidationError

from reasonvqa import schemas, sources
from reasonvqa.flows.config import BuildConfig, sample_config
from reasonvqa.stage import StageResult
from reasonvqa.tasks.sources.gldv2 import Gldv2Source
from reasonvqa.tasks.sources.vg import VgSource


class LimitedConfig(sources.SourceConfig):
    split: str = "train"


class Limited(sources.Source):
    kind = "limited"
    config_model = LimitedConfig
    visual_domain = "outdoor"
    license = "CC BY 4.0"

    def check(self, config: sources.SourceConfig) -> None:
        sources.require_folder(config)

    def read(self, config: sources.SourceConfig, unit: Any, shard_size: int) -> Iterator[StageResult]:
        return iter(())


@pytest.fixture
def limited():
    sources.register(Limited)
    yield Limited
    sources.unregister("limited")


def test_the_built_in_sources_come_from_entry_points():
    assert {"vg", "gldv2"} <= set(sources.kinds())
    assert sources.source_class("vg") is VgSource and sources.source_class("gldv2") is Gldv2Source
    assert (VgSource.visual_domain, VgSource.license) == ("mixed", "CC BY 4.0")
    assert Gldv2Source.visual_domain == "landmarks" and "CC BY 4.0" in Gldv2Source.license


def test_an_unknown_kind_names_the_known_ones():
    with pytest.raises(sources.UnknownSourceError, match="unknown source kind 'coco'; known kinds: .*gldv2, .*vg"):
        sources.get("coco")


def test_a_kind_is_registered_once_and_must_be_an_identifier(limited):
    class Other(Limited):
        pass

    with pytest.raises(ValueError, match="registered twice"):
        sources.register(Other)
    Other.kind = "not a name"
    with pytest.raises(ValueError, match="plain identifier"):
        sources.register(Other)
    assert sources.register(Limited) is Limited  # the same class again is fine


def test_an_entry_point_whose_name_differs_from_the_kind_is_refused(monkeypatch):
    point = EntryPoint("other", "tests.reasonvqa.test_sources:Limited", sources.ENTRY_POINT_GROUP)
    monkeypatch.setattr(sources, "entry_points", lambda group: [point])
    monkeypatch.setattr(sources, "_ENTRY_POINTS_LOADED", False)
    with pytest.raises(ValueError, match="entry point 'other' loads .* whose kind is 'limited'"):
        sources.kinds()


def test_build_config_validates_each_source_with_its_own_model_and_keeps_its_fields(limited, tmp_path):
    config = BuildConfig.model_validate({"sources": [{"kind": "limited", "path": str(tmp_path), "split": "val"},
                                                     {"kind": "vg", "path": str(tmp_path)}]})
    assert isinstance(config.sources[0], LimitedConfig) and config.sources[0].split == "val"
    dumped = config.model_dump(mode="json")["sources"]
    assert dumped[0] == {"kind": "limited", "path": str(tmp_path), "max_images": None, "split": "val"}
    assert BuildConfig.model_validate_json(config.model_dump_json()) == config
    with pytest.raises(ValidationError) as info:
        BuildConfig.model_validate({"sources": [{"kind": "vg", "path": "x", "split": "val"}]})
    assert [(e["loc"], e["type"]) for e in info.value.errors()] == [(("sources", 0, "split"), "extra_forbidden")]
    with pytest.raises(ValidationError) as info:
        BuildConfig.model_validate({"sources": [{"kind": "coco", "path": "x"}]})
    assert info.value.errors()[0]["loc"] == ("sources", 0, "kind")
    assert "known kinds:" in info.value.errors()[0]["msg"] and "limited" in info.value.errors()[0]["msg"]


def test_the_sample_config_hash_is_pinned():
    # registry-validated sources serialize like the former hard-coded union did; the hash changes
    # only when config fields change (here: proposals, hop shares, seen-in-train, distractors; then the
    # grounded-questions issue added the grounded, verified_questions and select fields and the SA-1B and
    # nuScenes excerpts to the sample, and balance.hallucination_share; the operations issue added
    # knowledge.refresh and knowledge.rate_limit)
    assert sample_config().config_hash() == "3a0d4ad63c935bd3c45e6a08e818bb9b0618da9b658767a8186eeba384b13eba"


def test_images_get_the_declared_domain_and_license_where_the_reader_left_them_null():
    images = schemas.from_rows([{"image_id": "x:1"}, {"image_id": "x:2", "license": "CC0 1.0"}], schemas.IMAGES)
    stamped = sources.with_source_columns(images, Limited())
    assert stamped["visual_domain"].to_pylist() == ["outdoor", "outdoor"]
    assert stamped["license"].to_pylist() == ["CC BY 4.0", "CC0 1.0"]
    assert stamped.schema == schemas.IMAGES
    assert sources.with_source_columns(pa.table({"image_id": ["x:1"]}), Limited()).column_names == ["image_id"]


def test_require_folder_names_the_kind_and_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"source folder not found: vg: {tmp_path / 'nope'}"):
        VgSource().check(sources.parse_config({"kind": "vg", "path": tmp_path / "nope"}))


def test_read_file_under_refuses_paths_that_leave_the_folder_and_names_missing_files(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "a.jpg").write_bytes(b"abc")
    (tmp_path / "secret.jpg").write_bytes(b"no")
    assert sources.read_file_under(tmp_path / "images", "a.jpg") == b"abc"
    for relative, code in [("../secret.jpg", "outside_folder"), ("/etc/passwd", "outside_folder"),
                           ("b.jpg", "missing_file"), ("", "no_file_path"), (".", "missing_file")]:
        with pytest.raises(sources.ImageUnavailable) as caught:
            sources.read_file_under(tmp_path / "images", relative)
        assert caught.value.code == code and str(tmp_path) not in str(caught.value)  # no absolute path in a reason
