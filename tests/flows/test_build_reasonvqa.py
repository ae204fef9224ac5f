"""End to end: build-reasonvqa on the bundled sample, with the real Oxigraph mirror and Prefect API."""

import json
import re
from pathlib import Path

import polars as pl
import pytest

from reasonvqa.flows.build_reasonvqa import build_reasonvqa
from reasonvqa.flows.run_report import stage_report
from reasonvqa.flows.config import sample_config
from reasonvqa.stage import stage_stats
from reasonvqa.tasks.questions.grounded import plural
from reasonvqa.tasks.release.verify import verify_release

pytestmark = pytest.mark.integration


def test_the_sample_release_verifies(sample_release):
    # the same build on Dask, partitioned, published to an fsspec URL, gives these bytes: test_build_work_url.py
    assert sample_release.parts[-2:] == ("reasonvqa-sample", "0.1.0")
    assert verify_release(sample_release) == []


def test_release_holds_every_kind_of_question(sample_release):
    release = sample_release
    questions = pl.concat([pl.read_parquet(release / s / "*.parquet") for s in ("train", "test")])
    assert set(questions["n_hop"].to_list()) == {0, 1, 2, 3}  # 0: grounded questions ask no knowledge hop
    assert set(questions["image_source"].to_list()) == {"vg", "gldv2", "sa1b", "nuscenes"}
    assert set(questions.filter(pl.col("kind") == "template")["image_source"].to_list()) == {"vg", "gldv2"}
    assert questions["has_scene_graph"].any()
    assert questions.filter(pl.col("answer").str.strip_chars() == "").height == 0
    assert questions.filter(pl.col("kind") == "template").select(
        (pl.col("choices").list.len() == 4) & (pl.col("choices").list.n_unique() == 4)
        & pl.col("choices").list.contains(pl.col("answer"))
    ).to_series().all()
    train_images = set(pl.read_parquet(release / "train" / "*.parquet")["image_id"])
    test_images = set(pl.read_parquet(release / "test" / "*.parquet")["image_id"])
    assert train_images and test_images and not train_images & test_images


def test_no_image_group_of_the_sample_is_in_both_splits(sample_release):
    """The sample's GLDv2 landmarks (3-4 images each) and its nuScenes scene (4 cameras) each go to one split."""
    release = sample_release
    images = pl.read_parquet(release / "images" / "*.parquet", columns=["image_id", "source", "group_id"])
    group = {i: (f"{s}:{g}" if g is not None else i) for i, s, g in images.iter_rows()}
    sides = {split: {group[i] for i in pl.read_parquet(release / split / "*.parquet")["image_id"]}
             for split in ("train", "test")}
    assert sides["train"] and sides["test"] and not sides["train"] & sides["test"]
    several = {g for g in group.values() if list(group.values()).count(g) > 1}
    assert len(several) == 4 and several <= sides["train"] | sides["test"]  # 3 landmarks, 1 scene
    report = json.loads((release / "stats" / "split_report.json").read_text())["groups"]
    assert report["with_several_images"]["groups"] == 4
    assert report["train"] == len(sides["train"]) and report["test"] == len(sides["test"])
    assert "none in both" in (release / "stats" / "SUMMARY.md").read_text()


def test_the_sample_release_holds_1000_grounded_questions_on_the_50_real_vg_images(sample_release):
    """The bundled 50 real Visual Genome images (data/SOURCES.md) give the release 1,000+ grounded questions, n >= 100
    in every grounded task type, real and hallucination ones in each."""
    release = sample_release
    questions = pl.concat([pl.read_parquet(release / s / "*.parquet") for s in ("train", "test")])
    grounded = questions.filter(pl.col("kind") == "grounded")
    assert grounded.height >= 1000
    by_type = dict(grounded.group_by("task_type").len().iter_rows())
    assert set(by_type) == {"identification", "attribute", "spatial", "counting", "comparison"}
    assert min(by_type.values()) >= 100, by_type
    # real and hallucination questions in every task type; identification's hallucination questions take the
    # position form ("What is the object above the <absent class>?"), whose real questions the share's thinning keeps
    kinds = dict(grounded.group_by("task_type").agg(pl.col("is_hallucination").unique().sort()).iter_rows())
    assert kinds == {t: [False, True] for t in ("attribute", "spatial", "counting", "comparison", "identification")}
    position = grounded.filter(pl.col("question").str.starts_with("What is the object "))
    assert 0 < position["is_hallucination"].mean() <= 0.6, position["is_hallucination"].value_counts()  # 27 of 53
    report = json.loads((release / "stats" / "balance_report.json").read_text())["hallucination_share"]
    # every task type and domain within 10 points of the share; SA-1B (unlabeled masks) exempt by the stated rule
    assert report["outside_tolerance"] == [] and set(report["by_task_type"]) == set(by_type)
    assert report["exempt"]["by_source"] == {"sa1b": grounded.filter(pl.col("image_source") == "sa1b").height} != {"sa1b": 0}
    assert "indoor/outdoor" in report["exempt"]["by_visual_domain"] and "indoor/outdoor" not in report["by_visual_domain"]
    assert report["exempt"]["rule"] in (release / "README.md").read_text()  # the card states the rule
    # every image but vg:46, whose objects.json record holds no object (its 38 relationships name unknown objects)
    vg = set(pl.read_parquet(release / "images" / "*.parquet").filter(pl.col("source") == "vg")["image_id"])
    assert vg == {f"vg:{n}" for n in range(1, 51)} - {"vg:46"}
    assert set(grounded.filter(pl.col("image_source") == "vg")["image_id"]) == vg


def test_sample_release_scan_single_answers_typed_subjects_and_bias_report(sample_release):
    from reasonvqa.tasks.questions.bank import load_bank
    from reasonvqa.tasks.questions.fidelity import scan_release

    release = sample_release
    work = next((release.parents[1] / ".work").iterdir())
    report = scan_release(release, work, load_bank())
    assert report["questions"] > 0 and report["problems"] == []  # every question traced, typed and single-answer
    bias = json.loads((release / "stats" / "bias.json").read_text())
    # choice-only baselines are scored on every released question with choices (train and test), the
    # question-only prior on test; the sample is too small (tens of questions) for any target to be judged:
    # tests/tasks/balance/test_bias.py checks the targets on a larger synthetic pool
    released = pl.concat([pl.read_parquet(release / split / "*.parquet") for split in ("train", "test")])
    with_choices = released.filter((pl.col("choices").is_not_null()) & (pl.col("choices").list.len() > 0))
    numeric = with_choices.filter(pl.col("answer_category").is_in(["number", "date"])).height
    assert {"most_frequent_choice", "question_prior"} <= set(bias["baselines"])
    assert bias["intervals"]["most_frequent_choice"]["n"] == with_choices.height
    assert ({"closest_to_mean", "median"} <= set(bias["baselines"])) == (numeric > 0)
    if numeric:
        assert bias["intervals"]["closest_to_mean"]["n"] == numeric
    assert all(status == "insufficient_n" for status in bias["targets"]["checks"].values())
    assert bias["targets"]["met"] is None
    assert bias["chance"] == 0.25 and bias["targets"]["choice_only_margin"] == 0.1


def test_every_shard_of_every_stage_adds_up(sample_release):
    release = sample_release
    work = next((release.parents[1] / ".work").iterdir())
    report = stage_report(work)
    assert {"sources_vg", "sources_gldv2", "link", "facts", "questions"} <= set(report)
    for stage in work.rglob("_stats"):
        for shard in stage_stats(stage.parent):
            assert shard["rows_in"] == shard["rows_out"] + sum(shard["rejected"].values()), (stage, shard)
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["counts"]["train"] + manifest["counts"]["test"] <= manifest["counts"]["pool"]
    assert set(manifest["inputs"]) == {"source:vg", "source:gldv2", "source:sa1b", "source:nuscenes", "knowledge",
                                       "knowledge_date", "knowledge_content", "grounded_rules"}
    assert manifest["inputs"]["knowledge_date"] == "2021-05-26"  # the bundled entities' newest `modified`
    # the mirror's facts are named by its snapshot id, the undated input the content hash keeps
    assert manifest["inputs"]["knowledge_content"] == manifest["inputs"]["knowledge"]


def _released(release: Path) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(release / s / "*.parquet") for s in ("train", "test")])


def test_grounded_questions_of_the_sample_are_proved_by_the_release_regions(sample_release):
    release = sample_release
    work = next((release.parents[1] / ".work").iterdir())
    questions = _released(release).filter(pl.col("kind") == "grounded")
    regions = {r["region_id"]: r for r in pl.read_parquet(release / "regions" / "*.parquet").to_dicts()}
    assert set(questions["task_type"]) == {"identification", "attribute", "spatial", "counting", "comparison"}  # no text: no OCR
    assert {"vg", "sa1b", "nuscenes"} <= set(questions["image_source"])
    halluc = questions.filter(pl.col("is_hallucination"))
    assert abs(halluc.height / questions.height - 0.27) < 0.03
    assert any(regions[r]["mask"] is not None for q in questions["evidence_region_ids"] for r in q)  # SA-1B masks
    for q in questions.to_dicts():
        evidence = [regions[r] for r in q["evidence_region_ids"]]
        assert all(r["image_id"] == q["image_id"] for r in evidence)
        if q["is_hallucination"]:
            assert evidence == []
        elif q["task_type"] == "counting":
            assert int(q["answer"]) == len(evidence) and len({r["label"] for r in evidence}) == 1
        elif q["task_type"] == "spatial" and "nearest" not in q["question"]:
            a, b = evidence
            if q["answer"] in ("left", "right"):
                assert (a["x"] + a["w"] < b["x"] if q["answer"] == "left" else b["x"] + b["w"] < a["x"])
            elif q["answer"] in ("above", "below"):
                assert (a["y"] + a["h"] < b["y"] if q["answer"] == "above" else b["y"] + b["h"] < a["y"])
            else:
                assert (a["center_3d"][2] < b["center_3d"][2]) == (q["answer"] == "in front of")
        elif q["task_type"] == "spatial":
            by_x = sorted(evidence, key=lambda r: r["x"])
            nearest = min(by_x, key=lambda r: r["center_3d"][2])
            names = {2: ["left", "right"], 3: ["leftmost", "middle", "rightmost"]}[len(by_x)]
            assert q["answer"] == f"the {names[by_x.index(nearest)]} one"
    labels = pl.read_parquet(work / "corpus_labels.parquet")
    sub_types = {q["template_ids"][0] for q in halluc.to_dicts()}
    assert sub_types == {"hallucination:absent_object", "hallucination:wrong_attribute", "hallucination:impossible_relation"}
    for q in halluc.to_dicts():
        present = set(labels.filter(pl.col("image_id") == q["image_id"])["label"])
        here = [r for r in regions.values() if r["image_id"] == q["image_id"]]
        # questions name a VG object by its synset's lemma, as its region is labeled ("sneakers" -> "gym shoe")
        present |= {r["label"] for r in here if r["label"]}
        if q["template_ids"] == ["hallucination:impossible_relation"]:
            # "No seats are white is to the right of ...": real labels may hold "is"/"are"; the subject is the
            # longest present label the answer starts with
            said = [label for label in present if re.match(rf"No {re.escape(label)} (?:is|are) .+ in the image\.$", q["answer"])]
            assert said, q["answer"]
            subject = max(said, key=len)
            assert sum(r["label"] == subject for r in here) == 1
            continue
        absent = q["answer"].removeprefix("There is no ").removeprefix("There are no ").removesuffix(" in the image.")
        assert absent in q["question"] and absent not in present
        if q["template_ids"] == ["hallucination:wrong_attribute"]:
            attribute = absent.split(" ", 1)[0]  # "blue car", "blue cars" (the asked words are single words)
            label = next(r["label"] for r in here if absent in (f"{attribute} {r['label']}", f"{attribute} {plural(r['label'] or '')}"))
            same = [r for r in here if r["label"] == label]
            assert len(same) == 1 and same[0]["attributes"]
            assert not any(attribute in a.split() for r in same for a in r["attributes"])
        else:
            assert not any(f" {absent} " in f" {label} " for label in present)


def test_the_card_shows_the_breakdown_and_example_pictures(sample_release):
    release = sample_release
    card = (release / "README.md").read_text()
    assert "## Question breakdown" in card and "| evidence regions | questions |" in card and "## Regions" in card
    pictures = re.findall(r"!\[[^]]*\]\((stats/examples/[^)]+\.png)\)", card)
    assert len(pictures) >= 5 and all((release / p).is_file() for p in pictures)
    report = json.loads((release / "stats" / "breakdown.json").read_text())
    assert report["hallucination"] > 0
    # each picture at its image's true size (the images table's), its caption band under it
    from PIL import Image

    sizes = {i: (w, h) for i, w, h in pl.read_parquet(release / "images" / "*.parquet").select(
        "image_id", "width", "height").iter_rows()}
    for example in report["examples"]:
        assert (example["width"], example["height"]) == sizes[example["image_id"]]
        with Image.open(release / "stats" / example["file"]) as picture:
            assert picture.size == (example["width"], example["height"] + example["caption_height"])
    assert "| grounded | hallucination or not, voted by the questions of the same wording" in card


def test_resplit_filters_by_kind_task_type_and_hallucination(sample_release, tmp_path):
    from typer.testing import CliRunner

    from reasonvqa.flows.cli import app

    release = sample_release
    runner = CliRunner()
    result = runner.invoke(app, ["resplit", str(release), "--out", str(tmp_path), "--kinds", "grounded",
                                 "--hallucination", "exclude", "--task-types", "spatial,counting,comparison"])
    assert result.exit_code == 0, result.output
    path = Path(result.output.strip().splitlines()[-1])
    assert verify_release(path) == []
    pool = pl.read_parquet(path / "pool" / "*.parquet")
    assert set(pool["kind"]) == {"grounded"} and not pool["is_hallucination"].any()
    assert set(pool["task_type"]) == {"spatial", "counting", "comparison"}
    regions = pl.read_parquet(path / "regions" / "*.parquet")
    assert set(regions["image_id"]) == set(pool["image_id"])
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["config"]["resplit"]["filters"]["hallucination"] == "exclude"
    only = runner.invoke(app, ["resplit", str(release), "--out", str(tmp_path), "--hallucination", "only",
                               "--kinds", "template"])
    assert only.exit_code == 2 and "match none" in only.output
    bad = runner.invoke(app, ["resplit", str(release), "--out", str(tmp_path), "--hallucination", "some"])
    assert bad.exit_code == 2


# A hand-made build: VG v1.4 shapes (`id`, `merged_object_ids`, subject_id/object_id relations)
# and GLDv2 CSVs (quoted, percent-encoded categories), each with bad records.
VG_IMAGES = [
    {"id": 10, "width": 800, "height": 600, "url": "https://cs.stanford.edu/people/rak248/VG_100K/10.jpg"},
    {"image_id": 11, "width": 640, "height": 480, "url": None},
    "not a record",
    {"id": 13, "width": -5, "height": 100},
]
VG_OBJECTS = [
    {"id": 10, "objects": [
        {"id": 100, "x": 10, "y": 10, "w": 100, "h": 80, "names": ["dog"], "synsets": ["dog.n.01"],
         "merged_object_ids": [90]},
        {"id": 101, "x": 200, "y": 50, "w": 300, "h": 200, "names": ["car"], "synsets": ["car.n.01"]},
        {"id": 102, "x": 900, "y": 700, "w": 50, "h": 50, "names": ["tree"]},
        {"id": 103, "x": "a", "y": 5, "w": 10, "h": 10, "names": ["cat"]},
    ]},
    {"image_id": 11, "objects": [
        {"object_id": 200, "x": 0, "y": 0, "width": 100, "height": 100, "name": "man", "synsets": [{"synset_name": "man.n.01"}]},
    ]},
    {"id": 999, "objects": [{"id": 1, "x": 1, "y": 1, "w": 1, "h": 1, "names": ["x"]}]},
]
VG_RELATIONSHIPS = [
    {"id": 10, "relationships": [
        {"relationship_id": 1000, "predicate": "next to", "subject": {"object_id": 100, "name": "dog"},
         "object": {"object_id": 101, "name": "car"}},
        {"id": 1001, "predicate": "chases", "subject_id": 90, "object_id": 101},
        {"id": 1002, "predicate": "on", "subject_id": 100, "object_id": 55555},
    ]},
]
GLD_FILES = {
    "train.csv": "id,url,landmark_id\n"
                 "381c96e045e92ba9,https://example.org/everest.jpg,11\n"
                 '"593ab7cdd2f58cd6","https://example.org/a,b.jpg",58\n'
                 "70f8cc6a09f4ba12,https://example.org/lisbon.jpg,42\n"
                 "zzzz,https://example.org/e.jpg,11\n"
                 "dddddddddddddddd,https://example.org/h.jpg,9999\n",
    "train_clean.csv": "landmark_id,images\n11,381c96e045e92ba9 nothex\n",
    "train_label_to_category.csv": "landmark_id,category\n"
                                   "11,http://commons.wikimedia.org/wiki/Category:Mount_Everest\n"
                                   '58,"http://commons.wikimedia.org/wiki/Category:Chich%C3%A9n_Itz%C3%A1"\n'
                                   "42,http://commons.wikimedia.org/wiki/Category:Lisbon\n"
                                   "60,http://example.org/notacategory\n",
}


@pytest.fixture(scope="module")
def custom_build(tmp_path_factory):
    from reasonvqa.flows.config import load_config

    root = tmp_path_factory.mktemp("custom")
    (root / "vg").mkdir()
    for name, records in [("image_data", VG_IMAGES), ("objects", VG_OBJECTS), ("relationships", VG_RELATIONSHIPS)]:
        (root / "vg" / f"{name}.json").write_text(json.dumps(records))
    (root / "gld").mkdir()
    for name, text in GLD_FILES.items():
        (root / "gld" / name).write_text(text)
    (root / "build.yaml").write_text(
        "sources:\n  - {kind: vg, path: vg}\n  - {kind: gldv2, path: gld}\n"
        "release: {name: custom, version: 1.0.0}\nseed: 3\nshard_size: 1\n"
    )
    release = Path(build_reasonvqa(load_config(root / "build.yaml"), str(root / "out")))
    return release, next((root / "out" / ".work").iterdir())


def test_custom_build_accounts_for_every_bad_record(custom_build):
    release, work = custom_build
    assert release.parts[-2:] == ("custom", "1.0.0") and verify_release(release) == []
    for stage in work.rglob("_stats"):
        for shard in stage_stats(stage.parent):
            assert shard["rows_in"] == shard["rows_out"] + sum(shard["rejected"].values()), (stage, shard)
    rejects = {
        (r["reason"], r["source"])
        for kind in ("vg", "gldv2")
        for r in pl.read_parquet(work / f"sources_{kind}" / "unit-00000" / "_rejects" / "*.parquet").to_dicts()
    }
    assert rejects == {
        ("image_record_malformed", "image_data.json#[2]"),
        ("image_bad_size", "image_data.json#[3]"),
        ("box_outside_image", "objects.json#[0].objects[2]"),
        ("box_not_numeric", "objects.json#[0].objects[3]"),
        ("image_not_in_image_data", "objects.json#[2].objects[0]"),
        ("relation_endpoint_unknown", "relationships.json#[0].relationships[2]"),
        ("image_id_malformed", "train.csv:5"),
        ("landmark_without_category", "train.csv:6"),
        ("clean_image_id_malformed", "train_clean.csv:2"),
        ("category_url_malformed", "train_label_to_category.csv:5"),
    }
    relations = pl.read_parquet(work / "sources_vg" / "unit-00000" / "relations" / "*.parquet")
    # the relation naming merged id 90 resolves to the object that absorbed it
    assert relations.sort("relation_id")["subject_id"].to_list() == ["vg:10/o100", "vg:10/o100"]
    objects = pl.read_parquet(work / "sources_gldv2" / "unit-00000" / "objects" / "*.parquet")
    assert sorted(objects["commons_category"].to_list()) == ["Chichén Itzá", "Lisbon", "Mount Everest"]


def test_a_build_resumed_with_a_warm_query_cache_gives_the_same_release(sample_release, tmp_path):
    """Like a build killed after its SPARQL answers were cached: fewer requests, the same bytes."""
    import shutil

    first = sample_release
    out = tmp_path / "out"
    shutil.copytree(first.parents[1], out)  # the shared sample build stays as it is
    work = next((out / ".work").iterdir())
    for stage in ("link", "facts", "questions"):
        shutil.rmtree(work / stage)
    shutil.rmtree(out / first.parent.name / first.name)
    again = Path(build_reasonvqa(sample_config(), str(out)))
    assert again == out / first.parent.name / first.name
    assert json.loads((work / "run_report.json").read_text())["link"]["requests"] == 0  # all from the cache
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file()) == files
    assert [str(f) for f in files if (again / f).read_bytes() != (first / f).read_bytes()] == []


def test_a_work_folder_url_fails_the_run_before_any_work(tmp_path):
    from reasonvqa.storage import RemoteWorkFolder

    with pytest.raises(RemoteWorkFolder, match=r"^work folder memory://shared/work: a memory:// file system lives in one process"):
        build_reasonvqa(sample_config(), str(tmp_path / "out"), "memory://shared/work")
    assert not (tmp_path / "out").exists()
