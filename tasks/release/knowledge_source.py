"""Reading back the knowledge a release carries, for ``reasonvqa build --knowledge-from RELEASE``.

The tables themselves are written by the build (knowledge/release_knowledge.py); a rebuild replays the
release's ``knowledge_queries`` and names its knowledge as the release did (the manifest's ``knowledge`` and
``knowledge_date`` inputs), so with the same config it writes the same bytes, offline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from reasonvqa import schemas
from reasonvqa.schemas import FACTS_TABLE, MANIFEST, QUERIES_TABLE
from reasonvqa.tasks.release.reader import read_split
from reasonvqa.tasks.release.verify import verify_release

KNOWLEDGE_INPUTS = ("knowledge", "knowledge_date")


class ReleaseKnowledgeError(ValueError):
    """The release given to ``--knowledge-from`` cannot be rebuilt from (not verified, or no knowledge)."""


@dataclass(frozen=True)
class SourceKnowledge:
    """What a rebuild takes from a release: its knowledge inputs, recorded answers and config."""

    release: Path
    inputs: dict[str, str]  # knowledge, knowledge_date
    answers: pa.Table  # schemas.KNOWLEDGE_QUERIES
    config: dict  # the release manifest's config
    answers_digest: str  # the answers' files' sha256 as the manifest lists them (keys a rebuild's work folder)


def open_release_knowledge(release: Path) -> SourceKnowledge:
    """The knowledge of a verified release (ReleaseKnowledgeError when verify finds a problem, or the release
    was written before releases carried their knowledge)."""
    release = Path(release)
    if not (release / MANIFEST).is_file():
        raise ReleaseKnowledgeError(f"{release}: not a release folder (no {MANIFEST})")
    problems = verify_release(release)
    if problems:
        raise ReleaseKnowledgeError(f"{release}: fails verification ({len(problems)} problem(s), first: "
                                    f"{problems[0]}); see reasonvqa verify")
    manifest = json.loads((release / MANIFEST).read_text(encoding="utf-8"))
    missing = [t for t in (FACTS_TABLE, QUERIES_TABLE) if t not in manifest.get("tables", [])]
    absent = [k for k in KNOWLEDGE_INPUTS if k not in manifest.get("inputs", {})]
    if missing or absent:
        raise ReleaseKnowledgeError(
            f"{release}: carries no knowledge to rebuild from (no {', '.join(missing) or 'inputs ' + ', '.join(absent)}"
            "; releases written before 2026-12 hold none): rebuild it against its endpoint or mirror")
    answer_files = sorted(rel for rel in manifest["files"] if rel.startswith(f"{QUERIES_TABLE}/"))
    digest = ",".join(manifest["files"][rel]["sha256"] for rel in answer_files)
    inputs = {k: manifest["inputs"][k] for k in KNOWLEDGE_INPUTS}
    return SourceKnowledge(release, inputs, read_split(release, QUERIES_TABLE, schemas.KNOWLEDGE_QUERIES),
                           manifest.get("config", {}), digest)
