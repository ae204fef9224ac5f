"""A real S3 API on 127.0.0.1: moto's server as a subprocess, with the environment s3fs reads in every process."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def s3_server(bucket: str) -> Iterator[str]:
    """Start ``moto_server`` with ``bucket`` created; yield its endpoint URL. AWS_ENDPOINT_URL and dummy
    credentials are set in ``os.environ`` while it runs, so Dask worker processes started meanwhile inherit them."""
    pytest.importorskip("s3fs")
    server = Path(sys.executable).with_name("moto_server")
    if not server.exists():
        pytest.skip("moto[server] is not installed")
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    process = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
                except Exception:  # not listening yet
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise
                    time.sleep(0.2)
            yield endpoint
        finally:
            process.terminate()
            process.wait(timeout=10)
            _forget_instances()


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
