"""The embedded knowledge base: an Oxigraph store built from Wikidata entity JSON, served over HTTP SPARQL.

``build_store`` maps the entities to N-Triples as it reads them (``rdf_mapping``) and loads the file
with Oxigraph's bulk loader; a store whose snapshot id (content hash of the
entity files + mapping version) is unchanged is reused as is. ``shared_store`` keeps
one store per content in the user cache, so every build and process reuses it (a
build of the sample saves ~2.5 s of mapping and loading). ``serve_mirror``
runs ``oxigraph serve-read-only`` on a free 127.0.0.1 port for the length of a
``with`` block, so the pipeline's client talks HTTP SPARQL exactly as to Wikidata.
``InProcessClient`` answers the same queries from a store opened in-process
(pyoxigraph), for the offline CLI and unit tests.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import BinaryIO, Iterator

from pyoxigraph import Literal, NamedNode, QuerySolutions, RdfFormat, Store

from reasonvqa.children import free_port, popen_bound, stop, wait_answering
from reasonvqa.locks import exclusive_lock
from reasonvqa.knowledge.entity_dump import Problem, _open_text, entity_files, iter_entities, merged, normalized
from reasonvqa.knowledge.rdf_mapping import (MAPPING_VERSION, Datatypes, MappingStats, entity_lines, entity_sort_key,
                                             property_declarations)
from reasonvqa.snapshot import files_digest

log = logging.getLogger(__name__)

STORE_SUBDIR = "db"
SNAPSHOT_FILE = "snapshot.json"
REPORT_FILE = "build_report.json"


class MirrorError(RuntimeError):
    """The embedded mirror could not be built or started."""


def snapshot_id(entities_path: Path) -> str:
    """Content hash of the entity file(s): ``sha256:<hex>`` over names and bytes, in name order."""
    entities_path = Path(entities_path)
    base = entities_path if entities_path.is_dir() else entities_path.parent
    return "sha256:" + files_digest(base, entity_files(entities_path))


_MODIFIED = re.compile(r'"modified"\s*:\s*"(\d{4}-\d\d-\d\d)')


def snapshot_date(entities_path: Path) -> str | None:
    """The newest ``modified`` date (YYYY-MM-DD) of the mirror's entities: the knowledge's "as of" date.

    None when no entity carries one (hand-transcribed entities have none).
    """
    newest = None
    for file in entity_files(Path(entities_path)):
        with _open_text(file) as handle:
            for line in handle:
                for date in _MODIFIED.findall(line):
                    newest = date if newest is None or date > newest else newest
    return newest


def mirror_cache_key(entities_path: Path) -> str:
    """The ``WikidataClient(cache_key=...)`` of the mirror: stable across builds while the entities are unchanged."""
    return f"oxigraph-mirror:{snapshot_id(entities_path)}:mapping-{MAPPING_VERSION}"


def oxigraph_binary() -> str:
    """The ``oxigraph`` CLI of the PyPI package (next to this interpreter, else on PATH)."""
    candidate = Path(sys.executable).parent / "oxigraph"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("oxigraph")
    if not found:
        raise MirrorError("the `oxigraph` command (PyPI package `oxigraph`) is not installed")
    return found


def write_ntriples(entities_path: Path, out_file: Path, languages: tuple[str, ...] = ("en",)) -> dict:
    """Map every entity to N-Triples in ``out_file``, streaming the records; return a report of counts and problems.

    Records are mapped as they are read, each entity's lines written as one block. An id met again (the
    sample's transcribed statements add to fetched entities) is merged at the end: its records are read
    again and merged as ``read_entities`` merges them, its first block is turned into comment lines in
    place (same length) and the merged entity's lines are appended. Only ids and block offsets stay in memory.
    """
    files = entity_files(Path(entities_path))
    problems: list[Problem] = []
    stats = MappingStats()
    datatypes = Datatypes()
    blocks: dict[str, tuple[int, int]] = {}  # id -> (offset, length) of its first block
    again: set[str] = set()
    out_file.parent.mkdir(parents=True, exist_ok=True)
    with out_file.open("w+b") as handle:
        for record in iter_entities(files, problems):
            entity_id = record["id"]
            if entity_id in blocks:
                again.add(entity_id)
                continue
            block = "".join(entity_lines(normalized(record), languages, stats, datatypes)).encode()
            blocks[entity_id] = (handle.tell(), len(block))
            handle.write(block)
        if not blocks:
            shown = "; ".join(f"{p.source}: {p.reason}" for p in problems[:5])
            raise MirrorError(f"no usable Wikidata entity in {entities_path}" + (f" ({shown})" if shown else ""))
        if again:
            _merge_repeated(handle, files, again, blocks, languages, stats, datatypes)
        handle.seek(0, os.SEEK_END)
        declared = datatypes.by_property()
        handle.write("".join(property_declarations(declared)).encode())
    for problem in problems:
        log.warning("entity input %s: %s", problem.source, problem.reason)
    return {
        "entities": len(blocks),
        "statements": stats.statements,
        "truthy_triples": stats.truthy,
        "properties": len(declared),
        "skipped": dict(sorted(stats.skipped.items())),
        "problems": [{"source": p.source, "reason": p.reason} for p in problems],
        "files": [f.name for f in files],
    }


def _merge_repeated(handle: BinaryIO, files: list[Path], ids: set[str], blocks: dict[str, tuple[int, int]],
                    languages: tuple[str, ...], stats: MappingStats, datatypes: Datatypes) -> None:
    """Replace the first block of each id in ``ids`` by the lines of its merged records."""
    records: dict[str, list[dict]] = {}
    for record in iter_entities(files, []):  # the problems were reported by the first read
        if record["id"] in ids:
            records.setdefault(record["id"], []).append(record)
    for entity_id in sorted(ids, key=entity_sort_key):
        first = MappingStats()
        block = "".join(entity_lines(normalized(records[entity_id][0]), languages, first, Datatypes())).encode()
        offset, length = blocks[entity_id]
        if len(block) != length:
            raise MirrorError(f"entity {entity_id} mapped to other lines on a second read of {files[0].parent}")
        stats.subtract(first)  # counted again, merged, below
        handle.seek(offset)
        handle.write(b"#" + block[1:].replace(b"\n<", b"\n#"))  # every line starts with '<': now a comment
        handle.seek(0, os.SEEK_END)
        handle.write("".join(entity_lines(merged(records[entity_id]), languages, stats, datatypes)).encode())


def bulk_load(ntriples: Path, location: Path) -> None:
    """Load an N-Triples file into a new store at ``location`` with Oxigraph's bulk loader, in process."""
    store = Store(str(location))
    try:
        store.bulk_load(path=str(ntriples), format=RdfFormat.N_TRIPLES)
        store.flush()
    except (OSError, SyntaxError, ValueError) as error:
        raise MirrorError(f"oxigraph load failed for {ntriples}: {error}") from None
    finally:
        del store  # closed here: the server opens it next


def build_store(entities_path: Path, store_dir: Path) -> Path:
    """Build (or reuse) the Oxigraph store for ``entities_path`` under ``store_dir``; return its location."""
    entities_path = Path(entities_path)
    store_dir = Path(store_dir)
    wanted = {"snapshot_id": snapshot_id(entities_path), "mapping_version": MAPPING_VERSION}
    marker = store_dir / SNAPSHOT_FILE
    if marker.exists() and (store_dir / STORE_SUBDIR).is_dir():
        try:
            if json.loads(marker.read_text()) == wanted:
                return store_dir / STORE_SUBDIR
        except json.JSONDecodeError:
            pass
    store_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=store_dir.name + ".building-", dir=store_dir.parent))
    try:
        data = staging / "entities.nt"
        started = time.perf_counter()
        report = write_ntriples(entities_path, data)
        mapped = time.perf_counter()
        bulk_load(data, staging / STORE_SUBDIR)
        data.unlink()
        report["seconds"] = {"mapping": round(mapped - started, 3), "load": round(time.perf_counter() - mapped, 3)}
        (staging / REPORT_FILE).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
        (staging / SNAPSHOT_FILE).write_text(json.dumps(wanted, sort_keys=True) + "\n")
        if store_dir.exists():
            shutil.rmtree(store_dir)
        os.replace(staging, store_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return store_dir / STORE_SUBDIR


def shared_store_root() -> Path:
    """Where ``shared_store`` keeps its stores: ``$XDG_CACHE_HOME/reasonvqa/mirror-stores`` (else ~/.cache)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "reasonvqa" / "mirror-stores"


def shared_store(entities_path: Path, root: Path | None = None) -> Path | None:
    """The store of ``entities_path`` in ``root`` (default ``shared_store_root()``), one folder per content
    (snapshot id and mapping version), built by the first process to ask under a file lock and only read
    after that, so builds in any process serve it at once. None when ``root`` cannot be written."""
    snapshot = snapshot_id(entities_path).partition(":")[2]
    store_dir = Path(root or shared_store_root()) / f"{snapshot[:32]}-mapping-{MAPPING_VERSION}"
    try:
        with exclusive_lock(store_dir.with_name(store_dir.name + ".lock"), "knowledge mirror store"):
            return build_store(entities_path, store_dir)
    except OSError as error:  # e.g. a read-only home: the caller builds its own store
        log.info("no shared knowledge mirror store (%s); building one for this build", error)
        return None


def _wait_ready(url: str, process: subprocess.Popen, log_file: Path, timeout_s: float) -> None:
    def exited(code: int) -> MirrorError:
        tail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
        return MirrorError(f"oxigraph server exited with code {code}: {tail.strip()}")

    wait_answering(url + "?" + urllib.parse.urlencode({"query": "ASK {}"}), process, timeout_s, exited=exited,
                   late=lambda: MirrorError(f"oxigraph server at {url} not ready after {timeout_s:.0f} s"), poll_s=0.05)


_SERVED: dict[str, Path] = {}  # endpoint URL -> store, for the mirrors this process serves now


def served_store(endpoint: str) -> Path | None:
    """The store behind ``endpoint`` when it is a mirror this process serves (``serve_mirror``), else None."""
    return _SERVED.get(endpoint)


@contextlib.contextmanager
def serve_mirror(entities_path: Path, work_dir: Path, *, location: Path | None = None,
                 ready_timeout_s: float = 30.0) -> Iterator[str]:
    """Serve the mirror of ``entities_path`` on 127.0.0.1; yield its SPARQL endpoint URL.

    The store is ``location`` (a store of these entities, e.g. ``shared_store``'s) or else lives in
    ``work_dir/knowledge_mirror`` and is reused while the entity files are unchanged; the server's
    output goes to ``work_dir/knowledge_mirror.log``. The server is stopped on exit, also when the block raises.
    """
    location = location or build_store(entities_path, Path(work_dir) / "knowledge_mirror")
    log_file = Path(work_dir) / "knowledge_mirror.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    last_error: Exception | None = None
    for _ in range(3):  # a port taken between probe and bind: try another
        port = free_port()
        with log_file.open("ab") as log_handle:
            process = popen_bound(  # killed by the kernel if this process dies without stopping it
                [oxigraph_binary(), "serve-read-only", "--location", str(location), "--bind", f"127.0.0.1:{port}"],
                stdout=log_handle,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}/query"
        try:
            try:
                _wait_ready(url, process, log_file, ready_timeout_s)
            except MirrorError as error:
                last_error = error
                continue
            log.info("knowledge mirror serving %s on %s", location, url)
            _SERVED[url] = Path(location)
            try:
                yield url
            finally:
                _SERVED.pop(url, None)
            return
        finally:
            stop(process)
    raise MirrorError(f"could not start the oxigraph server: {last_error}")


class InProcessClient:
    """Answers SELECT queries from a pyoxigraph store with the WikidataClient interface."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.requests = 0
        self.cache_hits = 0

    @classmethod
    def open(cls, location: Path) -> "InProcessClient":
        """Open a built store read-only."""
        return cls(Store.read_only(str(location)))

    def select(self, query: str) -> list[dict[str, dict[str, str]]]:
        self.requests += 1
        solutions = self.store.query(query)
        if not isinstance(solutions, QuerySolutions):
            raise TypeError("only SELECT queries are supported")
        names = [v.value for v in solutions.variables]
        rows = []
        for solution in solutions:
            row = {}
            for name in names:
                term = solution[name]
                if term is not None:
                    row[name] = json_term(term)
            rows.append(row)
        return rows

    def stats(self) -> dict[str, int]:
        return {"requests": self.requests, "cache_hits": self.cache_hits, "retries": 0}


def json_term(term: object) -> dict[str, str]:
    """A term in the SPARQL 1.1 JSON results shape (what WDQS returns)."""
    if isinstance(term, NamedNode):
        return {"type": "uri", "value": term.value}
    if isinstance(term, Literal):
        out = {"type": "literal", "value": term.value}
        if term.language:
            out["xml:lang"] = term.language
        elif term.datatype.value != "http://www.w3.org/2001/XMLSchema#string":
            out["datatype"] = term.datatype.value
        return out
    return {"type": "bnode", "value": str(getattr(term, "value", term))}
