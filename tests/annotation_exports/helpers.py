"""Shared test steps: export a batch of the fixture release, and fake what an annotation tool returns."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from reasonvqa.annotation_exports.roundtrip import export_batch
from tests.annotation_exports.fixtures import write_fixture_release


def release_and_batch(tmp_path: Path, fmt: str, size: int = 100, **kwargs):
    """(release folder, store folder, export result) for a batch of the fixture release."""
    release = write_fixture_release(tmp_path / "out")
    store = tmp_path / "store"
    result = export_batch(release, tmp_path / "batch", fmt, size, store=store, **kwargs)
    return release, store, result


def annotate(task: dict, results: list[dict], *, user: int = 7, when: str = "2026-01-05T10:00:00.000000Z",
             task_id: int = 1) -> dict:
    """A Label Studio export record of ``task`` with one annotation of ``results``."""
    return {"id": task_id, "data": task["data"], "predictions": task["predictions"],
            "annotations": [{"id": task_id * 10, "completed_by": user, "was_cancelled": False, "result": results,
                             "created_at": when, "updated_at": when, "lead_time": 3.5}]}


def prediction_results(task: dict) -> list[dict]:
    return copy.deepcopy(task["predictions"][0]["result"])


def choice(region_key: str, value: str) -> dict:
    return {"id": region_key, "from_name": "region_decision", "to_name": "image", "type": "choices",
            "value": {"choices": [value]}}


def verdict(value: str) -> dict:
    return {"id": "qd", "from_name": "question_decision", "to_name": "image", "type": "choices",
            "value": {"choices": [value]}}


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
