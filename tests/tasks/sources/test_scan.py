import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reasonvqa.flows.cli import app
from reasonvqa.paths import SAMPLE_DIR

from reasonvqa.tasks.sources.scan import scan_source

from tests.tasks.sources.conftest import gldv2_folder


def test_scan_vg_sample(vg_sample):
    summary = scan_source("vg", vg_sample, shard_size=2)
    assert summary == {"source": "vg", "path": str(vg_sample), "images": 5, "objects": 177, "relations": 143,
                       "attributes": 167, "regions": 0, "rejected": {"duplicate_relation": 15}, "shards": 3}
    json.dumps(summary)  # JSON-able for the CLI


def test_scan_the_whole_vg_sample():
    """The bundled 50 real images (data/SOURCES.md): v1.2 records of images 1-5, then images 6-50 of the later
    release. 219 of its relationships and 143 of its attributes name an object that objects.json does not hold
    (nor any merged_object_ids): real noise, each a reject with its reason."""
    summary = scan_source("vg", SAMPLE_DIR / "vg")
    assert summary == {"source": "vg", "path": str(SAMPLE_DIR / "vg"), "images": 50, "objects": 1555, "relations": 1186,
                       "attributes": 1740, "regions": 0, "shards": 1,
                       "rejected": {"attribute_object_unknown": 143, "duplicate_attribute": 49, "duplicate_relation": 245,
                                    "relation_endpoint_unknown": 219}}


def test_scan_gldv2(tmp_path):
    summary = scan_source("gldv2", gldv2_folder(tmp_path))
    assert (summary["images"], summary["objects"], summary["relations"], summary["rejected"]) == (4, 4, 0, {})


def test_scan_unknown_kind(tmp_path):
    with pytest.raises(ValueError, match="unknown source kind 'coco'"):
        scan_source("coco", tmp_path)


NUSCENES_V10_EXCERPT = Path(__file__).parent / "data" / "nuscenes_v1.0_excerpt"


@pytest.mark.parametrize("kind, path, expected", [
    ("sa1b", SAMPLE_DIR / "sa1b", {"images": 1, "objects": 0, "regions": 12, "rejected": {}}),
    ("nuscenes", SAMPLE_DIR / "nuscenes", {"images": 7, "objects": 6, "regions": 6, "rejected": {}}),
    ("droid", SAMPLE_DIR / "droid", {"images": 6, "objects": 0, "regions": 0, "rejected": {}}),
    # the real nuScenes v1.0 excerpt: its sample_data rows point at samples the excerpt lacks
    ("nuscenes", NUSCENES_V10_EXCERPT, {"images": 0, "objects": 0, "regions": 0,
                                        "rejected": {"nuscenes_missing_token:sample": 2}}),
])
def test_sources_scan_cli_counts_grounded_sources(kind, path, expected):
    result = CliRunner().invoke(app, ["sources", "scan", "--source", kind, "--path", str(path)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert {k: summary[k] for k in expected} == expected and summary["source"] == kind
