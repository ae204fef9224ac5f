"""A build's work folder (or a release or stage folder read back) as stages and flows see it, wherever
it lives: a local folder, or this process's mirror of an fsspec URL (``s3://bucket/work``).

Callers pass the paths they were given and never ask which kind they hold; ``reasonvqa.workstore`` keeps
the URL mechanics (mirrors, GETs and PUTs, rebasing paths between processes), and only the core and the
stage runner (``flows/stage_runner.py``, ``flows/work_session.py``) import it. Files are written with
``reasonvqa.stage``'s writers, which PUT each file to a work folder URL.
"""

from __future__ import annotations

from pathlib import Path

from reasonvqa import workstore


def present(path: Path) -> bool:
    """Whether the work folder has the file ``path``, which is then present locally (fetched from a work
    folder URL on a miss): for the files a stage's shard writes once."""
    return workstore.fetch(Path(path))


def subfolders(folder: Path, prefix: str) -> list[Path]:
    """The sub-folders of ``folder`` whose names start with ``prefix``, sorted (those at the URL for a work
    folder URL)."""
    return workstore.subfolders(Path(folder), prefix)


def files(folder: Path, pattern: str) -> list[Path]:
    """The files of ``folder`` whose names match the glob ``pattern``, sorted (not fetched)."""
    return workstore.listing(Path(folder), pattern)


def files_below(folder: Path, pattern: str) -> list[Path]:
    """The files at any depth below ``folder`` whose paths end as the glob ``pattern`` (such as
    ``questions/part-*.parquet``), sorted (not fetched)."""
    return workstore.find(Path(folder), pattern)


def is_remote(path: Path) -> bool:
    """Whether ``path`` is this process's copy of a work folder URL's path (other processes see the URL,
    never this process's disk)."""
    return workstore.is_mirrored(Path(path))


def location(path: Path) -> str:
    """Where ``path`` lives, for messages that outlive the build: its URL, or the local path."""
    return workstore.url_of(Path(path))


def reusable_dir(path: Path) -> Path:
    """Where this process keeps, across builds, what it may reuse for the work folder's ``path`` (a
    local store, never uploaded): ``path`` itself in a local work folder."""
    return workstore.scratch(Path(path))


def drop_local_copies(path: Path) -> None:
    """Remove this process's fetched copies of the work folder URL ``path`` belongs to (the tables read
    are in memory, or the build is done); nothing for a local folder."""
    workstore.forget(Path(path))
