"""Validated Wikidata / WordNet identifiers and safe SPARQL fragments built from them.

Nothing reaches a query string unless it passed one of these checks: item and
property ids must match ``Q\\d+`` / ``P\\d+`` exactly, WordNet ids ``\\d{8}-[nvasr]``,
and free text (Commons category names) is emitted only as an escaped literal.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Sequence, TypeGuard, TypeVar

WD = "http://www.wikidata.org/entity/"
_QID = re.compile(r"Q[1-9][0-9]*")
_PID = re.compile(r"P[1-9][0-9]*")
_WORDNET_ID = re.compile(r"[0-9]{8}-[nvasr]")

T = TypeVar("T")


class MalformedId(ValueError):
    """An identifier that does not have the exact expected form."""


def is_qid(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _QID.fullmatch(value) is not None


def is_pid(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _PID.fullmatch(value) is not None


def is_wordnet_id(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _WORDNET_ID.fullmatch(value) is not None


def check_qid(value: object) -> str:
    if not is_qid(value):
        raise MalformedId(f"not a Wikidata item id (Q<digits>): {value!r}")
    return value


def check_pid(value: object) -> str:
    if not is_pid(value):
        raise MalformedId(f"not a Wikidata property id (P<digits>): {value!r}")
    return value


def check_wordnet_id(value: object) -> str:
    if not is_wordnet_id(value):
        raise MalformedId(f"not a WordNet synset id (8 digits, '-', pos letter): {value!r}")
    return value


def qid_from_iri(iri: str) -> str | None:
    """``http://www.wikidata.org/entity/Q144`` -> ``Q144``; None for anything else."""
    if iri.startswith(WD):
        tail = iri[len(WD) :]
        if is_qid(tail):
            return tail
    return None


def id_sort_key(entity_id: str) -> tuple[str, int]:
    """Numeric order of ids (Q2 before Q10)."""
    return entity_id[0], int(entity_id[1:])


def sparql_string(text: str, lang: str | None = None) -> str:
    """``text`` as a quoted SPARQL literal with every special character escaped."""
    if not isinstance(text, str):
        raise TypeError(f"expected text, got {type(text).__name__}")
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
        .replace("\b", "\\b")
        .replace("\f", "\\f")
    )
    if lang is not None and not re.fullmatch(r"[a-z]{2,3}(-[a-z0-9]+)*", lang):
        raise MalformedId(f"not a language tag: {lang!r}")
    return f'"{escaped}"' + (f"@{lang}" if lang else "")


def values_items(variable: str, qids: Iterable[str]) -> str:
    """``VALUES ?var { wd:Q1 wd:Q2 }`` from checked item ids."""
    return _values(variable, [f"wd:{check_qid(q)}" for q in qids])


def values_properties(variable: str, pids: Iterable[str]) -> str:
    """``VALUES ?var { wd:P17 ... }`` from checked property ids (the property entities)."""
    return _values(variable, [f"wd:{check_pid(p)}" for p in pids])


def values_strings(variable: str, texts: Iterable[str], lang: str | None = None) -> str:
    """``VALUES ?var { "a" "b" }`` with escaped literals."""
    return _values(variable, [sparql_string(t, lang) for t in texts])


def _values(variable: str, terms: list[str]) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", variable):
        raise MalformedId(f"not a SPARQL variable name: {variable!r}")
    if not terms:
        raise ValueError("VALUES needs at least one term")
    return f"VALUES ?{variable} {{ {' '.join(terms)} }}"


def batched(items: Sequence[T], size: int) -> Iterator[list[T]]:
    """Consecutive chunks of at most ``size`` items."""
    if size < 1:
        raise ValueError("batch size must be >= 1")
    for start in range(0, len(items), size):
        yield list(items[start : start + size])
