"""What a build is made from: the inputs checked before any work, their content ids and the work folder key."""

import hashlib
from datetime import datetime, timezone

import pytest

from reasonvqa import schemas
from reasonvqa.flows.config import sample_config
from reasonvqa.flows.build_inputs import (
    check_build_inputs, exhaustive_labels, input_snapshots, question_kind_inputs, work_key,
)
from reasonvqa.tasks.release.knowledge_source import SourceKnowledge
from reasonvqa.tasks.questions.grounded import rules_version

AS_OF = datetime(2026, 12, 7, tzinfo=timezone.utc)


def recorded(digest: str) -> SourceKnowledge:
    """The knowledge of a release rebuilt from, as ``open_release_knowledge`` gives it."""
    return SourceKnowledge(release=None, inputs={"knowledge": "sha256:feed", "knowledge_date": "2021-05-26"},
                           answers=schemas.KNOWLEDGE_QUERIES.empty_table(), config={}, answers_digest=digest)


def test_a_missing_mirror_is_refused_unless_the_knowledge_is_replayed(tmp_path):
    config = sample_config()
    config.knowledge.mirror_entities = tmp_path / "entities"
    with pytest.raises(FileNotFoundError, match=f"knowledge mirror entities not found: {tmp_path / 'entities'}$"):
        check_build_inputs(config)
    check_build_inputs(config, needs_mirror=False)


def test_a_missing_source_folder_and_an_unknown_domain_are_refused(tmp_path):
    config = sample_config()
    config.sources[0].path = tmp_path / "no-vg"
    with pytest.raises(FileNotFoundError, match="no-vg"):
        check_build_inputs(config)
    config = sample_config()
    config.questions.domains = ["no such domain"]
    with pytest.raises(ValueError, match="no such domain"):
        check_build_inputs(config)


def test_the_inputs_name_every_source_the_knowledge_and_the_question_kinds(tmp_path):
    config = sample_config()
    inputs = input_snapshots(config, AS_OF)
    assert sorted(inputs) == ["grounded_rules", "knowledge", "knowledge_date", "source:gldv2", "source:nuscenes",
                              "source:sa1b", "source:vg"]
    assert inputs["source:vg"].startswith("sha256:") and inputs["grounded_rules"] == rules_version()
    replayed = input_snapshots(config, AS_OF, recorded("d1"))
    assert replayed == {**inputs, "knowledge": "sha256:feed", "knowledge_date": "2021-05-26"}


def test_question_kind_inputs_follow_the_config(tmp_path):
    config = sample_config()
    config.grounded.enabled = False
    assert question_kind_inputs(config) == {}
    verified = tmp_path / "questions.parquet"
    verified.write_bytes(b"PAR1 not really")
    config.verified_questions = verified
    assert question_kind_inputs(config) == {"verified_questions": "sha256:" + hashlib.sha256(verified.read_bytes()).hexdigest()}


def test_the_work_key_changes_with_an_input_the_config_and_a_replay():
    config = sample_config()
    inputs = {"source:vg": "sha256:aa", "knowledge": "sha256:bb"}
    key = work_key(config, inputs)
    assert len(key) == 16 and key == work_key(sample_config(), dict(inputs))
    assert work_key(config, {**inputs, "source:vg": "sha256:ab"}) != key
    seeded = sample_config()
    seeded.seed += 1
    assert work_key(seeded, inputs) != key
    replayed = work_key(config, inputs, recorded("d1"))
    assert replayed not in (key, work_key(config, inputs, recorded("d2")))


def test_exhaustive_labels_come_from_the_source_config_or_its_taxonomy():
    config = sample_config()
    assert exhaustive_labels(config) == {"nuscenes": None}  # nuScenes' categories are exhaustive by declaration
    config.sources[0].exhaustive_labels = ["tree", "car"]
    assert exhaustive_labels(config) == {"vg": ["car", "tree"], "nuscenes": None}
    config.sources.append(config.sources[0].model_copy(update={"exhaustive_labels": ["car"]}))
    with pytest.raises(ValueError, match="sources of kind 'vg' declare different exhaustive_labels; give one list"):
        exhaustive_labels(config)
