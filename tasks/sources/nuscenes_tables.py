"""nuScenes v1.0 tables (``<dataroot>/<version>/<table>.json``) loaded once and indexed by token.

Each table is a JSON list of rows keyed by ``token``. The raw ``sample_data`` has no
``channel`` or modality: they come from ``calibrated_sensor`` -> ``sensor``. Lyft Level 5
tables in the same format (float timestamps, 64-hex tokens, empty visibility tokens) load too.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from reasonvqa.loaded_once import loaded_once

TABLES = ("scene", "sample", "sample_data", "sample_annotation", "instance", "category", "attribute",
          "visibility", "sensor", "calibrated_sensor", "ego_pose", "log")
OPTIONAL = frozenset({"visibility", "attribute", "log"})  # a release may leave these out


class NuScenesTableError(ValueError):
    """A table file that is missing, not JSON, or not a list of rows with tokens."""


def find_table_dir(dataroot: Path, version: str | None) -> Path:
    """``<dataroot>/<version>``, or the one sub-folder holding ``sample.json`` when no version is given."""
    if version is not None:
        folder = dataroot / version
        if not (folder / "sample.json").is_file():
            raise FileNotFoundError(f"nuScenes table not found: {folder / 'sample.json'}")
        return folder
    if (dataroot / "sample.json").is_file():
        return dataroot
    candidates = sorted(p.parent for p in dataroot.glob("*/sample.json"))
    if len(candidates) != 1:
        found = ", ".join(p.name for p in candidates) or "none"
        raise FileNotFoundError(f"expected one nuScenes version folder with sample.json under {dataroot}, found {found}")
    return candidates[0]


@dataclass(frozen=True)
class Tables:
    """Rows by table and token, plus the groupings a scene read needs."""

    folder: Path
    rows: dict[str, dict[str, dict]]
    samples_by_scene: dict[str, list[str]]
    keyframes_by_sample: dict[str, list[str]]
    annotations_by_sample: dict[str, list[str]]

    def get(self, table: str, token: str | None) -> dict | None:
        """The row of ``table`` with ``token``, or None when the table has no such row."""
        if not isinstance(token, str):
            return None
        return self.rows[table].get(token)


def load_tables(folder: Path) -> Tables:
    """Load and index the tables of one version folder (cached per folder and file times)."""
    stamp = tuple((name, _mtime(folder / f"{name}.json")) for name in TABLES)
    return _load(folder.resolve(), stamp)


def _mtime(path: Path) -> int:
    return path.stat().st_mtime_ns if path.exists() else -1


@loaded_once(maxsize=2)
def _load(folder: Path, stamp: tuple) -> Tables:
    rows: dict[str, dict[str, dict]] = {}
    for name in TABLES:
        path = folder / f"{name}.json"
        if not path.is_file():
            if name in OPTIONAL:
                rows[name] = {}
                continue
            raise NuScenesTableError(f"nuScenes table not found: {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:
            raise NuScenesTableError(f"{path.name}: not valid JSON ({error})") from None
        if not isinstance(data, list):
            raise NuScenesTableError(f"{path.name}: expected a JSON list of rows")
        table: dict[str, dict] = {}
        for index, row in enumerate(data):
            if not isinstance(row, dict) or not isinstance(row.get("token"), str):
                raise NuScenesTableError(f"{path.name}#[{index}]: row without a string token")
            table[row["token"]] = row
        rows[name] = table
    samples_by_scene: dict[str, list[str]] = defaultdict(list)
    for token, row in rows["sample"].items():
        samples_by_scene[row.get("scene_token", "")].append(token)
    for tokens in samples_by_scene.values():
        tokens.sort(key=lambda t: (float(rows["sample"][t].get("timestamp") or 0), t))
    keyframes: dict[str, list[str]] = defaultdict(list)
    for token, row in rows["sample_data"].items():
        if row.get("is_key_frame"):
            keyframes[row.get("sample_token", "")].append(token)
    annotations: dict[str, list[str]] = defaultdict(list)
    for token, row in rows["sample_annotation"].items():
        annotations[row.get("sample_token", "")].append(token)
    for groups in (keyframes, annotations):
        for tokens in groups.values():
            tokens.sort()
    return Tables(folder, rows, dict(samples_by_scene), dict(keyframes), dict(annotations))
