"""The release's croissant.json validates with mlcroissant and describes every Parquet folder and column.

mlcroissant runs in a subprocess: it installs absl logging handlers bound to the stderr of the
moment, which pytest closes after the test (later tests then lose their stderr).
"""

import json
import subprocess
import sys

import pyarrow as pa
import pytest

from reasonvqa import schemas
from reasonvqa.tasks.release.embed import RELEASE_IMAGES
from reasonvqa.tasks.release.writer import write_release

_CHECK = """
import json, sys
import mlcroissant as mlc
try:
    dataset = mlc.Dataset(jsonld=sys.argv[1])
except mlc.ValidationError as error:
    print(json.dumps({"error": str(error)}))
    sys.exit(0)
metadata = dataset.metadata
print(json.dumps({
    "name": metadata.name, "version": metadata.version,
    "record_sets": {r.name: [f.name for f in r.fields] for r in metadata.record_sets},
    "warnings": sorted(w.split("] ")[1] for w in metadata.ctx.issues.warnings),
    "test_answers": [r["test/answer"].decode() for r in dataset.records("test")],
}))
"""


def croissant_check(path) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHECK, str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def release(tmp_path, splits):
    pool = pa.concat_tables(list(splits.values()))
    images = schemas.from_rows([{"image_id": "vg:1", "source": "vg", "source_image_id": "1", "width": 8, "height": 6,
                                 "url": "http://127.0.0.1:1/1.jpg", "license": "CC BY 4.0"}], schemas.IMAGES)
    return write_release(tmp_path, "demo", "1.0.0", splits, pool=pool, stats_dir=None, config={"seed": 0},
                         inputs={"vg": "s1"}, tables={"images": images})


def test_croissant_validates_lists_each_folder_and_reads_back_the_records(release):
    found = croissant_check(release / "croissant.json")
    assert (found["name"], found["version"]) == ("demo", "1.0.0")
    assert list(found["record_sets"]) == ["train", "test", "pool", "images"]
    assert found["record_sets"]["train"] == [f"train/{c}" for c in schemas.QUESTIONS.names]
    assert found["record_sets"]["images"] == [f"images/{c}" for c in RELEASE_IMAGES.names]  # with image, pixels
    # the one recommendation left out: a publication date would make the bytes depend on the day
    assert found["warnings"] == ['Property "https://schema.org/datePublished" is recommended, but does not exist.']
    assert found["test_answers"] == ["Madrid"]
    document = json.loads((release / "croissant.json").read_text())
    assert {d["includes"] for d in document["distribution"]} == {
        "train/*.parquet", "test/*.parquet", "pool/*.parquet", "images/*.parquet"}


def test_mlcroissant_refuses_a_field_without_its_file_set(release):
    document = json.loads((release / "croissant.json").read_text())
    document["distribution"] = [d for d in document["distribution"] if d["@id"] != "test-parquet"]
    broken = release.parent / "broken.json"
    broken.write_text(json.dumps(document))
    assert "test-parquet" in croissant_check(broken)["error"]
