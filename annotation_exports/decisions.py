"""The decision store: batches sent out and the human decisions that came back, append-only.

Layout of a store folder::

    batches/<batch_id>.json          every exported batch (what was sent, with our ids)
    imports/<NNNNN>-<sha16>.json     one file per import: its decisions, rejects and duplicates

An import is committed by one atomic rename of its file (written aside first, under the
store's lock): a failed import leaves the store as it was, and nothing is ever rewritten.

Which decision wins (``effective_decisions``): per target (a question id, or a region id;
an added region is its own target), the decision with the latest annotation ``time`` wins;
on equal times the later import (higher sequence number) wins, then the larger decision id.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from reasonvqa.annotation_exports.batches import Batch
from reasonvqa.locks import exclusive_lock

QUESTION_ACTIONS = ("correct", "wrong", "edit_answer")
REGION_ACTIONS = ("accept", "reject", "edit", "add")


class StoreError(ValueError):
    """The store or an import cannot be used (unknown batch, unreadable file)."""


def normalize_time(value: Any) -> str:
    """An annotation time (ISO 8601 text) as UTC ISO-8601 with microseconds (comparable as text).

    TypeError for anything but text (a bare number says neither its unit nor its epoch), ValueError
    if unparsable."""
    if not isinstance(value, str):
        raise TypeError(f"time {value!r:.60} is not ISO 8601 text")
    moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def decision_id(decision: dict) -> str:
    """Content id of a decision (everything but where it was read from)."""
    core = {k: v for k, v in decision.items() if k not in ("decision_id", "source", "import_id", "seq")}
    return "d-" + hashlib.sha256(json.dumps(core, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:20]


def target_of(decision: dict) -> str:
    """The thing a decision is about: ``question:<id>`` or ``region:<id>``."""
    if decision["target"] == "question":
        return f"question:{decision['question_id']}"
    return f"region:{decision['region_id']}"


@dataclass
class ImportReport:
    """What one import did: decisions kept, records rejected (with reasons), duplicates skipped."""

    import_id: str
    format: str
    file: str
    seq: int | None = None
    decisions: list[dict] = field(default_factory=list)
    rejects: list[dict] = field(default_factory=list)  # {"reason", "source", "detail"}
    duplicates: list[dict] = field(default_factory=list)  # {"decision_id", "source"}

    def summary(self) -> dict:
        reasons: dict[str, int] = {}
        for r in self.rejects:
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
        actions: dict[str, int] = {}
        for d in self.decisions:
            actions[d["action"]] = actions.get(d["action"], 0) + 1
        return {"import_id": self.import_id, "seq": self.seq, "format": self.format, "file": self.file,
                "decisions": len(self.decisions), "actions": dict(sorted(actions.items())),
                "rejected": dict(sorted(reasons.items())), "duplicates": len(self.duplicates)}

    def to_json(self) -> dict:
        return {**self.summary(), "decisions": self.decisions, "rejects": self.rejects, "duplicates": self.duplicates}


class DecisionStore:
    """An append-only folder of batches and imported decisions (see the module docstring)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    @property
    def _lock(self) -> Path:
        return self.root / ".lock"

    # -- batches
    def add_batch(self, batch: Batch) -> Path:
        """Register an exported batch; the same batch id with other content is refused."""
        folder = self.root / "batches"
        folder.mkdir(parents=True, exist_ok=True)
        data = (json.dumps(batch.to_json(), sort_keys=True, separators=(",", ":")) + "\n").encode()
        path = folder / f"{batch.batch_id}.json"
        with exclusive_lock(self._lock, "annotation decision store"):
            if path.exists():
                if path.read_bytes() != data:
                    raise StoreError(f"{path}: batch {batch.batch_id} exists with other items; choose another batch id")
                return path
            _write_atomic(path, data)
        return path

    def batch(self, batch_id: str) -> Batch | None:
        """A registered batch, or None (ids with path characters are never looked up)."""
        if not batch_id or not all(c.isalnum() or c in "-_." for c in batch_id) or batch_id.startswith("."):
            return None
        path = self.root / "batches" / f"{batch_id}.json"
        return Batch.from_json(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else None

    # -- imports
    def import_files(self) -> list[Path]:
        folder = self.root / "imports"
        return sorted(folder.glob("[0-9]*.json")) if folder.is_dir() else []

    def imports(self) -> list[dict]:
        """Every committed import, in sequence order."""
        return [json.loads(p.read_text(encoding="utf-8")) for p in self.import_files()]

    def decisions(self) -> list[dict]:
        """Every stored decision, with its import's ``seq``, in commit order."""
        return [{**d, "seq": imp["seq"]} for imp in self.imports() for d in imp["decisions"]]

    def commit(self, report: ImportReport) -> ImportReport:
        """Append ``report``'s decisions as one new import file (all or nothing).

        Decisions already in the store (same decision id) move to ``duplicates``. A file imported
        before (same import id) commits nothing and returns the earlier import's report.
        """
        folder = self.root / "imports"
        folder.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self._lock, "annotation decision store"):
            existing = self.imports()
            for imp in existing:
                if imp["import_id"] == report.import_id:
                    report.seq = imp["seq"]
                    report.duplicates = [{"decision_id": d["decision_id"], "source": d["source"]} for d in report.decisions]
                    report.decisions = []
                    return report
            known = {d["decision_id"] for imp in existing for d in imp["decisions"]}
            fresh = []
            for d in report.decisions:
                if d["decision_id"] in known:
                    report.duplicates.append({"decision_id": d["decision_id"], "source": d["source"]})
                else:
                    fresh.append(d)
            report.decisions = fresh
            report.seq = max((imp["seq"] for imp in existing), default=0) + 1
            path = folder / f"{report.seq:05d}-{report.import_id.removeprefix('sha256:')[:16]}.json"
            _write_atomic(path, (json.dumps(report.to_json(), sort_keys=True, indent=1) + "\n").encode())
        return report

    def fingerprint(self) -> str:
        """Content address of the committed imports (their file names and bytes)."""
        digest = hashlib.sha256()
        for path in self.import_files():
            digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
        return "sha256:" + digest.hexdigest()

    def decided_items(self) -> set[str]:
        """Item ids with at least one stored decision (a new batch skips them)."""
        return {d["item_id"] for d in self.decisions()}


def effective_decisions(decisions: list[dict]) -> dict[str, dict]:
    """Target -> the decision that wins it (latest time, then later import, then larger id)."""
    winners: dict[str, dict] = {}
    for d in sorted(decisions, key=lambda d: (d["time"], d["seq"], d["decision_id"])):
        winners[target_of(d)] = d
    return winners


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
