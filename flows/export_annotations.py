"""The `export-annotations` flow: choose a batch from a release or stage folder and write it for a tool."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from prefect import flow, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import State
from pydantic import BaseModel, ConfigDict, Field

from reasonvqa.annotation_exports.batches import BatchFilters
from reasonvqa.annotation_exports.roundtrip import DEFAULT_STORE, export_batch
from reasonvqa.flows.outcome import reported


class ExportParameters(BaseModel):
    """Parameters of `export-annotations` (a deployment's parameter schema)."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["labelstudio", "cvat", "coco"]
    source: str | Path = Field(description="A release folder or a stage output folder: a path or an fsspec URL "
                                           "(a build's work folder on s3://).")
    out: Path = Field(description="Folder the batch files are written to.")
    size: int = Field(ge=1, description="Number of items in the batch.")
    store: Path = Field(default=DEFAULT_STORE, description="Decision store (batches and imported decisions).")
    seed: int = 0
    batch_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
    filters: BatchFilters = Field(default_factory=BatchFilters)
    url_prefix: str | None = Field(default=None, description="Label Studio image URL prefix for local files.")


@task(name="export-annotation-batch", cache_policy=NO_CACHE)
def export_task(params: ExportParameters) -> dict:
    """One task: selecting and writing a batch is one vectorized pass over the source tables."""
    result = export_batch(params.source, params.out, params.format, params.size, store=params.store, seed=params.seed,
                          filters=params.filters, batch_id=params.batch_id, url_prefix=params.url_prefix)
    return result.summary()


@flow(name="export-annotations", log_prints=True)
def export_annotations(params: ExportParameters) -> State:
    """Export one annotation batch and publish its counts as an artifact; calling the flow returns the
    summary. The run's Completed state names the batch folder, a Failed one gives the reason in one line."""

    def run() -> dict:
        summary = export_task(params)
        create_table_artifact([{"batch_id": summary["batch_id"], "items": summary["items"],
                                "regions": summary["regions"], "images": summary["images"]}], key="annotation-export",
                              description=f"Annotation batch {summary['batch_id']} ({params.format})")
        return summary

    return reported(run, lambda summary: f"batch {summary['batch_id']}: {summary['items']} items written to {params.out}")
