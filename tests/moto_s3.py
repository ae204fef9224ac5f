"""A real S3 API on 127.0.0.1: moto's server as a subprocess, with the environment s3fs reads in every process."""

from __future__ import annotations

import atexit
import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from reasonvqa.children import popen_bound


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


_server: tuple[subprocess.Popen, str] | None = None  # this process's moto server and its endpoint


def _moto_endpoint(executable: Path) -> str:
    """The endpoint of this process's moto server: started on first use (~1 CPU s and seconds of wall each time on
    a loaded machine, 12 uses in the suite), emptied after each use (``s3_server``), stopped when the process exits."""
    global _server
    if _server is None or _server[0].poll() is not None:
        port = _free_port()
        process = popen_bound([str(executable), "-H", "127.0.0.1", "-p", str(port)],  # dies with this process
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        atexit.register(_stop, process)
        _server = (process, f"http://127.0.0.1:{port}")
    return _server[1]


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=10)


@contextlib.contextmanager
def s3_server(bucket: str) -> Iterator[str]:
    """Moto's S3 server on 127.0.0.1 with ``bucket`` created and nothing else; yield its endpoint URL.
    AWS_ENDPOINT_URL and dummy credentials are set in ``os.environ`` meanwhile, so Dask worker processes started
    meanwhile inherit them. The server is this process's (one per xdist worker), reset to empty afterwards."""
    pytest.importorskip("s3fs")
    executable = Path(sys.executable).with_name("moto_server")
    if not executable.exists():
        pytest.skip("moto[server] is not installed")
    endpoint = _moto_endpoint(executable)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (("AWS_ENDPOINT_URL", endpoint), ("AWS_ACCESS_KEY_ID", "test"),
                            ("AWS_SECRET_ACCESS_KEY", "test"), ("AWS_DEFAULT_REGION", "us-east-1")):
            patch.setenv(name, value)
        try:
            fs = s3_filesystem()
            deadline = time.monotonic() + 30
            while True:
                try:
                    fs.mkdir(bucket)
                    break
                except FileExistsError:
                    raise
                except Exception:  # not listening yet
                    if time.monotonic() > deadline or _server is None or _server[0].poll() is not None:
                        raise
                    time.sleep(0.2)
            yield endpoint
        finally:
            _forget_instances()
            # every bucket and object gone, as on a new server (moto's reset API)
            urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=30)


def _forget_instances() -> None:
    """Drop fsspec's cached s3fs instances: they keep the endpoint they were made with."""
    from s3fs import S3FileSystem

    S3FileSystem.clear_instance_cache()


def s3_filesystem():
    """An s3fs instance for the current environment."""
    import fsspec

    _forget_instances()
    return fsspec.filesystem("s3")


def forget_mirror(monkeypatch) -> None:
    """This process starts over with an empty work store mirror (reasonvqa.workstore), as a new process would."""
    import shutil

    from reasonvqa import workstore

    shutil.rmtree(workstore.mirror_base())
    monkeypatch.setattr(workstore, "_base", None)
