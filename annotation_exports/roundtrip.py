"""The two entry points the CLI and the flows share: export a batch, import a file of decisions."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

from reasonvqa.annotation_exports.batches import Batch, BatchFilters, select_batch
from reasonvqa.annotation_exports.decisions import DecisionStore, ImportReport
from reasonvqa.annotation_exports.importing import run_import
from reasonvqa.annotation_exports.tables import read_source_tables

EXPORT_FORMATS = ("labelstudio", "cvat", "coco")
IMPORT_FORMATS = ("labelstudio", "cvat")
DEFAULT_STORE = Path("annotations")


@dataclass
class ExportResult:
    batch: Batch
    files: list[Path]

    def summary(self) -> dict:
        return {"batch_id": self.batch.batch_id, "items": len(self.batch.items), "regions": len(self.batch.regions),
                "images": len(self.batch.images), "skipped": self.batch.skipped,
                "files": [str(p) for p in self.files]}


def export_batch(source: str | Path, out: Path, fmt: str, size: int, *, store: Path = DEFAULT_STORE, seed: int = 0,
                 filters: BatchFilters | None = None, batch_id: str | None = None,
                 url_prefix: str | None = None) -> ExportResult:
    """Choose a batch from ``source`` (release or stage folder), register it in the store, write it as ``fmt``."""
    from reasonvqa.annotation_exports import coco, cvat, labelstudio

    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; one of {', '.join(EXPORT_FORMATS)}")
    if size < 1:
        raise ValueError(f"batch size must be at least 1, got {size}")
    decision_store = DecisionStore(store)
    batch = select_batch(read_source_tables(source), size, seed=seed, filters=filters,
                         decided=decision_store.decided_items(), batch_id=batch_id)
    out = Path(out)
    writers: dict[str, Callable[[Batch, Path], list[Path]]] = {"labelstudio": partial(labelstudio.export_labelstudio,
                                      url_prefix=labelstudio.LOCAL_FILES_PREFIX if url_prefix is None else url_prefix),
               "cvat": cvat.export_cvat, "coco": coco.export_coco}
    files = writers[fmt](batch, out)
    decision_store.add_batch(batch)
    files.append(batch.write(out))
    return ExportResult(batch=batch, files=files)


def import_decisions(path: Path, fmt: str, *, store: Path = DEFAULT_STORE, batch_id: str | None = None,
                     annotator: str | None = None, time: str | None = None, strict: bool = False) -> ImportReport:
    """Read a Label Studio JSON export or CVAT 1.1 XML file and commit its good decisions to the store
    (``strict``: none unless every record is good)."""
    from reasonvqa.annotation_exports.cvat import parse_cvat
    from reasonvqa.annotation_exports.labelstudio import parse_labelstudio

    if fmt not in IMPORT_FORMATS:
        raise ValueError(f"unknown import format {fmt!r}; one of {', '.join(IMPORT_FORMATS)}")
    parse = parse_labelstudio if fmt == "labelstudio" else partial(parse_cvat, batch_id=batch_id, annotator=annotator, time=time)
    return run_import(DecisionStore(store), fmt, Path(path), parse, strict=strict)
