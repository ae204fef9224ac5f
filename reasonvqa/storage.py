"""Output locations: a local folder or an fsspec URL (s3://, gs://, az://, memory://, ...).

The release is written into a local folder; one whose ``out`` is a URL is then uploaded there
with fsspec (``upload_release``, manifest last). The work folder (shards, stats, markers) of
``build-reasonvqa`` is a folder every task-runner worker reaches (a local disk for threads and a
LocalCluster, a shared mount for a remote Dask cluster) or an fsspec URL (``work_folder``): its
shards then live at the URL and each process works through a private local mirror of each build,
removed when the build ends (``reasonvqa.workstore``), under a lease instead of an ``fcntl`` lock
(``reasonvqa.lease``).
The endpoint and credentials of a URL come from its backend's settings in every process (for S3
``AWS_ENDPOINT_URL`` or ``FSSPEC_S3_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``:
set them where the Dask workers start too). ``build-verified-qa`` still takes a local work folder
only (``local_work_folder``).
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
        extra, package = BACKEND_EXTRAS.get(scheme or "") or (None, None)
        hint = (f"pip install 'reasonvqa-pipeline[{extra}]' (installs {package})" if extra
                else f"install the fsspec backend for {scheme}://")
        raise MissingBackend(f"{url}: no {scheme}:// filesystem installed; {hint}") from None
    except ValueError as error:  # an unknown protocol
        raise MissingBackend(f"{url}: {error}") from None
    return fs, path


class RemoteWorkFolder(UsageError):
    """A work folder given as an fsspec URL where one is not supported."""


PROCESS_LOCAL = ("memory",)  # fsspec file systems that live in one process: Dask workers would not share them


def work_folder(work: str, build: str | None = None) -> Path:
    """The local folder a build works in: ``work`` itself for a path (``file://`` stripped), this
    process's mirror of it for an fsspec URL (``reasonvqa.workstore``), in the folder of ``build``
    (default a new build id). MissingBackend names the extra to install; a process-local file system
    (memory://) is refused."""
    from reasonvqa import workstore

    scheme = protocol(work)
    if not scheme:
        return Path(work.removeprefix("file://"))
    if scheme in PROCESS_LOCAL:
        raise RemoteWorkFolder(f"work folder {work}: a {scheme}:// file system lives in one process, so Dask "
                               f"workers would not see it; give a local path or a shared URL (s3://, gs://)")
    filesystem(work)
    return workstore.local_path(work.rstrip("/"), build or workstore.new_build())


def local_work_folder(work: str) -> Path:
    """``work`` as a local path (``file://`` stripped); RemoteWorkFolder for any other URL
    (``build-verified-qa``, whose model stages write their shards and call caches as local files).
    """
    scheme = protocol(work)
    if scheme:
        raise RemoteWorkFolder(
            f"work folder {work}: give a local path, or a shared mount every worker sees (NFS, a shared disk), "
            f"not a {scheme}:// URL: build-verified-qa's model stages write their shards and call caches "
            f"as local files; a URL work folder is supported by build-reasonvqa only")
    return Path(work.removeprefix("file://"))


def upload_release(release: Path, out_url: str, overwrite: bool = False) -> str:
    """Copy a local release folder to ``<out_url>/<name>/<version>``.

    A remote copy holding the same content (same manifest, or the same ``content_hash``) is kept
    as is; one with other content is replaced only with ``overwrite``, else ReleaseExistsError.
    """
    import json

    from reasonvqa.errors import ReleaseExistsError

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
