"""The `import-annotations` flow: commit the decisions of a Label Studio or CVAT export to the store."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from prefect import flow, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import State
from pydantic import BaseModel, ConfigDict, Field

from reasonvqa.annotation_exports.roundtrip import DEFAULT_STORE, import_decisions
from reasonvqa.flows.outcome import reported


class ImportParameters(BaseModel):
    """Parameters of `import-annotations` (a deployment's parameter schema)."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["labelstudio", "cvat"]
    file: Path = Field(description="Label Studio JSON export or CVAT for images 1.1 XML.")
    store: Path = Field(default=DEFAULT_STORE, description="Decision store the batch was exported with.")
    batch_id: str | None = Field(default=None, description="CVAT: the batch, when the file does not name it.")
    annotator: str | None = Field(default=None, description="CVAT: annotator name (default: the task owner).")
    time: str | None = Field(default=None, description="CVAT: annotation time (default: the file's dump time).")
    strict: bool = Field(default=False, description="Import nothing when any record is rejected.")


@task(name="import-annotation-file", cache_policy=NO_CACHE)
def import_task(params: ImportParameters) -> dict:
    """One task: an import is one all-or-nothing commit to the store."""
    report = import_decisions(params.file, params.format, store=params.store, batch_id=params.batch_id,
                              annotator=params.annotator, time=params.time, strict=params.strict)
    return report.summary()


@flow(name="import-annotations", log_prints=True)
def import_annotations(params: ImportParameters) -> State:
    """Import one file of decisions and publish what was kept and rejected as an artifact; calling the flow
    returns the summary. The run's Completed state names the store, a Failed one gives the reason in one line."""

    def run() -> dict:
        summary = import_task(params)
        rows = [{"kind": "decision", "name": k, "count": v} for k, v in summary["actions"].items()]
        rows += [{"kind": "rejected", "name": k, "count": v} for k, v in summary["rejected"].items()]
        rows.append({"kind": "duplicate", "name": "already in the store", "count": summary["duplicates"]})
        create_table_artifact(rows, key="annotation-import",
                              description=f"Import {summary['import_id']} of {params.file.name}")
        return summary

    return reported(run, lambda summary: f"import #{summary['seq']}: {summary['decisions']} decisions, "
                                         f"{sum(summary['rejected'].values())} rejected, written to {params.store}")
