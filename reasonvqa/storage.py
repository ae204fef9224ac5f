"""Output locations: a local folder or an fsspec URL (s3://, gs://, az://, memory://, ...).

A build writes its shards and the release into local folders (the work folder must be one all
task-runner workers reach: a local disk for threads and a LocalCluster, a shared mount for a
remote Dask cluster); a release whose ``out`` is a URL is then uploaded there with fsspec.
A work folder given as a URL is refused (``local_work_folder``).
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from reasonvqa.errors import UsageError

# fsspec protocol -> (extra of this package, the package that implements it)
BACKEND_EXTRAS = {"s3": ("s3", "s3fs"), "s3a": ("s3", "s3fs"), "gs": ("gcs", "gcsfs"), "gcs": ("gcs", "gcsfs"),
                  "az": ("azure", "adlfs"), "abfs": ("azure", "adlfs"), "abfss": ("azure", "adlfs")}


class MissingBackend(UsageError):
    """The fsspec backend of an output URL is not installed."""


def protocol(location: str) -> str | None:
    """The URL scheme of ``location`` (None for a local path or ``file://``)."""
    from fsspec.utils import get_protocol

    found = get_protocol(str(location))
    return None if found in ("file", "local") else found


def filesystem(url: str):
    """``(filesystem, path)`` of an fsspec URL; MissingBackend names the extra to install."""
    import fsspec

    scheme = protocol(url)
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError:
        extra, package = BACKEND_EXTRAS.get(scheme, (None, None))
        hint = (f"pip install 'reasonvqa-pipeline[{extra}]' (installs {package})" if extra
                else f"install the fsspec backend for {scheme}://")
        raise MissingBackend(f"{url}: no {scheme}:// filesystem installed; {hint}") from None
    except ValueError as error:  # an unknown protocol
        raise MissingBackend(f"{url}: {error}") from None
    return fs, path


class RemoteWorkFolder(UsageError):
    """A work folder given as an fsspec URL."""


def local_work_folder(work: str) -> Path:
    """``work`` as a local path (``file://`` stripped); RemoteWorkFolder for any other URL.

    Shard markers need what a POSIX file system gives and object stores do not: the build holds an
    ``fcntl`` lock on the work folder, and every shard file appears by an atomic rename, so a
    crashed or concurrent task never leaves a half-written file that looks finished.
    """
    scheme = protocol(work)
    if scheme:
        raise RemoteWorkFolder(
            f"work folder {work}: give a local path, or a shared mount every worker sees (NFS, a shared disk), "
            f"not a {scheme}:// URL: shard markers need fcntl locks and atomic renames, which object stores "
            f"lack; an fsspec URL is accepted for --out (the release), not for --work")
    return Path(work.removeprefix("file://"))


def upload_release(release: Path, out_url: str, overwrite: bool = False) -> str:
    """Copy a local release folder to ``<out_url>/<name>/<version>``.

    A remote copy holding the same content (same manifest, or the same ``content_hash``) is kept
    as is; one with other content is replaced only with ``overwrite``, else ReleaseExistsError.
    """
    import json

    from reasonvqa.tasks.release.writer import ReleaseExistsError

    fs, root = filesystem(out_url)
    target = posixpath.join(root, release.parent.name, release.name)
    url = f"{out_url.rstrip('/')}/{release.parent.name}/{release.name}"
    manifest = posixpath.join(target, "manifest.json")
    if fs.exists(manifest):
        remote, local = fs.cat_file(manifest), (release / "manifest.json").read_bytes()
        new_hash = json.loads(local).get("content_hash")
        if remote == local or (new_hash is not None and _content_hash(remote) == new_hash):
            return url
        if not overwrite:
            raise ReleaseExistsError(f"release {url} exists with different content; choose another version or overwrite")
    staging = f"{target}.uploading"
    for file in sorted(p for p in release.rglob("*") if p.is_file()):  # manifest last: its presence marks completion
        if file.name != "manifest.json":
            fs.put_file(str(file), posixpath.join(staging, file.relative_to(release).as_posix()))
    fs.put_file(str(release / "manifest.json"), posixpath.join(staging, "manifest.json"))
    if fs.exists(target):
        fs.rm(target, recursive=True)
    fs.mv(staging, target, recursive=True)
    return url


def _content_hash(manifest: bytes) -> str | None:
    """The ``content_hash`` of a manifest's bytes; None when it has none or is not JSON."""
    import json

    try:
        value = json.loads(manifest)
    except ValueError:
        return None
    return value.get("content_hash") if isinstance(value, dict) else None
