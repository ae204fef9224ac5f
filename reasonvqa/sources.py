"""The source registry: one class per dataset format, found by its kind name.

A source declares its kind name, its pydantic config model, the visual domain and license of
its images, how to check a folder before any work, how to plan its work units, and how to
read one unit into the record model (``reasonvqa.schemas``: images, objects, relations,
attributes, regions). The build flow, ``sources scan``, the input checks, the config model
and the CLI's help all ask this registry; nothing else lists source kinds.

Built-in sources register through the ``reasonvqa.sources`` entry-point group in
pyproject.toml, exactly as a third-party package would::

    [project.entry-points."reasonvqa.sources"]
    mykind = "mypackage.mysource:MySource"

Tests (and notebooks) may call ``register(MySource)`` directly; such a source is known to
this process only (a Dask worker process sees entry points, not ``register`` calls).
"""

from __future__ import annotations

import inspect
import threading
from abc import ABC, abstractmethod
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated, Any, ClassVar, Iterator

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, PlainValidator, SerializeAsAny, ValidationError
from pydantic_core import PydanticCustomError

from reasonvqa.snapshot import folder_snapshot_id
from reasonvqa.stage import StageResult

ENTRY_POINT_GROUP = "reasonvqa.sources"
# The record tables a source may write, in the order ``sources scan`` reports them.
SOURCE_TABLES = ("images", "objects", "relations", "attributes", "regions")


class SourceConfig(BaseModel):
    """What every source takes; a source's own config model subclasses this."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    path: Path
    max_images: int | None = Field(default=None, ge=1, description="Read at most this many images (for quick runs).")
    # left out of dumps when unset, so configs (and their hashes) without it read as before it existed
    image_dir: Path | None = Field(default=None, exclude_if=lambda value: value is None,
                                   description="Folder the images' file_path is relative to, when the pixels are not "
                                   "under path (e.g. Visual Genome's VG_100K/, GLDv2's train/); only release "
                                   "pictures and embedded images read it.")
    exhaustive_labels: list[str] | None = Field(default=None, exclude_if=lambda value: value is None,
                                                description="Labels this source's annotations cover exhaustively "
                                                "(every instance in every image): hallucination questions may claim "
                                                "those absent, and no other label (tasks/questions/absence.py).")


class ImageUnavailable(Exception):
    """An image's bytes cannot be had locally: ``code`` (missing_file, corrupt, ...) and a detail."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


class Source(ABC):
    """One dataset format. Subclasses set the class attributes and implement the methods.

    Work is cut into *units* (a tar shard, a scene, a whole JSON stream): ``plan`` lists them,
    one Prefect task reads one unit, and ``read`` yields the unit's records as one
    ``StageResult`` per shard of at most ``shard_size`` images. Units must be small picklable
    values (strings, paths, tuples) and ``plan`` must return them in a deterministic order.
    Images rows whose ``visual_domain`` or ``license`` is null get the source's declared values
    when the unit is written (``tasks/sources/ingest.py``).
    """

    kind: ClassVar[str]
    config_model: ClassVar[type[SourceConfig]] = SourceConfig
    visual_domain: ClassVar[str]  # e.g. "mixed", "landmarks", "indoor", "outdoor", "driving", "robotics"
    license: ClassVar[str]  # license of the images and annotations, e.g. "CC BY 4.0"
    description: ClassVar[str] = ""  # one line for --help and the dataset card
    # True where the source's own categories are annotated exhaustively (nuScenes): an absence claim about one of
    # them is backed by the taxonomy, and no label outside them is claimed absent (tasks/questions/absence.py)
    exhaustive_taxonomy: ClassVar[bool] = False
    # True where the source's own regions carry no class label (SA-1B masks): no absence can be claimed on its images,
    # so its grounded questions are exempt from the hallucination share (tasks/balance/hallucination_share.py)
    unlabeled_regions: ClassVar[bool] = False
    # whether the images' license lets a release embed their bytes, and why (the card and manifest say it)
    redistributable: ClassVar[bool] = False
    redistribution: ClassVar[str] = "the source's license is not known to allow redistributing its images"
    # where large temporary files (spill files, extracted archives) go; None: the system temp folder.
    # ``get`` sets it per instance (the runner passes a folder beside the work folder).
    scratch_dir: Path | None = None

    def typed(self, config: SourceConfig) -> Any:
        """``config`` as this source's own config model (a base ``SourceConfig`` is re-validated)."""
        if isinstance(config, self.config_model):
            return config
        return self.config_model.model_validate(config.model_dump())

    @abstractmethod
    def check(self, config: SourceConfig) -> None:
        """Raise FileNotFoundError naming the first missing folder or required file."""

    def plan(self, config: SourceConfig, shard_size: int) -> list[Any]:
        """The work units of this source, in a deterministic order (default: one unit)."""
        return [str(config.path)]

    @abstractmethod
    def read(self, config: SourceConfig, unit: Any, shard_size: int) -> Iterator[StageResult]:
        """Yield one StageResult per shard of at most ``shard_size`` images of ``unit``."""

    def image_bytes(self, config: SourceConfig, file_path: str) -> bytes:
        """The encoded bytes of the image at ``file_path`` (an images row's) from local files; default: the
        file under ``config.image_dir`` (else ``config.path``). Raises ImageUnavailable, never reads outside it."""
        return read_file_under(config.image_dir or config.path, file_path)

    def snapshot(self, config: SourceConfig) -> str:
        """Content id of the inputs (manifest ``inputs``); default: the files directly in ``path``
        (annotation files sit at the top, images in sub-folders). Override when annotations nest."""
        return folder_snapshot_id(config.path, recursive=False)

    @classmethod
    def code_id(cls) -> str:
        """Content id of the file defining the class: part of a build's work-folder key, so a changed
        reader outside this package (a plugin, a test's toy source) never reuses stale shards."""
        return folder_snapshot_id(Path(inspect.getfile(cls)))


def require_folder(config: SourceConfig) -> Path:
    """The source's folder; FileNotFoundError naming the kind and path when it is not one."""
    if not config.path.is_dir():
        raise FileNotFoundError(f"source folder not found: {config.kind}: {config.path}")
    return config.path


def file_under(root: Path, relative: str) -> Path:
    """``root/relative``; ImageUnavailable when it is not a file or resolves outside ``root`` (reasons name
    ``relative`` only: they go into releases, which must not depend on where the inputs sit)."""
    if not relative:
        raise ImageUnavailable("no_file_path", "the source gives no file path for this image")
    base = Path(root).resolve()
    path = (base / relative).resolve()
    if not path.is_relative_to(base):
        raise ImageUnavailable("outside_folder", f"{relative} resolves outside the source's image folder")
    if not path.is_file():
        raise ImageUnavailable("missing_file", f"{relative} is not in the source's image folder")
    return path


def read_file_under(root: Path, relative: str) -> bytes:
    """The bytes of ``root/relative`` (``file_under``); ImageUnavailable when it cannot be read."""
    path = file_under(root, relative)
    try:
        return path.read_bytes()
    except OSError as error:
        raise ImageUnavailable("unreadable", f"{relative}: {error.strerror or type(error).__name__}") from None


def with_source_columns(images: pa.Table, source: Source) -> pa.Table:
    """``images`` with null ``visual_domain`` / ``license`` cells set to the source's declared values."""
    for name in ("visual_domain", "license"):
        if name not in images.column_names or images[name].null_count == 0:
            continue
        column = images[name]
        filled = column.fill_null(pa.scalar(getattr(source, name), column.type))
        images = images.set_column(images.column_names.index(name), name, filled)
    return images


_REGISTRY: dict[str, type[Source]] = {}
_LOCK = threading.Lock()
_ENTRY_POINTS_LOADED = False


class UnknownSourceError(ValueError):
    """A source kind that no registered source declares."""


def register(source: type[Source]) -> type[Source]:
    """Register a source class under its ``kind`` (usable as a class decorator)."""
    kind = getattr(source, "kind", None)
    if not isinstance(kind, str) or not kind.isidentifier():
        raise ValueError(f"source {source!r} needs a kind that is a plain identifier, got {kind!r}")
    with _LOCK:
        existing = _REGISTRY.get(kind)
        if existing is not None and existing is not source:
            raise ValueError(f"source kind {kind!r} is registered twice: {existing!r} and {source!r}")
        _REGISTRY[kind] = source
    return source


def unregister(kind: str) -> None:
    """Remove a registered kind (tests that register a toy source clean up with this)."""
    with _LOCK:
        _REGISTRY.pop(kind, None)


def _load_entry_points() -> None:
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    for point in entry_points(group=ENTRY_POINT_GROUP):
        source = point.load()
        if point.name != getattr(source, "kind", None):
            raise ValueError(f"entry point {point.name!r} loads {source!r}, whose kind is {source.kind!r}")
        register(source)
    _ENTRY_POINTS_LOADED = True


def kinds() -> list[str]:
    """Every registered source kind, sorted."""
    _load_entry_points()
    return sorted(_REGISTRY)


def source_class(kind: str) -> type[Source]:
    """The class registered as ``kind``; UnknownSourceError lists the known kinds."""
    _load_entry_points()
    source = _REGISTRY.get(kind)
    if source is None:
        raise UnknownSourceError(f"unknown source kind {kind!r}; known kinds: {', '.join(sorted(_REGISTRY))}")
    return source


def get(kind: str, scratch_dir: Path | None = None) -> Source:
    """An instance of the source registered as ``kind``; UnknownSourceError lists the known kinds."""
    source = source_class(kind)()
    source.scratch_dir = scratch_dir
    return source


def parse_config(raw: Any) -> SourceConfig:
    """Validate one source entry of a build config with its kind's own config model.

    An instance of the kind's own model is kept as it is. A missing or unknown ``kind`` raises
    pydantic's ValidationError at ``kind`` (the unknown one's message lists the known kinds).
    """
    if isinstance(raw, SourceConfig):
        if isinstance(raw, source_class(raw.kind).config_model):
            return raw
        raw = raw.model_dump()
    if not isinstance(raw, dict):
        raise ValueError(f"a source is a mapping with a 'kind', got {type(raw).__name__}")
    if "kind" not in raw:
        raise ValidationError.from_exception_data("SourceConfig", [{"type": "missing", "loc": ("kind",), "input": raw}])
    try:
        model = source_class(str(raw["kind"])).config_model
    except UnknownSourceError as exc:
        error = PydanticCustomError("unknown_source_kind", "{message}", {"message": str(exc)})
        raise ValidationError.from_exception_data("SourceConfig", [{"type": error, "loc": ("kind",), "input": raw["kind"]}]) from exc
    return model.model_validate(raw)


# A build config's source entry: validated by its kind's config model, serialized with all of
# that model's fields (SerializeAsAny: pydantic would otherwise dump only SourceConfig's fields).
SourceEntry = SerializeAsAny[Annotated[SourceConfig, PlainValidator(parse_config, json_schema_input_type=dict[str, Any])]]
