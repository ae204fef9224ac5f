"""The build configuration: one pydantic model shared by the CLI, the flow and deployments."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from reasonvqa.yaml_files import load_yaml
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.paths import RESOURCE_ROOTS, SAMPLE_DIR
from reasonvqa.sources import SourceConfig, SourceEntry, parse_config
from reasonvqa.stage_contract import StageEntry
from reasonvqa.tasks.balance.config import BalanceConfig, PartitionConfig, SplitConfig
from reasonvqa.tasks.balance.kind_filters import KindSelection
from reasonvqa.tasks.proposals.config import ProposalsConfig
from reasonvqa.tasks.questions.config import QuestionConfig
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.release.paths import check_release_name, check_release_version


class ReleaseConfig(BaseModel):
    """Name and version of the release folder ``<out>/<name>/<version>/``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str = "reasonvqa-sample"
    version: str = "0.1.0"
    # left out of dumps at its default, so a default config hashes as before the option existed
    embed_images: Literal["auto", "never"] = Field(
        default="auto", exclude_if=lambda value: value == "auto", description="auto: embed the bytes of locally available images whose source license allows "
        "redistribution in images/ (the `datasets` Image layout); never: URLs and paths only (`reasonvqa images fetch`).")

    @field_validator("name")
    @classmethod
    def _safe_name(cls, name: str) -> str:
        return check_release_name(name)  # becomes a path component under --out

    @field_validator("version")
    @classmethod
    def _semantic_version(cls, version: str) -> str:
        return check_release_version(version)


class BuildConfig(BaseModel):
    """Everything that determines a build's output (hashed into the manifest)."""

    model_config = ConfigDict(extra="forbid")

    sources: list[SourceEntry]  # each validated by its kind's config model (reasonvqa.sources registry)
    knowledge: KnowledgeConfig = Field(default_factory=KnowledgeConfig)
    questions: QuestionConfig = Field(default_factory=QuestionConfig)
    balance: BalanceConfig = Field(default_factory=BalanceConfig)
    split: SplitConfig = Field(default_factory=SplitConfig)
    release: ReleaseConfig = Field(default_factory=ReleaseConfig)
    proposals: ProposalsConfig | None = Field(default=None, description="Model region proposals (tasks/proposals); off when null.")
    grounded: GroundedConfig = Field(default_factory=GroundedConfig)
    verified_questions: Path | None = Field(default=None, description="questions.parquet of build-verified-qa, "
                                            "merged into the pool (balanced and split with the other kinds).")
    select: KindSelection = Field(default_factory=KindSelection, description="Question kinds, task types and "
                                  "hallucination flag the release keeps.")
    annotations: Path | None = Field(default=None, description="Annotation decision store whose decisions the release applies.")
    partitioned: PartitionConfig = Field(default_factory=PartitionConfig, description="Balance, split and write "
                                         "from disk for large pools (same release bytes; not hashed).")
    seed: int = 0
    shard_size: int = Field(default=5000, ge=1, description="Records per shard (one Prefect task per shard).")
    stages: list[StageEntry] = Field(default_factory=list, exclude_if=lambda entries: not entries,
                                     description="Extra stages (ARCHITECTURE.md, Add a stage), each run over every "
                                     "source shard after the sources; hashed only when given.")

    @field_validator("sources")
    @classmethod
    def _one_folder_per_kind(cls, sources: list[SourceConfig]) -> list[SourceConfig]:
        kinds = [s.kind for s in sources]
        if not sources or len(set(kinds)) != len(kinds):
            raise ValueError(f"give each source kind once (image ids are <kind>:<id>), got {kinds}")
        return sources

    def config_hash(self) -> str:
        """sha256 of the canonical JSON of the config (paths relative where possible)."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    def canonical_json(self) -> str:
        """Sorted-key JSON with bundled-data paths made relative, so installs and clones hash alike."""
        # a config without an annotation store hashes as it did before the field existed
        dump = self.model_dump(mode="json")
        if dump.get("annotations") is None:
            dump.pop("annotations", None)
        dump.pop("partitioned")  # where the pool is held does not change the release (like the task runner)
        return json.dumps(_relative_paths(dump), sort_keys=True, separators=(",", ":"))


def _relative_paths(value):
    if isinstance(value, dict):
        return {k: _relative_paths(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_relative_paths(v) for v in value]
    if isinstance(value, str):
        for name, root in RESOURCE_ROOTS.items():
            if value == str(root) or value.startswith(str(root) + "/"):
                return name + value[len(str(root)):]
    return value


def sample_config() -> BuildConfig:
    """The embedded default: bundled Visual Genome, GLDv2, SA-1B and nuScenes samples, local knowledge mirror.

    (The bundled DROID episode is left out: it has no regions or objects, so it yields no question.)
    """
    return BuildConfig(
        sources=[
            parse_config({"kind": "vg", "path": SAMPLE_DIR / "vg"}),
            parse_config({"kind": "gldv2", "path": SAMPLE_DIR / "gldv2"}),
            parse_config({"kind": "sa1b", "path": SAMPLE_DIR / "sa1b"}),
            parse_config({"kind": "nuscenes", "path": SAMPLE_DIR / "nuscenes"}),
        ]
    )


def load_config(path: Path) -> BuildConfig:
    """Load a BuildConfig from YAML; relative paths resolve against the file's folder.

    Raises ``yaml.YAMLError`` on broken YAML and pydantic's ``ValidationError`` on bad
    values or unknown keys (every config model forbids extras: a misspelled ``endpont``
    must not silently mean "use the defaults").
    """
    raw = load_yaml(path.read_text(encoding="utf-8")) or {}
    cfg = BuildConfig.model_validate(raw)
    base = path.resolve().parent
    for src in cfg.sources:  # every path field (or list of paths) of the source's own config model
        for name in type(src).model_fields:
            value = getattr(src, name)
            if isinstance(value, Path):
                setattr(src, name, _resolve(base, value))
            elif isinstance(value, list) and value and all(isinstance(v, Path) for v in value):
                setattr(src, name, [_resolve(base, v) for v in value])
    knowledge = cfg.knowledge
    for name in ("mirror_entities", "wordnet_table", "cache_dir"):
        if getattr(knowledge, name) is not None:
            setattr(knowledge, name, _resolve(base, getattr(knowledge, name)))
    if cfg.annotations is not None:
        cfg.annotations = _resolve(base, cfg.annotations)
    if cfg.proposals is not None:
        cfg.proposals.resolve(base)
    if cfg.verified_questions is not None:
        cfg.verified_questions = _resolve(base, cfg.verified_questions)
    if cfg.grounded.vlm is not None:
        cfg.grounded.vlm.image_roots = {k: _resolve(base, v) for k, v in cfg.grounded.vlm.image_roots.items()}
    return cfg


def _resolve(base: Path, path: Path) -> Path:
    return path if path.is_absolute() else base / path
