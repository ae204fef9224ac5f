"""`reasonvqa verify` covers the regions table and the questions' evidence region ids."""

import numpy as np
import pyarrow as pa
from pycocotools import mask as mask_utils

from reasonvqa import schemas
from reasonvqa.tasks.release.verify import verify_release
from reasonvqa.tasks.release.verify_regions import EvidenceTally, check_regions
from reasonvqa.tasks.release.writer import write_release


def mask(h=30, w=40):
    bits = np.zeros((h, w), dtype=np.uint8, order="F")
    bits[2:10, 3:9] = 1
    return {"size": [h, w], "counts": mask_utils.encode(bits)["counts"].decode("ascii")}


REGIONS = schemas.from_rows([
    dict(region_id="sa1b:1/g1", image_id="sa1b:1", x=3.0, y=2.0, w=6.0, h=8.0, area=48.0, mask=mask(), origin="annotation:sa1b"),
    dict(region_id="vg:2/g5", image_id="vg:2", label="car", x=1.0, y=1.0, w=5.0, h=5.0, area=25.0, origin="annotation:vg"),
    dict(region_id="vg:2/g6", image_id="vg:2", label="car", x=20.0, y=1.0, w=5.0, h=5.0, area=25.0, origin="annotation:vg"),
], schemas.REGIONS)


def grounded(qid, image, task, answer, evidence, halluc=False, basis="taxonomy"):
    return dict(question_id=qid, image_id=image, image_source=image.split(":")[0], question=f"Q {qid}?", answer=answer,
                property_id=f"grounded:{task}", kind="grounded", task_type=task, evidence_region_ids=evidence,
                is_hallucination=halluc, n_hop=0, absence_basis=basis if halluc else None)


def release(tmp_path, train_rows, test_rows, regions=REGIONS):
    splits = {"train": schemas.from_rows(train_rows, schemas.QUESTIONS), "test": schemas.from_rows(test_rows, schemas.QUESTIONS)}
    return write_release(tmp_path, "demo", "1.0.0", splits, pool=pa.concat_tables(list(splits.values())), stats_dir=None,
                         config={}, inputs={}, tables={"regions": regions})


def test_a_consistent_grounded_release_verifies(tmp_path):
    path = release(tmp_path, [grounded("a", "vg:2", "counting", "2", ["vg:2/g5", "vg:2/g6"]),
                              grounded("b", "vg:2", "counting", "There are no dogs in the image.", [], halluc=True)],
                   [grounded("c", "sa1b:1", "comparison", "the marked region 1", ["sa1b:1/g1"])])
    assert verify_release(path) == []


def test_broken_evidence_is_reported_per_split(tmp_path):
    path = release(tmp_path, [grounded("a", "vg:2", "counting", "3", ["vg:2/g5", "vg:2/g6"]),
                              grounded("b", "vg:2", "counting", "There are no dogs.", ["vg:2/g5"], halluc=True),
                              grounded("d", "vg:2", "spatial", "left", ["vg:2/g9", "sa1b:1/g1"])],
                   [grounded("c", "sa1b:1", "comparison", "x", [])])
    problems = verify_release(path)
    assert "train: 1 evidence regions missing from regions/ (first: ['d'])" in problems
    assert "train: 1 evidence regions of another image (first: ['d'])" in problems
    assert "train: 1 hallucination questions with evidence (first: ['b'])" in problems
    assert "train: 1 counting answers that are not the number of evidence regions (first: ['a'])" in problems
    assert "test: 1 grounded questions without evidence (first: ['c'])" in problems


def test_masks_that_are_not_coco_rle_and_duplicate_ids_are_reported():
    bad = schemas.from_rows([
        dict(region_id="x/g1", image_id="x", x=0.0, y=0.0, w=1.0, h=1.0, mask={"size": [0, 4], "counts": "abc"}),
        dict(region_id="x/g1", image_id="x", x=0.0, y=0.0, w=-1.0, h=1.0),
        dict(region_id="x/g2", image_id="x", x=0.0, y=0.0, w=1.0, h=1.0, mask={"size": [3, 4], "counts": "é"}),
    ], schemas.REGIONS)
    assert check_regions(bad) == ["regions: duplicate region_id", "regions: 1 regions without a box of non-negative size",
                                  "regions: 2 masks that are not COCO RLE (first: ['x/g1', 'x/g2'])"]
    assert check_regions(REGIONS) == []


def evidence_problems(split: str, regions: pa.Table | None, *parts: pa.Table) -> list[str]:
    """The evidence problems ``verify_release`` reports for a split read as ``parts`` (``EvidenceTally``)."""
    tally = EvidenceTally()
    for part in parts:
        tally.add(part, regions)
    return tally.problems(split)


def test_template_rows_without_evidence_ids_are_not_checked():
    table = schemas.from_rows([dict(question_id="t", image_id="vg:1", question="Q?", answer="A", kind="template")],
                              schemas.QUESTIONS)
    assert evidence_problems("train", None, table) == []


def per_row_evidence(split, questions, regions) -> list[str]:
    """``evidence_problems`` one Python row at a time (what the Arrow checks must equal)."""
    image_of = dict(zip(regions["region_id"].to_pylist(), regions["image_id"].to_pylist())) if regions is not None else {}
    found = {"missing": [], "foreign": [], "halluc": [], "empty": [], "count": []}
    for q in questions.to_pylist():
        evidence = q["evidence_region_ids"] or []
        for rid in evidence:
            if rid not in image_of:
                found["missing"].append(q["question_id"])
            elif image_of[rid] != q["image_id"]:
                found["foreign"].append(q["question_id"])
        if q["is_hallucination"] and evidence:
            found["halluc"].append(q["question_id"])
        if q["kind"] in ("grounded", "grounded_vlm") and not q["is_hallucination"] and not evidence:
            found["empty"].append(q["question_id"])
        if (q["kind"] == "grounded" and q["task_type"] == "counting" and not q["is_hallucination"]
                and q["answer"] != str(len(evidence))):
            found["count"].append(q["question_id"])
    names = {"missing": "evidence regions missing from regions/", "foreign": "evidence regions of another image",
             "halluc": "hallucination questions with evidence", "empty": "grounded questions without evidence",
             "count": "counting answers that are not the number of evidence regions"}
    return [f"{split}: {len(found[k])} {names[k]} (first: {sorted(set(found[k]))[:5]})" for k in names if found[k]]


def test_the_evidence_checks_equal_the_per_row_checks_on_a_mixed_pool():
    rng = np.random.default_rng(4)
    region_ids = REGIONS["region_id"].to_pylist() + ["gone/g1"]
    rows = []
    for i in range(300):
        image = ["vg:2", "sa1b:1", None][i % 3]
        evidence = None if i % 11 == 0 else [region_ids[j] for j in rng.integers(0, 4, size=i % 4)]
        rows.append(dict(question_id=f"q{rng.integers(0, 10_000):05d}", image_id=image, question="Q?",
                         answer=["0", "1", "2", "3", None][i % 5], kind=["grounded", "grounded_vlm", "template", None][i % 4],
                         task_type=["counting", "spatial", None][i % 3], evidence_region_ids=evidence,
                         is_hallucination=[False, True, None][i % 3 if i % 2 else 0]))
    table = schemas.from_rows(rows, schemas.QUESTIONS)
    chunked = pa.concat_tables([table.slice(0, 100), table.slice(100)])
    for regions in (REGIONS, None):
        expected = per_row_evidence("pool", table, regions)
        assert len(expected) == (5 if regions is not None else 4)  # every check finds something (no regions: none foreign)
        assert evidence_problems("pool", regions, table) == expected
        assert evidence_problems("pool", regions, chunked) == expected
        assert evidence_problems("pool", regions, table.slice(0, 120), table.slice(120, 7), table.slice(127)) == expected


def test_a_split_in_several_parts_is_checked_as_one(tmp_path, monkeypatch):
    from reasonvqa.tasks.release import writer

    train = [grounded("a", "vg:2", "counting", "3", ["vg:2/g5", "vg:2/g6"]),
             grounded("b", "vg:2", "counting", "There are no dogs.", ["vg:2/g5"], halluc=True),
             grounded("d", "vg:2", "spatial", "left", ["vg:2/g9", "sa1b:1/g1"]),
             grounded("e", "vg:2", "spatial", "", ["vg:9/g1"]),
             grounded("e", "vg:2", "counting", "1", ["vg:2/g6"])]  # "e" twice, in another part
    test = [grounded("c", "sa1b:1", "comparison", "x", [])]
    whole = verify_release(release(tmp_path / "one", train, test))
    monkeypatch.setattr(writer, "ROWS_PER_FILE", 2)
    parted = release(tmp_path / "parts", train, test)
    assert len(list((parted / "train").glob("part-*.parquet"))) == 3
    assert verify_release(parted) == whole
    assert "train: duplicate question_id" in whole and "train: 1 questions with an empty answer" in whole
    assert "train: 2 evidence regions missing from regions/ (first: ['d', 'e'])" in whole


def test_a_null_evidence_slot_that_spans_values_counts_as_empty():
    values = pa.array(["vg:2/g5", "vg:2/g6", "vg:9/g1"])
    evidence = pa.ListArray.from_arrays(pa.array([0, 2, 3], pa.int32()), values, mask=pa.array([True, False]))
    table = schemas.from_rows([grounded("a", "vg:2", "counting", "0", None), grounded("b", "vg:2", "spatial", "x", None)],
                              schemas.QUESTIONS)
    table = table.set_column(table.schema.get_field_index("evidence_region_ids"), "evidence_region_ids", evidence)
    assert evidence.to_pylist() == [None, ["vg:9/g1"]]
    assert evidence_problems("train", REGIONS, table) == ["train: 1 evidence regions missing from regions/ (first: ['b'])",
                                                       "train: 1 grounded questions without evidence (first: ['a'])"]


def test_every_released_hallucination_question_names_a_known_basis(tmp_path):
    path = release(tmp_path, [grounded("a", "vg:2", "counting", "There are no dogs.", [], halluc=True, basis=None),
                              grounded("b", "vg:2", "counting", "There are no cats.", [], halluc=True, basis="hunch")],
                   [grounded("c", "sa1b:1", "counting", "There are no cows.", [], halluc=True, basis="review")])
    assert verify_release(path) == ["train: 2 hallucination questions without a known absence basis (hunch: 1, null: 1)"]
