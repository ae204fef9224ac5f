"""Where a build writes: its release target (a folder, or a local staging folder uploaded to an fsspec URL)
and its work folder, held by this build alone while its stages run.

A local work folder is held with an ``fcntl`` lock (the kernel holds it until the process ends); a work
folder URL with a lease (``reasonvqa.lease``) that a renewal thread keeps, which ``still_held`` checks
between stages. When the session ends, the build's mirror of a work folder URL is forgotten, here and on
the Dask workers, so no later build trusts what this one fetched.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from prefect import get_run_logger
from prefect.context import FlowRunContext
from prefect.exceptions import MissingContextError
from prefect.logging import get_logger

from reasonvqa import storage, workstore
from reasonvqa.flows.config import ReleaseConfig
from reasonvqa.lease import Lease, lease_lock
from reasonvqa.locks import exclusive_lock
from reasonvqa.tasks.release.paths import default_work_folder, release_dir


def always_held() -> None:
    """The check between stages of a build under an ``fcntl`` lock, which the kernel holds until it ends."""


@dataclass(frozen=True)
class ReleaseTarget:
    """Where a build writes its release: ``out`` itself, or for an fsspec URL ``out`` a local staging folder
    (``local_staging``) whose release ``publish`` uploads. ``overwrite`` applies where the release lands:
    the staging copy is always replaced, whether the URL's may be is decided at the URL."""

    out: str
    out_dir: Path
    overwrite: bool

    @classmethod
    def of(cls, out: str, overwrite: bool, release: ReleaseConfig) -> "ReleaseTarget":
        """The target of ``out``; fails now, before any work, on a URL whose backend is missing (naming the
        extra to install) or a release name or version that leaves the output folder."""
        if storage.protocol(out):
            storage.filesystem(out)
        target = cls(out, local_staging(out) if storage.protocol(out) else Path(out), overwrite)
        release_dir(target.out_dir, release.name, release.version)
        return target

    @property
    def local_overwrite(self) -> bool:
        """Whether the release written into ``out_dir`` may replace one there (always, for a staging folder)."""
        return self.overwrite or bool(storage.protocol(self.out))

    def publish(self, release: Path) -> str:
        """The release's folder, or for a URL target its URL once uploaded."""
        if not storage.protocol(self.out):
            return str(release)
        return storage.upload_release(release, self.out, self.overwrite)


def local_staging(out_url: str) -> Path:
    """The local folder a release for ``out_url`` is built in (stable, so rebuilds reuse its work folder)."""
    return Path(tempfile.gettempdir()) / "reasonvqa-out" / hashlib.sha256(out_url.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class WorkSession:
    """A work folder this build holds: ``still_held`` raises ``LeaseLost`` once another build took it over."""

    work_dir: Path
    still_held: Callable[[], None]


@contextlib.contextmanager
def work_session(work: str | None, out_dir: Path, key: str) -> Iterator[WorkSession]:
    """Hold the build's work folder while the block runs: ``work`` (a path or a URL, this build's mirror
    of it), by default ``<out_dir>/.work/<key>``; a lease for a URL, else an ``fcntl`` lock, each waited
    for with a warning. The build's mirrors of a URL are forgotten when the block ends."""
    build = workstore.new_build()
    work_dir = storage.work_folder(work, build) if work else default_work_folder(out_dir, out_dir / ".work" / key)
    work_dir.mkdir(parents=True, exist_ok=True)
    lock = (lease_lock(work.rstrip("/"), "build work folder", build=build, on_wait=tell)
            if work and workstore.is_mirrored(work_dir)
            else exclusive_lock(work_dir / ".lock", "build work folder", on_wait=tell))
    with lock as held:
        try:
            yield WorkSession(work_dir, held.check if isinstance(held, Lease) else always_held)
        finally:
            forget_mirrors(work_dir)


def forget_mirrors(work_dir: Path) -> None:
    """Remove the build's mirror of a work folder URL in this process and on the Dask workers, so no
    later build trusts what this one fetched (a no-op for a local work folder)."""
    if not workstore.is_mirrored(work_dir):
        return
    workstore.forget(work_dir)
    context = FlowRunContext.get()
    client = getattr(context.task_runner, "_client", None) if context is not None else None  # prefect-dask's
    if client is not None:
        try:
            client.run(workstore.forget, work_dir)
        except Exception as error:  # the workers' copies then go when they exit; the build itself is done
            get_run_logger().warning("could not remove the build's mirrors on the Dask workers: %s", error)


def tell(message: str) -> None:
    """A warning for the Prefect run's log (or Prefect's own outside a run) and the terminal (the CLI hides
    Prefect's log unless --debug)."""
    try:
        logger = get_run_logger()
    except MissingContextError:
        logger = get_logger("reasonvqa")
    logger.warning(message)
    print(f"warning: {message}", file=sys.stderr)
