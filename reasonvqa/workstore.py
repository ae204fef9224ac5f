"""A build's work folder on an fsspec URL (``s3://bucket/work``), seen by each process through a private mirror.

The URL holds every shard, stats file and completion marker; nothing else is shared between the
flow's process and the Dask workers. Each process reads and writes through its own local folder, one
per build: ``<tmp>/rvqa-mirror.XXXX/build-<id>/<protocol>/<path>`` stands for ``<protocol>://<path>``.
The build id travels in the path itself, so a worker that receives a path of a build it has not seen
starts that build with an empty mirror, and nothing one build fetched is trusted by the next (a
long-lived process, ``serve`` or a Dask worker, runs many builds); ``forget`` removes a build's mirror
when the build ends.

- ``stage.write_parquet``/``write_json`` and the ``_done`` markers write the local file, then PUT it
  (``push``). One PUT is atomic on an object store (the object appears whole or not at all), and a
  shard's outputs are put before its marker, so a marker at the URL means a finished shard; two
  writers of one shard put the same bytes (outputs are deterministic).
- readers ask for a file (``fetch``: a GET on a miss), a marker (``exists``: always the URL, even when
  this process wrote it) or a folder's listing (``listing``) and get the URL's answer, never another
  process's local copy.
- a Prefect task receives paths from the flow's process: ``portable`` rebases every mirror path among
  its arguments onto the running process's mirror (``rebase``) and fetches the files it names.

Paths outside a mirror (a local or mounted work folder) are left alone by every function here.
The endpoint and credentials come from the backend's own settings, the same in every process: for
S3, ``AWS_ENDPOINT_URL`` (or ``FSSPEC_S3_ENDPOINT_URL``), ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import os
import shutil
import tempfile
import threading
import uuid
from pathlib import Path, PurePosixPath
from typing import Any, Callable

MIRROR_PREFIX = "rvqa-mirror."  # the folder name that marks a path as a mirror of a URL
BUILD_PREFIX = "build-"  # a build's own folder in a process's mirror
_base: Path | None = None
_base_lock = threading.Lock()


def _process_folder(current: Path | None, prefix: str) -> Path:
    """``current`` while it exists, else a new temporary folder ``<prefix>*`` removed when the process exits."""
    if current is not None and current.exists():
        return current
    made = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, made, True)
    return made


def mirror_base() -> Path:
    """This process's mirror folder (created on first use, removed when the process exits)."""
    global _base
    with _base_lock:
        _base = _process_folder(_base, MIRROR_PREFIX)
        return _base


_scratch_base: Path | None = None


def scratch(path: Path) -> Path:
    """Where this process keeps, across builds, what it may reuse for a mirror path: ``path`` without its
    build's folder, in a per-process folder outside every mirror (never uploaded; removed when the process
    exits, not when the build ends): model call caches, the knowledge mirror's store. Any other path: itself."""
    global _scratch_base
    path = Path(path)
    i = _mirror_index(path)
    if i is None or len(path.parts) < i + 3:
        return path
    with _base_lock:
        _scratch_base = _process_folder(_scratch_base, "rvqa-scratch.")
        return _scratch_base.joinpath(*path.parts[i + 2:])


def url_of(path: Path) -> str:
    """The URL a mirror path stands for (``<mirror>/build-<id>/s3/b/w`` -> ``s3://b/w``), for messages that
    outlive the build's mirror; any other path as a string."""
    return _url(Path(path)) or str(path)


def _url(path: Path) -> str | None:
    """The URL a mirror path stands for; None for any other path."""
    i = _mirror_index(path)
    if i is None or len(path.parts) < i + 3:
        return None
    return f"{path.parts[i + 2]}://" + "/".join(path.parts[i + 3:])  # parts[i + 1]: the build's folder


def new_build() -> str:
    """A fresh build id: the name of that build's folder in every process's mirror."""
    return uuid.uuid4().hex[:12]


def local_path(url: str, build: str) -> Path:
    """The path in this process's mirror of ``build`` that stands for ``url``
    (``s3://b/w`` -> ``<mirror>/build-<build>/s3/b/w``)."""
    scheme, _, rest = url.partition("://")
    return mirror_base() / f"{BUILD_PREFIX}{build}" / scheme / rest.strip("/")


def forget(path: Path) -> None:
    """Remove this process's mirror of the build ``path`` belongs to (any process's path of it), and
    what ``refresh`` remembered of it; nothing for a path outside a mirror."""
    path = rebase(Path(path))
    i = _mirror_index(path)
    if i is None or len(path.parts) < i + 2:
        return
    folder = Path(*path.parts[:i + 2])
    for seen in [p for p in _versions if folder in p.parents]:
        _versions.pop(seen, None)
    shutil.rmtree(folder, ignore_errors=True)


def _mirror_index(path: Path) -> int | None:
    """Position of the mirror folder among ``path``'s parts (None outside any mirror)."""
    for i, part in enumerate(path.parts):
        if part.startswith(MIRROR_PREFIX):
            return i
    return None


def remote(path: Path) -> tuple[Any, str] | None:
    """``(filesystem, remote path)`` that a mirror path stands for; None for any other path."""
    from reasonvqa.storage import filesystem

    url = _url(Path(path))
    return None if url is None else filesystem(url)


def is_mirrored(path: Path) -> bool:
    return _mirror_index(Path(path)) is not None


def rebase(value: Any) -> Any:
    """``value`` with each mirror path (a Path or str, anywhere in lists, tuples, dicts, dataclasses and
    pydantic models) moved onto this process's mirror, so paths made by the flow's process name this
    process's copies. What holds no mirror path is returned as is (the same object)."""
    if isinstance(value, Path):
        i = _mirror_index(value)
        return value if i is None else mirror_base().joinpath(*value.parts[i + 1:])
    if isinstance(value, str):
        return str(rebase(Path(value))) if MIRROR_PREFIX in value else value
    if isinstance(value, (list, tuple)):
        items = [rebase(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
    if isinstance(value, dict):
        items = {k: rebase(v) for k, v in value.items()}
        return value if all(items[k] is v for k, v in value.items()) else items
    changes = {name: new for name, old in _fields(value) if (new := rebase(old)) is not old}
    if not changes:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **changes)
    return value.model_copy(update=changes)


def _fields(value: Any) -> list[tuple[str, Any]]:
    """(name, value) of each field of a dataclass instance (those ``replace`` takes) or pydantic model."""
    from pydantic import BaseModel

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value) if f.init]
    if isinstance(value, BaseModel):
        return [(name, getattr(value, name)) for name in type(value).model_fields]
    return []


def _paths(value: Any) -> list[Path]:
    """Every Path in ``value``, wherever ``rebase`` looks."""
    if isinstance(value, Path):
        return [value]
    if isinstance(value, (list, tuple)):
        return [p for v in value for p in _paths(v)]
    if isinstance(value, dict):
        return [p for v in value.values() for p in _paths(v)]
    return [p for _, v in _fields(value) for p in _paths(v)]


def portable(fn: Callable) -> Callable:
    """A task body that may run in another process: its mirror paths rebased, the files they name
    (Paths anywhere in its arguments) made the URL's current version."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        args, kwargs = rebase(args), rebase(kwargs)
        for path in _paths([args, kwargs]):
            if path.suffix and is_mirrored(path):
                refresh(path)
        return fn(*args, **kwargs)

    return run


def fetch(path: Path) -> bool:
    """Make a mirror path's file present locally (a GET on a miss); False when the URL lacks it.
    Any other path: whether it exists. For the files a stage's shard writes once (markers vouch for them)."""
    path = Path(path)
    found = _missing(path)
    if found is None:
        return path.exists()
    return _get(*found, path)


def fetch_all(paths: list[Path]) -> None:
    """``fetch`` each of ``paths``, the missing ones of one URL in one concurrent ``get`` (a stage's
    stats or shards, read by the flow's process: thousands of small GETs one by one would take minutes)."""
    wanted: dict[int, tuple[Any, list[str], list[Path]]] = {}
    for path in map(Path, paths):
        found = _missing(path)
        if found is not None:
            fs, key = found
            group = wanted.setdefault(id(fs), (fs, [], []))
            group[1].append(key)
            group[2].append(path)
    for fs, keys, targets in wanted.values():
        _download(fs, keys, targets)


def refresh(path: Path) -> None:
    """Make a mirror path's local copy the URL's current version (a HEAD, and a GET when it changed since
    this process fetched or put it; the copy is removed when the URL no longer has the file): for the
    files a build rewrites (merged facts, corpus tables)."""
    path = Path(path)
    found = remote(path)
    if found is None:
        return
    fs, key = found
    fs.invalidate_cache(key)
    try:
        version = fs.ukey(key)
    except FileNotFoundError:
        _versions.pop(path, None)
        path.unlink(missing_ok=True)
        return
    known = _versions.get(path)
    if known is _PUT and path.exists():  # the URL holds what this process put (the build's lease keeps others out)
        _versions[path] = version
    elif known != version or not path.exists():
        _get(fs, key, path)
        _versions[path] = version


_PUT = object()  # in ``_versions``: this process put the file; its version is read on the next ``refresh``
_versions: dict[Path, Any] = {}  # the version of each file ``refresh`` fetched (or ``_PUT``), by its mirror path


def _get(fs, key: str, path: Path) -> bool:
    """GET ``key`` into ``path``; False when the URL lacks it."""
    try:
        _download(fs, [key], [path])
    except FileNotFoundError:
        return False
    return True


def _download(fs, keys: list[str], targets: list[Path]) -> None:
    """GET ``keys`` into ``targets`` (several in one concurrent ``get``), each aside then renamed, so a
    reader in another thread sees whole files only; FileNotFoundError when the URL lacks one."""
    aside = []
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        aside.append(target.with_name(f"{target.name}.{uuid.uuid4().hex}.get"))
    try:
        if len(keys) == 1:
            fs.get_file(keys[0], str(aside[0]))
        else:
            fs.get(keys, [str(p) for p in aside])
    except BaseException:
        for tmp in aside:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, target in zip(aside, targets):
        os.replace(tmp, target)


def exists(path: Path) -> bool:
    """Whether a file exists: at the URL for a mirror path (a completion marker: a local copy does not
    vouch for it, since the URL's may have been deleted since), else locally."""
    found = remote(Path(path))
    if found is None:
        return Path(path).exists()
    found[0].invalidate_cache(found[1])  # another process may have written it since this one last looked
    return found[0].exists(found[1])


def _missing(path: Path) -> tuple[Any, str] | None:
    """``remote(path)`` for a mirror path whose file is not here; None when it is here or outside a mirror."""
    return None if path.exists() else remote(path)


def push(path: Path) -> None:
    """PUT a mirror path's local file to its URL (one atomic object); nothing for any other path."""
    found = remote(path)
    if found is not None:
        found[0].put_file(str(path), found[1])
        _versions[Path(path)] = _PUT  # this process's copy is the URL's: ``refresh`` records its version, no GET


def listing(folder: Path, pattern: str) -> list[Path]:
    """The files of ``folder`` matching ``pattern`` (a glob on names), sorted: at the URL for a
    mirror folder (as local paths, not fetched), else on disk."""
    folder = Path(folder)
    found = remote(folder)
    if found is None:
        return sorted(p for p in folder.glob(pattern) if p.is_file())
    fs, key = found
    fs.invalidate_cache(key)
    names = {Path(p).name for p in fs.glob(f"{key.rstrip('/')}/{pattern}")}
    return sorted(folder / name for name in names if not name.endswith((".tmp", ".get")))


def find(folder: Path, pattern: str) -> list[Path]:
    """The files at any depth below ``folder`` whose path ends as ``pattern`` (a glob such as
    ``questions/part-*.parquet``), sorted: at the URL for a mirror folder (as local paths, not fetched), else on disk."""
    folder = Path(folder)
    found = remote(folder)
    if found is None:
        return sorted(p for p in folder.rglob(pattern) if p.is_file())
    fs, key = found
    root = key.rstrip("/")
    fs.invalidate_cache(root)
    keys = [k for k in fs.glob(f"{root}/**/{pattern}") if not k.endswith((".tmp", ".get"))]
    return sorted(folder / PurePosixPath(k).relative_to(root) for k in keys)


def subfolders(folder: Path, prefix: str) -> list[Path]:
    """The sub-folders of ``folder`` whose names start with ``prefix``, sorted (at the URL for a mirror folder)."""
    folder = Path(folder)
    found = remote(folder)
    if found is None:
        return sorted(p for p in folder.glob(f"{prefix}*") if p.is_dir())
    fs, key = found
    fs.invalidate_cache(key)
    if not fs.exists(key):
        return []
    entries = fs.ls(key, detail=True)
    return sorted(folder / Path(e["name"]).name for e in entries
                  if e["type"] == "directory" and Path(e["name"]).name.startswith(prefix))


def remove_tree(folder: Path) -> None:
    """Remove a folder locally and, for a mirror folder, at its URL."""
    folder = Path(folder)
    if folder.exists():
        shutil.rmtree(folder)
    found = remote(folder)
    if found is not None and found[0].exists(found[1]):
        found[0].rm(found[1], recursive=True)
