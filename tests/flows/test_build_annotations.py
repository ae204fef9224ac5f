"""The build hook: a build config naming a decision store gives a release that applies and lists them."""

import json

from reasonvqa.annotation_exports.batches import Batch, Item
from reasonvqa.annotation_exports.decisions import DecisionStore, ImportReport
from reasonvqa.annotation_exports.importing import decision
from reasonvqa.flows.build_reasonvqa import finish_release
from reasonvqa.flows.config import sample_config
from reasonvqa.tasks.release.reader import read_release
from reasonvqa.tasks.release.verify import verify_release
from tests.tasks.balance.synthetic import synthetic_pool


def test_finish_release_applies_the_configured_decision_store(tmp_path):
    pool = synthetic_pool(800, 120, 6, seed=2)
    rows = pool.slice(0, 2).to_pylist()
    items = [Item(item_id=r["question_id"], image_id=r["image_id"], region_ids=[], question_id=r["question_id"],
                  question=r["question"], answer=r["answer"], choices=r["choices"]) for r in rows]
    batch = Batch(batch_id="b-build", seed=0, filters={}, source={}, items=items, images={}, regions={})
    store = DecisionStore(tmp_path / "store")
    store.add_batch(batch)
    wrong = decision(batch, items[0], target="question", action="wrong", annotator="qa", time="2026-01-01T00:00:00.000000Z",
                     source="hand#0")
    corrected = next(c for c in rows[1]["choices"] if c != rows[1]["answer"])  # a correction is one of the choices
    fixed = decision(batch, items[1], target="question", action="edit_answer", answer=corrected,
                     annotator="qa", time="2026-01-01T00:00:00.000000Z", source="hand#1")
    store.commit(ImportReport(import_id="sha256:hand", format="labelstudio", file="hand.json", decisions=[wrong, fixed]))

    config = sample_config()
    config.annotations = store.root
    release = finish_release(pool, config, tmp_path / "out", tmp_path / "work", {"source:vg": "sha256:x"}, {}, False)
    assert verify_release(release) == []
    loaded = read_release(release)
    answers = dict(zip(loaded.pool["question_id"].to_pylist(), loaded.pool["answer"].to_pylist()))
    assert rows[0]["question_id"] not in answers and answers[rows[1]["question_id"]] == corrected
    choices = dict(zip(loaded.pool["question_id"].to_pylist(), loaded.pool["choices"].to_pylist()))
    assert choices[rows[1]["question_id"]] == rows[1]["choices"]  # the choices stay, the old answer a distractor
    assert loaded.manifest["annotations"]["decisions"] == sorted([wrong["decision_id"], fixed["decision_id"]])
    assert loaded.manifest["config"]["annotations"] == str(store.root)
    used = json.loads((release / "stats" / "annotation_decisions.json").read_text())["used"]
    assert {d["action"] for d in used} == {"wrong", "edit_answer"}


def test_a_config_without_annotations_hashes_as_before():
    assert "annotations" not in json.loads(sample_config().canonical_json())
