import json

import pytest

from reasonvqa.tasks.sources.scan import scan_source

from tests.tasks.sources.conftest import gldv2_folder


def test_scan_vg_sample(vg_sample):
    summary = scan_source("vg", vg_sample, shard_size=2)
    assert summary == {"source": "vg", "path": str(vg_sample), "images": 5, "objects": 177, "relations": 143,
                       "attributes": 167, "regions": 0, "rejected": {"duplicate_relation": 15}, "shards": 3}
    json.dumps(summary)  # JSON-able for the CLI


def test_scan_gldv2(tmp_path):
    summary = scan_source("gldv2", gldv2_folder(tmp_path))
    assert (summary["images"], summary["objects"], summary["relations"], summary["rejected"]) == (4, 4, 0, {})


def test_scan_unknown_kind(tmp_path):
    with pytest.raises(ValueError, match="unknown source kind 'sa1b'"):
        scan_source("sa1b", tmp_path)
