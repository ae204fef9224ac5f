"""The GLDv2 side files: landmark -> Commons category, and the clean image list.

``train_label_to_category.csv``: ``landmark_id,category`` where category is a Commons
URL such as ``http://commons.wikimedia.org/wiki/Category:Eiffel_Tower`` (percent-encoded
UTF-8, sometimes quoted). ``train_clean.csv``: ``landmark_id,images`` with the image
ids separated by spaces. Bad rows become reject tuples ``(reason, source, record)``.
"""

from __future__ import annotations

import csv
import re
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generator, Iterator
from urllib.parse import unquote

import numpy as np

from reasonvqa.errors import DataError
from reasonvqa.tasks.sources.normalize import as_int_id, collapse_spaces
from reasonvqa.tasks.sources.seen_ids import sorted_unique

CATEGORIES = "train_label_to_category.csv"
CLEAN = "train_clean.csv"

_HEX16 = re.compile(r"[0-9a-f]{16}")
_COMMONS_CATEGORY = re.compile(r"(?:https?://commons(?:\.m)?\.wikimedia\.org/wiki/)?Category:(.+)", re.IGNORECASE)

Reject = tuple[str, str, object]


def image_key(value: str) -> str | None:
    """A GLDv2 image id (16 lowercase hex digits), or None."""
    text = value.strip().lower()
    return text if _HEX16.fullmatch(text) else None


def commons_category_name(value: str) -> str | None:
    """``.../wiki/Category:Eiffel_Tower`` -> ``Eiffel Tower`` (percent-decoded UTF-8); None if not one."""
    match = _COMMONS_CATEGORY.fullmatch(value.strip())
    if match is None:
        return None
    try:
        name = unquote(match.group(1), encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        return None
    name = collapse_spaces(name.replace("_", " "))
    return name or None


@dataclass
class SideTables:
    """Lookups the train.csv rows need, and the side files' own rejects."""

    categories: dict[int, str] = field(default_factory=dict)
    clean: np.ndarray | None = None  # sorted uint64 image ids of train_clean.csv; None when absent
    rejects: list[Reject] = field(default_factory=list)

    def is_clean(self, ids: np.ndarray) -> np.ndarray | None:
        """Membership of ``ids`` (uint64) in the clean list; None when there is no list."""
        if self.clean is None:
            return None
        if self.clean.size == 0:
            return np.zeros(ids.shape, dtype=bool)
        where = np.minimum(np.searchsorted(self.clean, ids), self.clean.size - 1)
        return self.clean[where] == ids


class CsvColumnError(DataError):
    """A CSV file without a column its rows need (exit 1, naming file and column)."""


def require_columns(path: Path, header: list[str], names: tuple[str, ...]) -> None:
    """CsvColumnError naming ``path`` and the first of ``names`` its ``header`` lacks."""
    missing = [name for name in names if name not in header]
    if missing:
        raise CsvColumnError(f"{path}: required column {missing[0]!r} missing (header: {','.join(header) or 'empty'})")


def csv_rows(path: Path) -> Generator:
    """Yield the lower-cased header, then ``(line number, row)`` for each non-blank data row; the
    line is where the record starts (a quote left open swallows the lines after it: the fault
    is on its first line).

    Bytes that are not UTF-8 stay as lone surrogates (``surrogateescape``) so a reader can
    reject the row (``has_invalid_utf8``) instead of keeping replacement characters.
    """
    with open(path, newline="", encoding="utf-8-sig", errors="surrogateescape") as handle:
        reader = csv.reader(handle)
        yield [h.strip().lower() for h in next(reader, [])]
        ended = reader.line_num
        for row in reader:
            start, ended = ended + 1, reader.line_num
            if row and any(cell.strip() for cell in row):
                yield start, row


def has_invalid_utf8(row: list[str]) -> bool:
    """True when a cell of a ``csv_rows`` row held bytes that are not UTF-8."""
    return any(not cell.isascii() and _SURROGATE.search(cell) for cell in row)


_SURROGATE = re.compile("[\udc80-\udcff]")


def _columns(path: Path, names: tuple[str, str], rejects: list[Reject]) -> Iterator[tuple[str, str, str, list[str]]]:
    """``(source, first, second, row)`` for each well-formed row, ``first``/``second`` the named columns.

    A header without both columns is a CsvColumnError; a row of the wrong width is one reject.
    """
    with closing(csv_rows(path)) as rows:
        header = next(rows)
        require_columns(path, header, names)
        first, second = (header.index(name) for name in names)
        for line, row in rows:
            source = f"{path.name}:{line}"
            if has_invalid_utf8(row):
                rejects.append(("csv_invalid_utf8", source, row))
            elif len(row) != len(header):
                rejects.append(("csv_row_malformed", source, row))
            else:
                yield source, row[first], row[second], row


def read_categories(path: Path, tables: SideTables) -> None:
    """Fill ``tables.categories`` from train_label_to_category.csv."""
    for source, landmark_text, url, row in _columns(path, ("landmark_id", "category"), tables.rejects):
        landmark = as_int_id(landmark_text)
        name = commons_category_name(url)
        if landmark is None:
            tables.rejects.append(("category_landmark_id_not_numeric", source, row))
        elif name is None:
            tables.rejects.append(("category_url_malformed", source, row))
        elif landmark in tables.categories:
            tables.rejects.append(("duplicate_landmark_category", source, row))
        else:
            tables.categories[landmark] = name


def read_clean(path: Path, tables: SideTables) -> None:
    """Fill ``tables.clean`` from train_clean.csv (one reject per bad row or bad image id)."""
    chunks: list[np.ndarray] = []
    for source, landmark_text, images, row in _columns(path, ("landmark_id", "images"), tables.rejects):
        if as_int_id(landmark_text) is None:
            tables.rejects.append(("clean_landmark_id_not_numeric", source, row))
            continue
        ids = []
        for token in images.split():
            key = image_key(token)
            if key is None:
                tables.rejects.append(("clean_image_id_malformed", source, token))
            else:
                ids.append(int(key, 16))
        chunks.append(np.array(ids, dtype=np.uint64))
    tables.clean = sorted_unique(np.concatenate(chunks)) if chunks else np.zeros(0, dtype=np.uint64)


def read_side_tables(folder: Path, need_categories: bool) -> SideTables:
    """Read the category map (required when ``need_categories``) and the optional clean list."""
    tables = SideTables()
    categories = folder / CATEGORIES
    if categories.is_file():
        read_categories(categories, tables)
    elif need_categories:
        raise FileNotFoundError(f"GLDv2 landmark categories not found: {categories}")
    if (folder / CLEAN).is_file():
        read_clean(folder / CLEAN, tables)
    return tables
