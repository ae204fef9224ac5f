"""Run LLM-written verification programs as hostile input: a pool of pre-warmed forking workers.

Layers (each holds on its own; see ``program_check``, ``sandbox_worker``, ``seccomp_filter``):

1. AST allow-list (in the worker, before anything runs; a rejected program never runs);
2. one forked child per program with resource limits, an empty environment, an empty temporary
   working folder and no descriptors but its result pipe (``programs_per_child`` > 1: consecutive
   programs on one graph share a child, each with its own CPU timer, deadline and pristine graph;
   see ``sandbox_worker.run_shared``);
3. seccomp: no sockets, exec, fork/clone, or opening files for writing (the worker loads all but
   the process rules for itself, each child adds those);
4. bubblewrap namespaces around each worker when ``bwrap`` exists and works here;
5. deadlines: the worker kills a child at ``wall_seconds``; this parent kills a worker that
   does not answer in ``wall_seconds + worker_grace_seconds`` and starts a new one.

Results are ``{"status": "ok" | "rejected" | "error" | "timeout", "output", "reason"}``.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reasonvqa.tasks.verify.sandbox_worker import HEADER

WORKER_MODULE = "reasonvqa.tasks.verify.sandbox_worker"
STATUSES = ("ok", "rejected", "error", "timeout")


class SandboxConfig(BaseModel):
    """Limits and layers of the program sandbox."""

    model_config = ConfigDict(extra="forbid")

    workers: int = Field(default=2, ge=1, description="Forking worker processes (one per core).")
    cpu_seconds: int = Field(default=1, ge=1)
    wall_seconds: float = Field(default=2.0, gt=0)
    memory_mb: int = Field(default=256, ge=16, description="Address space a program may add to the worker's.")
    output_bytes: int = Field(default=65536, ge=256, description="Largest JSON result accepted.")
    open_files: int = Field(default=16, ge=4)
    worker_grace_seconds: float = Field(default=5.0, gt=0)
    seccomp: Literal["auto", "required", "off"] = Field(
        default="auto", description="auto: use seccomp where pyseccomp and libseccomp load; required: refuse to run without.")
    bwrap: Literal["auto", "off"] = "auto"
    programs_per_child: int = Field(
        default=16, ge=1, le=64,
        description="Consecutive programs on one graph that share a forked child (same limits and layers per "
                    "program, a program that does not end plainly reruns alone; they are isolated from each "
                    "other by the interpreter and the allow-list, not the OS). 1: a child per program, the OS "
                    "boundary between every two programs, about 4x the CPU per program (BENCHMARKS.md).")

    def limits(self) -> dict:
        return {k: getattr(self, k) for k in ("cpu_seconds", "wall_seconds", "memory_mb", "output_bytes", "open_files",
                                              "programs_per_child")}


class SandboxUnavailable(RuntimeError):
    """A layer the configuration requires is not available on this machine."""


@dataclass
class Job:
    """One program to run on one graph (``graph`` is a key of the graphs given to ``run``)."""

    id: str
    program: str
    graph: str
    check: bool = True  # False only in tests of the OS layers


BWRAP_ARGS = ["--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/", "--dev", "/dev",
              "--proc", "/proc", "--tmpfs", "/tmp", "--chdir", "/tmp", "--clearenv"]


def code_binds() -> list[str]:
    """Read-only binds that bring back, over the empty /tmp, the interpreter, its environment and
    the pipeline's code when they live under /tmp (a checkout or virtual environment there)."""
    from reasonvqa.snapshot import code_packages

    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable),
                  *(p for p in sys.path if p), *(str(p) for p in code_packages().values())}
    under_tmp = sorted({os.path.realpath(p) for p in candidates if os.path.realpath(p).startswith("/tmp/")})
    kept = [p for p in under_tmp if os.path.exists(p) and not any(p.startswith(q + "/") for q in under_tmp)]
    return [arg for path in kept for arg in ("--ro-bind", path, path)]


@lru_cache(maxsize=1)
def bwrap_prefix() -> tuple[tuple[str, ...], str]:
    """The bubblewrap command prefix and its status; empty when bwrap is missing or fails here."""
    binary = shutil.which("bwrap")
    if binary is None:
        return (), "off (no bwrap binary)"
    args = [*BWRAP_ARGS, *code_binds()]
    probe = subprocess.run([binary, *args, "--", sys.executable, "-I", "-c", "import " + WORKER_MODULE],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return (), f"off (bwrap fails here: {probe.stderr.strip()[-200:]})"
    return (binary, *args, "--"), "on"


class _Worker:
    """One worker process and its protocol pipes."""

    def __init__(self, config: SandboxConfig, prefix: tuple[str, ...]) -> None:
        self.tmp = tempfile.mkdtemp(prefix="reasonvqa-sandbox-")
        env = {"PYTHONHASHSEED": "0", "PYTHONUTF8": "1"}  # set order, hence outputs, must not vary by run
        setenv = [arg for k, v in env.items() for arg in ("--setenv", k, v)] if prefix else []
        flags = ["--no-seccomp"] if config.seccomp == "off" else []
        # -s -P and an environment of only ``env`` isolate as -I does; -I (-E) would ignore PYTHONHASHSEED.
        cmd = [*prefix[:-1], *setenv, *prefix[-1:], sys.executable, "-s", "-P", "-m", WORKER_MODULE, *flags]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env, cwd=self.tmp, bufsize=0, start_new_session=True)
        self.hello = self.receive(60.0)

    def send(self, message: dict) -> None:
        data = json.dumps(message, sort_keys=True).encode()
        assert self.proc.stdin is not None  # opened with PIPE
        self.proc.stdin.write(HEADER.pack(len(data)) + data)

    def receive(self, timeout: float) -> dict:
        (length,) = HEADER.unpack(self._read(HEADER.size, timeout))
        return json.loads(self._read(length, timeout))

    def _read(self, n: int, timeout: float) -> bytes:
        assert self.proc.stdout is not None  # opened with PIPE
        fd = self.proc.stdout.fileno()
        data = b""
        while len(data) < n:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                raise TimeoutError("worker did not answer in time")
            chunk = os.read(fd, n - len(data))
            if not chunk:
                raise EOFError("worker exited")
            data += chunk
        return data

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except ProcessLookupError:
            pass
        self.proc.wait()


class Sandbox:
    """A pool of sandbox workers; ``run`` spreads jobs over them (grouped by graph)."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        prefix, self.bwrap_status = bwrap_prefix() if self.config.bwrap == "auto" else ((), "off (configured)")
        self._prefix = prefix
        self._workers: list[_Worker | None] = [None] * self.config.workers
        self._locks = [threading.Lock() for _ in range(self.config.workers)]
        self.seccomp_status = "not started"
        self.workers_restarted = 0

    def __enter__(self) -> "Sandbox":
        for i in range(self.config.workers):
            self._worker(i)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def protections(self) -> dict[str, str]:
        """Which layers are on (recorded in run stats)."""
        per_child = self.config.programs_per_child
        return {"ast_allow_list": "on", "rlimits": "on", "seccomp": self.seccomp_status, "bwrap": self.bwrap_status,
                "child_per_program": "on" if per_child == 1 else f"off (up to {per_child} programs on one graph share a child)"}

    def _worker(self, i: int) -> _Worker:
        worker = self._workers[i]
        if worker is None or worker.proc.poll() is not None:
            worker = _Worker(self.config, self._prefix)
            status = worker.hello.get("seccomp", "off (unknown)")
            if self.config.seccomp == "required" and status != "on":
                worker.close()
                raise SandboxUnavailable(f"seccomp is required but {status}")
            if self.config.seccomp == "off":
                status = "off (configured)"
            self.seccomp_status = status
            self._workers[i] = worker
        return worker

    def run(self, jobs: list[Job], graphs: dict[str, dict]) -> dict[str, dict]:
        """Results of ``jobs`` keyed by job id; ``graphs`` in ``SceneGraph.to_json`` or tuple form."""
        groups: dict[str, list[Job]] = {}
        for job in jobs:
            groups.setdefault(job.graph, []).append(job)
        batches = [[]]  # type: list[list[Job]]
        for group in groups.values():  # batches of about 64 jobs, never splitting a graph's jobs needlessly
            if len(batches[-1]) >= 64:
                batches.append([])
            batches[-1].extend(group)
        n = self.config.workers
        results: dict[str, dict] = {}

        def work(i: int) -> None:
            for batch in batches[i::n]:
                results.update(self._run_batch(i, batch, graphs))

        with ThreadPoolExecutor(max_workers=n) as pool:
            for future in [pool.submit(work, i) for i in range(n)]:
                future.result()
        return results

    def _run_batch(self, i: int, batch: list[Job], graphs: dict[str, dict]) -> dict[str, dict]:
        if not batch:
            return {}
        limits = self.config.limits()
        needed = {job.graph: graphs.get(job.graph) for job in batch}
        request = {"limits": limits, "graphs": {k: v for k, v in needed.items() if v is not None},
                   "jobs": [{"id": j.id, "program": j.program, "graph": j.graph, "check": j.check} for j in batch]}
        out: dict[str, dict] = {}
        timeout = self.config.wall_seconds + self.config.worker_grace_seconds
        with self._locks[i]:
            worker = self._worker(i)
            try:
                worker.send(request)
                for job in batch:
                    reply = worker.receive(timeout)
                    out[job.id] = {k: reply.get(k) for k in ("status", "output", "reason")}
            except (TimeoutError, EOFError, OSError, ValueError) as exc:
                worker.kill()
                worker.close()
                self._workers[i] = None
                self.workers_restarted += 1
                for job in batch:
                    out.setdefault(job.id, {"status": "error", "output": None, "reason": f"worker_lost: {exc}"})
        return out

    def close(self) -> None:
        for i, worker in enumerate(self._workers):
            if worker is not None:
                worker.close()
                self._workers[i] = None


def run_one(program: str, graph: dict, config: SandboxConfig | None = None) -> dict:
    """Run a single program on a single graph (the CLI's ``sandbox run``)."""
    with Sandbox((config or SandboxConfig()).model_copy(update={"workers": 1})) as sandbox:
        return sandbox.run([Job("program", program, "graph")], {"graph": graph})["program"]
