import json

import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa import schemas
from reasonvqa.tasks.release.verify import verify_release
from reasonvqa.tasks.release.writer import write_release
from tests.tasks.release.conftest import question


def _write(out, splits):
    pool = pa.concat_tables(list(splits.values()))
    return write_release(out, "demo", "1", splits, pool=pool, stats_dir=None,
                         config={}, config_hash="h", inputs={})


def test_one_changed_byte_fails_verification(tmp_path, splits):
    path = _write(tmp_path, splits)
    part = path / "train" / "part-00000.parquet"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0x01
    part.write_bytes(bytes(data))
    assert verify_release(path) == ["train/part-00000.parquet: sha256 mismatch"]


def test_missing_and_extra_files_are_reported(tmp_path, splits):
    path = _write(tmp_path, splits)
    (path / "test" / "part-00000.parquet").unlink()
    (path / "notes.txt").write_text("x")
    problems = verify_release(path)
    assert "test/part-00000.parquet: listed in manifest but missing" in problems
    assert "notes.txt: file not listed in manifest" in problems


def test_no_manifest(tmp_path):
    assert verify_release(tmp_path) == [f"{tmp_path}/manifest.json: missing manifest"]


def test_content_invariants_are_checked(tmp_path):
    bad = {
        "train": schemas.from_rows(
            [question("q1", "vg:1", "Paris", ["Paris", "Lyon", "Lyon", "Nice"]),
             question("q2", "vg:2", " ", ["a", "b", "c", " "])], schemas.QUESTIONS),
        "test": schemas.from_rows([question("q3", "vg:2", "Rome", ["Rome", "a", "b", "c"])], schemas.QUESTIONS),
    }
    problems = verify_release(_write(tmp_path, bad))
    assert "train: 1 questions with an empty answer" in problems
    assert "train: 1 questions whose choices are not the answer + 3 distinct distractors" in problems
    assert "image vg:2 is in both train and test" in problems


def test_tampered_manifest_counts(tmp_path, splits):
    path = _write(tmp_path, splits)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["counts"]["train"] = 99
    (path / "manifest.json").write_text(json.dumps(manifest))
    assert verify_release(path) == ["train: 3 rows, manifest says 99"]
