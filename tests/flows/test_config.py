from pathlib import Path

import pytest
from pydantic import ValidationError

from reasonvqa.flows.config import load_config, sample_config
from reasonvqa.paths import SAMPLE_DIR


def test_yaml_config_resolves_relative_source_paths(tmp_path):
    (tmp_path / "build.yaml").write_text(
        "sources:\n  - {kind: vg, path: vg}\nquestions:\n  domains: ['Places & Locations']\nseed: 7\n"
    )
    cfg = load_config(tmp_path / "build.yaml")
    assert cfg.sources[0].path == tmp_path / "vg"
    assert cfg.questions.domains == ["Places & Locations"]
    assert cfg.seed == 7 and cfg.split.train_ratio == 0.7


def test_a_list_of_source_paths_resolves_too(tmp_path):
    (tmp_path / "build.yaml").write_text("sources:\n  - {kind: vg, path: vg, coco_instances: [coco/instances_val2014.json, "
                                         "/data/instances_train2014.json]}\n")
    assert load_config(tmp_path / "build.yaml").sources[0].coco_instances == [
        tmp_path / "coco" / "instances_val2014.json", Path("/data/instances_train2014.json")]


def test_unknown_source_kind_is_refused(tmp_path):
    (tmp_path / "bad.yaml").write_text("sources:\n  - {kind: coco, path: x}\n")
    with pytest.raises(ValidationError, match="kind"):
        load_config(tmp_path / "bad.yaml")


def test_config_hash_is_stable_and_path_independent_inside_the_repo():
    a, b = sample_config(), sample_config()
    assert a.config_hash() == b.config_hash()
    assert '"path":"data/sample/vg"' in a.canonical_json()
    assert str(SAMPLE_DIR) not in a.canonical_json()
    b.seed = 1
    assert a.config_hash() != b.config_hash()


def test_a_source_kind_given_twice_is_refused(tmp_path):
    (tmp_path / "twice.yaml").write_text("sources:\n  - {kind: vg, path: a}\n  - {kind: vg, path: b}\n")
    with pytest.raises(ValidationError, match="give each source kind once"):
        load_config(tmp_path / "twice.yaml")


def test_a_misspelled_key_is_refused_not_silently_defaulted(tmp_path):
    (tmp_path / "typo.yaml").write_text("sources:\n  - {kind: vg, path: vg}\nshard_sise: 3\n")
    with pytest.raises(ValidationError, match="shard_sise\n  Extra inputs are not permitted"):
        load_config(tmp_path / "typo.yaml")


def test_a_misspelled_nested_key_is_refused(tmp_path):
    # `endpont` would otherwise silently build against the embedded mirror instead of the endpoint
    (tmp_path / "typo.yaml").write_text(
        "sources:\n  - {kind: vg, path: vg, max_image: 3}\nknowledge:\n  endpont: https://query.wikidata.org/sparql\n"
    )
    with pytest.raises(ValidationError) as info:
        load_config(tmp_path / "typo.yaml")
    assert [(e["loc"], e["type"]) for e in info.value.errors()] == [
        (("sources", 0, "max_image"), "extra_forbidden"), (("knowledge", "endpont"), "extra_forbidden")]


def test_relative_knowledge_paths_resolve_against_the_yaml_folder(tmp_path):
    (tmp_path / "build.yaml").write_text(
        "sources:\n  - {kind: vg, path: vg}\n"
        "knowledge:\n  mirror_entities: kb/entities\n  cache_dir: cache\n  wordnet_table: wn.tsv.gz\n"
    )
    cfg = load_config(tmp_path / "build.yaml")
    assert cfg.knowledge.mirror_entities == tmp_path / "kb" / "entities"
    assert cfg.knowledge.cache_dir == tmp_path / "cache"
    assert cfg.knowledge.wordnet_table == tmp_path / "wn.tsv.gz"


def test_image_options_at_their_defaults_keep_the_config_hash(tmp_path):
    base = sample_config()
    assert base.config_hash() == "3a0d4ad63c935bd3c45e6a08e818bb9b0618da9b658767a8186eeba384b13eba"  # as before the options
    assert "embed_images" not in base.canonical_json() and "image_dir" not in base.canonical_json()
    never = sample_config()
    never.release.embed_images = "never"
    assert '"embed_images":"never"' in never.canonical_json() and never.config_hash() != base.config_hash()
    (tmp_path / "build.yaml").write_text("sources:\n  - {kind: vg, path: vg, image_dir: vg_images}\n")
    cfg = load_config(tmp_path / "build.yaml")
    assert cfg.sources[0].image_dir == tmp_path / "vg_images" and '"image_dir":' in cfg.canonical_json()
