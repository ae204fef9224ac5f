import json

import pytest

import pyarrow as pa

from reasonvqa import schemas
from reasonvqa.flows.config import sample_config
from reasonvqa.schemas import MANIFEST
from reasonvqa.tasks.release.verify import check_digest, check_manifest, scan_release, verify_release
from reasonvqa.tasks.release.writer import MANIFEST_DIGEST, digest_line, manifest_bytes, write_release
from tests.tasks.release.conftest import question


def _write(out, splits):
    pool = pa.concat_tables(list(splits.values()))
    return write_release(out, "demo", "1.0.0", splits, pool=pool, stats_dir=None,
                         config={}, inputs={})


def test_one_changed_byte_fails_verification(tmp_path, splits):
    path = _write(tmp_path, splits)
    part = path / "train" / "part-00000.parquet"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0x01
    part.write_bytes(bytes(data))
    problems = verify_release(path)
    assert problems[0] == "train/part-00000.parquet: sha256 mismatch"
    # a flipped byte may also leave the part unreadable; nothing else may be blamed
    assert set(problems[1:]) <= {"train: a Parquet part cannot be read"}


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
             question("q2", "vg:2", " ", ["a", "b", "c", " "]),
             question("", "vg:4", "Oslo", ["Oslo", "a", "b", "c"])], schemas.QUESTIONS),
        "test": schemas.from_rows([question("q3", "vg:2", "Rome", ["Rome", "a", "b", "c"])], schemas.QUESTIONS),
    }
    problems = verify_release(_write(tmp_path, bad))
    assert "train: 1 questions with an empty answer" in problems
    assert "train: 1 questions without a question_id (null or empty)" in problems
    assert "train: duplicate question_id" not in problems
    assert "train: 1 questions whose choices are not the answer + 3 distinct distractors" in problems
    assert "image vg:2 is in both train and test" in problems


def test_a_free_form_question_may_have_empty_choices_a_templated_one_may_not(tmp_path):
    """``[]`` choices are no choices, as null: fine for a free-form kind, a problem for a templated question."""
    rows = [question("q1", "vg:1", "yes", None, kind="verified", property_id=None),
            question("q2", "vg:2", "no", [], kind="verified", property_id=None),
            question("q3", "vg:3", "Oslo", []),
            question("q4", "vg:4", "Oslo", [], kind="template")]
    splits = {"train": schemas.from_rows(rows, schemas.QUESTIONS),
              "test": schemas.from_rows([question("q5", "vg:5", "Rome", ["Rome", "a", "b", "c"])], schemas.QUESTIONS)}
    problems = verify_release(_write(tmp_path, splits))
    assert "train: 2 questions whose choices are not the answer + 3 distinct distractors" in problems
    assert not [p for p in problems if p.startswith("test:")]


def _resign(path, edit):
    """Edit the manifest and write a matching digest, as someone covering their tracks would."""
    manifest = json.loads((path / MANIFEST).read_text())
    edit(manifest)
    raw = manifest_bytes(manifest)
    (path / MANIFEST).write_bytes(raw)
    (path / MANIFEST_DIGEST).write_text(digest_line(raw))


def test_tampered_manifest_counts(tmp_path, splits):
    path = _write(tmp_path, splits)
    _resign(path, lambda m: m["counts"].__setitem__("train", 99))
    assert verify_release(path) == ["train: 3 rows, manifest says 99"]


def test_an_edited_manifest_without_a_new_digest_fails_on_the_digest(tmp_path, splits):
    path = _write(tmp_path, splits)
    (path / MANIFEST).write_text((path / MANIFEST).read_text().replace('"demo"', '"dema"'))
    assert verify_release(path)[0] == "manifest.json: sha256 does not match manifest.json.sha256"
    (path / MANIFEST_DIGEST).unlink()
    assert verify_release(path)[0] == "manifest.json.sha256: missing (the manifest cannot be checked)"


@pytest.mark.parametrize("edit, problem", [
    (lambda m: m["config"].__setitem__("seed", 1), "manifest.json: config_hash is not the sha256 of the config"),
    (lambda m: m.__setitem__("config_hash", "0" * 64), "manifest.json: config_hash is not the sha256 of the config"),
    (lambda m: m.__setitem__("name", "demb"), "manifest.json: name/version 'demb'/'1.0.0' != folder 'demo'/'1.0.0'"),
    (lambda m: m.__setitem__("version", "1.0.1"), "manifest.json: name/version 'demo'/'1.0.1' != folder 'demo'/'1.0.0'"),
    (lambda m: m["splits"].remove("test"),
     "manifest.json: splits ['train'] + pool do not match the folders holding part-NNNNN.parquet files ['pool', 'test', 'train']"),
    (lambda m: m.__setitem__("splits", ["test", "train"]), None),  # order is free; content must still match
    (lambda m: m.__setitem__("extra", 1), "manifest.json: keys"),
    (lambda m: m["files"].pop("README.md"), "README.md: file not listed in manifest"),
    (lambda m: m.__setitem__("schema_version", "0"), "schema version '0' != supported"),
])
def test_every_recomputable_figure_is_recomputed(tmp_path, splits, edit, problem):
    path = _write(tmp_path, splits)
    _resign(path, edit)
    problems = verify_release(path)
    if problem is None:
        assert problems == []
    else:
        assert any(p.startswith(problem) for p in problems), problems


def test_symlinks_are_refused_even_when_their_target_matches(tmp_path, splits):
    path = _write(tmp_path, splits)
    card = path / "README.md"
    (tmp_path / "card.md").write_bytes(card.read_bytes())
    card.unlink()
    card.symlink_to(tmp_path / "card.md")
    assert verify_release(path) == ["README.md: symlink in a release (refused)"]


def test_a_symlinked_split_folder_is_refused(tmp_path, splits):
    path = _write(tmp_path, splits)
    (path / "test").rename(tmp_path / "elsewhere")
    (path / "test").symlink_to(tmp_path / "elsewhere")
    assert verify_release(path) == ["test: symlink in a release (refused)"]


def test_an_empty_parquet_file_in_place_of_a_split_fails(tmp_path, splits):
    path = _write(tmp_path, splits)
    (path / "test" / "part-00000.parquet").write_bytes(b"")
    problems = verify_release(path)
    assert "test/part-00000.parquet: size 0 != " in problems[0]


def test_every_single_byte_edit_of_the_manifest_fails(tmp_path, splits):
    """Each byte of manifest.json flipped (and deleted): the digest catches it, and so does recomputation
    when the digest is forged to match."""
    config = json.loads(sample_config().canonical_json())  # a real config: every kind of JSON value
    path = write_release(tmp_path, "reasonvqa-sample", "0.1.0", splits, pool=pa.concat_tables(list(splits.values())),
                         stats_dir=None, config=config, inputs={"knowledge": "sha256:ab12", "source:vg": "sha256:cd34"})
    raw = (path / MANIFEST).read_bytes()
    found = scan_release(path)
    assert check_manifest(raw, path, found) == [] and check_digest(path, raw) == []
    undetected = []
    for pos in range(len(raw)):
        for edited in (raw[:pos] + bytes([raw[pos] ^ 0x01]) + raw[pos + 1:], raw[:pos] + raw[pos + 1:]):
            if not check_digest(path, edited):
                undetected.append((pos, "digest"))
            if not check_manifest(edited, path, found):  # a forger who also rewrote the digest file
                undetected.append((pos, edited[max(0, pos - 20):pos + 20]))
    assert undetected == []
    assert len(raw) > 2000


def test_a_record_table_beside_the_questions_is_listed_and_checked(tmp_path, splits):
    from reasonvqa import schemas

    regions = schemas.from_rows([{"region_id": "vg:1/g1", "image_id": "vg:1", "x": 1.0, "y": 2.0, "w": 3.0, "h": 4.0,
                                  "origin": "annotation:sa1b"}], schemas.REGIONS)
    path = write_release(tmp_path, "demo", "1.0.0", splits, pool=splits["train"], stats_dir=None,
                         config={}, inputs={}, tables={"regions": regions})
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["tables"] == ["regions"] and manifest["counts"]["regions"] == 1
    assert verify_release(path) == []
    (path / "regions" / "part-00000.parquet").unlink()
    problems = verify_release(path)
    assert problems and all("regions" in p for p in problems)


def test_an_image_group_in_both_splits_is_reported(tmp_path, splits):
    """Two images of one GLDv2 landmark, one per split: verify names the group (an image alone is its own)."""
    splits = {**splits, "test": schemas.from_rows(
        [question("q4", "gldv2:0a1b2c3d4e5f6789", "8848.86 m", ["8848.86 m", "8000 m", "7500 m", "9100 m"],
                  answer_category="number", n_hop=1, route=["P2048"], property_id="P2048")], schemas.QUESTIONS)}
    images = schemas.from_rows([dict.fromkeys(schemas.IMAGES.names) | row for row in (
        {"image_id": "gldv2:7e4627eb6f721857", "source": "gldv2", "group_id": "27"},
        {"image_id": "gldv2:0a1b2c3d4e5f6789", "source": "gldv2", "group_id": "27"},
        {"image_id": "vg:1", "source": "vg", "group_id": None})], schemas.IMAGES)
    pool = pa.concat_tables(list(splits.values()))
    path = write_release(tmp_path / "a", "demo", "1.0.0", splits, pool=pool, stats_dir=None, config={}, inputs={},
                         tables={"images": images})
    assert verify_release(path) == ["image group gldv2:group:27 is in both train and test"]
    other = images.set_column(images.schema.get_field_index("group_id"), "group_id", pa.array(["27", "28", None]))  # two landmarks: disjoint
    path = write_release(tmp_path / "b", "demo", "1.0.0", splits, pool=pool, stats_dir=None, config={}, inputs={},
                         tables={"images": other})
    assert verify_release(path) == []
