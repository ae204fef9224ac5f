"""Read Wikidata entities in the JSON dump format, in each of its published shapes.

Accepted inputs (a file, or a folder whose matching files are read in name order):
- ``*.jsonl`` / ``*.ndjson``: one entity object per line;
- ``*.json`` holding the full-dump array: ``[`` on the first line, one entity per line
  ending with ``,``, ``]`` on the last line (how dumps.wikimedia.org ships it);
- ``*.json`` holding a Special:EntityData answer: ``{"entities": {"Q45": {...}}}``;
- any of these compressed as ``.gz`` or ``.bz2``.

Bad records never stop the read: each is reported as a ``Problem`` naming file and
line, and the caller decides what to do with the list. ``iter_entities`` streams the
records one at a time (JSON lines are read as bytes and parsed with orjson; what orjson
refuses goes to ``json`` for its verdict), ``read_entities`` merges them all in memory.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterable, Iterator

import orjson

from reasonvqa.knowledge.ids import is_pid, is_qid

SUFFIXES = (".jsonl", ".ndjson", ".json")
COMPRESSIONS = ("", ".gz", ".bz2")
SMALL_ARRAY_BYTES = 50 * 1024 * 1024
READ_BUFFER = 1 << 20  # bytes read at a time from a JSON-lines file


@dataclass(frozen=True)
class Problem:
    source: str  # "file.jsonl:12"
    reason: str


@dataclass
class EntityRead:
    """Entities by id (merged across inputs) and the problems met while reading."""

    entities: dict[str, dict] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def entity_files(path: Path) -> list[Path]:
    """The entity files of ``path`` (itself if a file), sorted by name."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"Wikidata entities not found: {path}")
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and _is_entity_file(p))
    if not files:
        raise FileNotFoundError(f"no entity files (*.json, *.jsonl, optionally .gz/.bz2) under {path}")
    return files


def _is_entity_file(path: Path) -> bool:
    name = path.name.lower()
    return any(name.endswith(s + c) for s in SUFFIXES for c in COMPRESSIONS)


def read_entities(path: Path) -> EntityRead:
    """Read and merge every entity under ``path``."""
    result = EntityRead()
    result.files.extend(entity_files(path))
    for entity in iter_entities(result.files, result.problems):
        _merge(result.entities, entity)
    return result


def iter_entities(files: Iterable[Path], problems: list[Problem]) -> Iterator[dict]:
    """Every valid entity record of ``files`` in order, one at a time (an id may come again: ``merged``
    combines its records); invalid ones go to ``problems``."""
    for file in files:
        for source, entity in _iter_file(file, problems):
            problem = _validate(entity)
            if problem:
                problems.append(Problem(source, problem))
                continue
            yield entity


def normalized(entity: dict) -> dict:
    """``entity`` as ``read_entities`` keeps it: type and datatype set, empty maps as ``{}``."""
    single: dict[str, dict] = {}
    _merge(single, entity)
    return single[entity["id"]]


def merged(records: Iterable[dict]) -> dict:
    """The records of one entity merged as ``read_entities`` merges them (in order, first wins)."""
    entities: dict[str, dict] = {}
    for record in records:
        _merge(entities, record)
    (entity,) = entities.values()
    return entity


def _open_text(path: Path) -> IO[str]:
    name = path.name.lower()
    if name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    if name.endswith(".bz2"):
        return io.TextIOWrapper(bz2.open(path, "rb"), encoding="utf-8")
    return path.open("r", encoding="utf-8")


def _open_bytes(path: Path) -> IO[bytes]:
    name = path.name.lower()
    if name.endswith(".gz"):
        return io.BufferedReader(gzip.open(path, "rb"), READ_BUFFER)
    if name.endswith(".bz2"):
        return io.BufferedReader(bz2.open(path, "rb"), READ_BUFFER)
    return path.open("rb", buffering=READ_BUFFER)


def _iter_file(path: Path, problems: list[Problem]) -> Iterator[tuple[str, dict]]:
    name = path.name.lower()
    if any(name.endswith(s + c) for s in (".jsonl", ".ndjson") for c in COMPRESSIONS):
        with _open_bytes(path) as lines:
            yield from _iter_lines(path, lines, problems)
        return
    with _open_text(path) as handle:
        first = handle.read(1)
        while first and first.isspace():
            first = handle.read(1)
        if first == "{":  # Special:EntityData answer or a single entity
            try:
                document = json.loads(first + handle.read())
            except json.JSONDecodeError as error:
                problems.append(Problem(f"{path.name}:{error.lineno}", f"malformed JSON: {error.msg}"))
                return
            yield from _iter_document(path, document, problems)
        elif first == "[":
            if path.stat().st_size <= SMALL_ARRAY_BYTES and not name.endswith((".gz", ".bz2")):
                yield from _iter_small_array(path, first + handle.read(), problems)
            else:  # the full dump: stream one entity per line
                yield from _iter_lines(path, handle, problems)
        elif first:
            problems.append(Problem(f"{path.name}:1", "not JSON (expected '{' or '[')"))


def _iter_small_array(path: Path, text: str, problems: list[Problem]) -> Iterator[tuple[str, dict]]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        # Dump-shaped (one entity per line) with a bad line: the line reader names it.
        yield from _iter_lines(path, io.StringIO(text), problems)
        return
    for index, entity in enumerate(document):
        if isinstance(entity, dict):
            yield f"{path.name}#[{index}]", entity
        else:
            problems.append(Problem(f"{path.name}#[{index}]", "array item is not a JSON object"))


def _iter_document(path: Path, document: object, problems: list[Problem]) -> Iterator[tuple[str, dict]]:
    if isinstance(document, dict) and isinstance(document.get("entities"), dict):
        for key, entity in document["entities"].items():
            source = f"{path.name}#entities.{key}"
            if not isinstance(entity, dict) or "missing" in entity:
                problems.append(Problem(source, "missing entity"))
                continue
            yield source, entity
    elif isinstance(document, dict) and "id" in document:
        yield path.name, document
    else:
        problems.append(Problem(path.name, "JSON object is neither an entity nor an EntityData answer"))


_SKIPPED_LINES = ("", "[", "]", b"", b"[", b"]")


def _iter_lines(path: Path, handle: Iterable[str | bytes], problems: list[Problem]) -> Iterator[tuple[str, dict]]:
    # In the dump array the opening '[' may already be consumed: line 1 is then empty.
    for number, line in enumerate(handle, start=1):
        text = line.strip()
        if text[-1:] in (",", b","):
            text = text[:-1].rstrip()
        if text in _SKIPPED_LINES:
            continue
        source = f"{path.name}:{number}"
        try:
            entity = orjson.loads(text)
        except orjson.JSONDecodeError:  # orjson refuses more than json (lone surrogates, NaN, big ints)
            try:
                entity = json.loads(text)
            except json.JSONDecodeError as error:
                problems.append(Problem(source, f"malformed JSON: {error.msg} at column {error.colno}"))
                continue
            except UnicodeDecodeError as error:
                problems.append(Problem(source, f"not UTF-8: {error.reason} at byte {error.start}"))
                continue
        if not isinstance(entity, dict):
            problems.append(Problem(source, "line is not a JSON object"))
            continue
        yield source, entity


def _validate(entity: dict) -> str | None:
    entity_id = entity.get("id")
    if not (is_qid(entity_id) or is_pid(entity_id)):
        return f"entity id {entity_id!r} is not Q<digits> or P<digits>"
    for key in ("labels", "claims", "sitelinks"):
        if key in entity and not isinstance(entity[key], (dict, list)):
            return f"{key} is not an object"
    return None


def _merge(entities: dict[str, dict], entity: dict) -> None:
    """Merge ``entity`` into ``entities``: labels first-wins, claims union by statement id."""
    entity_id = entity["id"]
    current = entities.get(entity_id)
    if current is None:
        entities[entity_id] = {
            "id": entity_id,
            "type": entity.get("type", "property" if entity_id.startswith("P") else "item"),
            "datatype": entity.get("datatype"),
            "labels": dict(_as_dict(entity.get("labels"))),
            "claims": {p: list(s) for p, s in _as_dict(entity.get("claims")).items()},
            "sitelinks": dict(_as_dict(entity.get("sitelinks"))),
        }
        return
    for lang, label in _as_dict(entity.get("labels")).items():
        current["labels"].setdefault(lang, label)
    for site, link in _as_dict(entity.get("sitelinks")).items():
        current["sitelinks"].setdefault(site, link)
    for prop, statements in _as_dict(entity.get("claims")).items():
        existing = current["claims"].setdefault(prop, [])
        seen = {statement_key(s) for s in existing}
        for statement in statements:
            if statement_key(statement) not in seen:
                existing.append(statement)
                seen.add(statement_key(statement))
    current["datatype"] = current.get("datatype") or entity.get("datatype")


def _as_dict(value: object) -> dict:
    # Wikibase serialises an empty map as [] in some dumps.
    return value if isinstance(value, dict) else {}


def statement_key(statement: dict) -> str:
    """The statement GUID, or a content hash for statements that lack one."""
    if isinstance(statement.get("id"), str):
        return statement["id"]
    return "sha1:" + hashlib.sha1(json.dumps(statement, sort_keys=True).encode()).hexdigest()
