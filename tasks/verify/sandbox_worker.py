"""The pre-warmed sandbox worker: one long-lived process that forks one child per program.

Started by ``sandbox.Sandbox`` as ``python -I -m reasonvqa.tasks.verify.sandbox_worker`` with an
empty environment in an empty temporary folder (inside bubblewrap namespaces when available).
It talks length-prefixed JSON over stdin/stdout:

- it first writes ``{"seccomp": "<status>", "pid": N}``;
- each request ``{"limits": {...}, "graphs": {key: graph_json}, "jobs": [{"id", "program", "graph"}]}``
  gets one reply per job, in order: ``{"id", "status", "output", "reason"}``.

Once started, the worker loads its own seccomp filter (no network, exec or file writes; see
``seccomp_filter``), clears its environment and freezes its heap for the garbage collector. It
builds each request's scene graphs once, for all the jobs on them. Per job the worker parses and
checks the program (AST allow-list) and compiles the checked tree: a rejected program never
runs. Otherwise it forks; the child closes every descriptor but its result pipe, sets resource
limits (CPU seconds, address space, file size 0, open files, processes, core), loads the child
seccomp filter (no fork, kill or raising limits), and only then runs the program. The worker
enforces the wall-clock deadline (SIGKILL) and caps the result's size. Each program thus runs in
a process of its own that never held another program's state.

Parsing in the worker, not the child, is bounded work on bounded input (``MAX_SOURCE_CHARS``;
CPython's parser and compiler stop deep nesting with errors, reported as ``syntax_error``), and
it spares each child the copy-on-write faults of allocating a syntax tree in forked memory.
"""

from __future__ import annotations

import builtins
import ctypes
import gc
import json
import math
import os
import resource
import select
import signal
import struct
import sys
import time
from types import CodeType
from typing import Any

from reasonvqa.tasks.verify.program_check import SAFE_BUILTINS, ProgramRejected, parse_program
from reasonvqa.tasks.verify.scene_graph import SceneGraph, describe_graph
from reasonvqa.tasks.verify.seccomp_filter import build_filters

HEADER = struct.Struct(">I")
_LIBC = ctypes.PyDLL(None, use_errno=True)  # PyDLL: the interpreter lock stays held across fork()
DEFAULT_LIMITS = {"cpu_seconds": 1, "wall_seconds": 2.0, "memory_mb": 256, "output_bytes": 65536, "open_files": 16}


def to_jsonable(value: Any, depth: int = 0) -> Any:
    """A program's return value as JSON data; sets sorted, graphs described, anything else as text."""
    if depth > 20:
        return "..."
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((to_jsonable(v, depth + 1) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, dict):
        return {str(k): to_jsonable(v, depth + 1) for k, v in value.items()}
    if hasattr(value, "nodes") and hasattr(value, "edges"):  # a subgraph view
        return describe_graph(value)
    return str(value)


def prepare(program: str, check: bool) -> tuple[str, CodeType] | dict:
    """The entry point and code of a program, or its result when it cannot run (rejected, or no code)."""
    try:
        if check:
            entry, tree = parse_program(program)
            return entry, compile(tree, "<program>", "exec", dont_inherit=True, optimize=0)
        return _entry_unchecked(program), compile(program, "<program>", "exec", dont_inherit=True, optimize=0)
    except ProgramRejected as exc:
        return {"status": "rejected", "output": None, "reason": str(exc)[:300]}
    except Exception as exc:  # compile-time errors of a checked tree ('break' outside a loop), or of unchecked text
        detail = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        return {"status": "rejected" if check else "error", "output": None, "reason": f"syntax_error: {detail}"}


def run_code(entry: str, code: CodeType, graph: SceneGraph, check: bool) -> dict:
    """Run a prepared program on ``graph`` (in the limited child)."""
    try:
        namespace: dict[str, Any] = {"__builtins__": SAFE_BUILTINS if check else builtins.__dict__}
        exec(code, namespace)
        output = to_jsonable(namespace[entry](graph))
    except MemoryError:
        return {"status": "error", "output": None, "reason": "memory_limit"}
    except RecursionError:
        return {"status": "error", "output": None, "reason": "recursion_limit"}
    except BaseException as exc:  # the program's own failure: SystemExit included
        return {"status": "error", "output": None, "reason": f"{type(exc).__name__}: {exc}"[:300]}
    return {"status": "ok", "output": output, "reason": None}


def execute(program: str, graph: SceneGraph, check: bool) -> dict:
    """Check, compile and run one program on ``graph`` in this process (no OS layers: tests, baselines)."""
    prepared = prepare(program, check)
    return prepared if isinstance(prepared, dict) else run_code(*prepared, graph, check)


def _entry_unchecked(program: str) -> str:
    """Entry point without the allow-list (tests of the OS layers only)."""
    return "execute_command" if "def execute_command" in program else "verify"


def _limit_child(limits: dict, keep_fd: int, devnull: int) -> None:
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(3, keep_fd)
    os.closerange(keep_fd + 1, 65536)
    cpu = int(limits["cpu_seconds"])
    memory = limits["_base_vm"] + int(limits["memory_mb"]) * 2**20
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(limits["open_files"]),) * 2)
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _child(prepared: tuple[str, CodeType], graph: SceneGraph, check: bool, limits: dict, filt: Any,
           write_fd: int, devnull: int) -> None:
    """Runs in the forked child; never returns."""
    try:
        # Cyclic garbage waits for the exit (memory stays under RLIMIT_AS): a collection would walk,
        # and so copy, the worker's pages.
        gc.disable()
        _limit_child(limits, write_fd, devnull)
        if filt is not None:
            filt.load()
        result = run_code(*prepared, graph, check)
        data = json.dumps(result, sort_keys=True).encode()
        if len(data) > limits["output_bytes"]:
            data = json.dumps({"status": "error", "output": None,
                               "reason": f"output_too_large: {len(data)} bytes"}).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view):]
    finally:
        os._exit(0)


def _threads() -> int:
    with open("/proc/self/status") as handle:
        return next((int(line.split()[1]) for line in handle if line.startswith("Threads:")), 0)


def fork(single_threaded: bool) -> int:
    """``fork(2)``; in a single-threaded process without Python's at-fork hooks.

    ``os.fork`` re-initialises the interpreter's thread state and runs the hooks that ``random``,
    ``threading`` and ``logging`` register (reseeding, new locks); that work is needed only when
    other threads could hold those locks, and in a worker with networkx loaded it costs each child
    about 200 copy-on-write page faults (~40 % of a bare fork). The worker never starts a thread.
    """
    if not single_threaded:
        return os.fork()
    pid = _LIBC.fork()
    if pid < 0:
        raise OSError(ctypes.get_errno(), "fork failed")
    return pid


def run_job(job: dict, graph: SceneGraph | None, limits: dict, filt: Any, devnull: int,
            single_threaded: bool = False) -> dict:
    """Check and compile one job here; fork, run it in the child, wait for its result under the deadline."""
    if graph is None:
        return {"status": "error", "output": None, "reason": "unknown_graph"}
    check = bool(job.get("check", True))
    prepared = prepare(job.get("program", ""), check)
    if isinstance(prepared, dict):
        return prepared
    read_fd, write_fd = os.pipe()
    pid = fork(single_threaded)
    if pid == 0:
        os.close(read_fd)
        _child(prepared, graph, check, limits, filt, write_fd, devnull)
    os.close(write_fd)
    cap = int(limits["output_bytes"])
    deadline = time.monotonic() + float(limits["wall_seconds"])
    chunks: list[bytes] = []
    size = 0
    verdict = None
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                verdict = {"status": "timeout", "output": None, "reason": "wall_clock_limit"}
                break
            ready, _, _ = select.select([read_fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > cap + 4096:
                verdict = {"status": "error", "output": None, "reason": f"output_too_large: over {cap} bytes"}
                break
    finally:
        os.close(read_fd)
    if verdict is not None:
        _kill(pid)
    _, status = os.waitpid(pid, 0)
    if verdict is not None:
        return verdict
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig in (signal.SIGXCPU, signal.SIGKILL) and not chunks:
            return {"status": "timeout", "output": None, "reason": "cpu_limit"}
        return {"status": "error", "output": None, "reason": f"killed_by_signal: {signal.Signals(sig).name}"}
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        return {"status": "error", "output": None, "reason": "no_result"}


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _vm_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _read_exact(fd: int, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def send(fd: int, message: dict) -> None:
    data = json.dumps(message, sort_keys=True).encode()
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def serve(in_fd: int, out_fd: int, seccomp: bool = True) -> None:
    """Answer requests until stdin closes."""
    worker_filter, child_filter, seccomp_status = build_filters() if seccomp else (None, None, "off (configured)")
    devnull = os.open(os.devnull, os.O_RDWR)
    if worker_filter is not None:
        worker_filter.load()
    os.environ.clear()  # the children inherit an empty environment
    gc.collect()
    gc.freeze()  # the collector leaves the start-up heap alone: fewer copy-on-write faults in the children
    single_threaded = _threads() == 1
    send(out_fd, {"seccomp": seccomp_status, "pid": os.getpid()})
    while True:
        try:
            (length,) = HEADER.unpack(_read_exact(in_fd, HEADER.size))
            request = json.loads(_read_exact(in_fd, length))
        except EOFError:
            return
        limits = {**DEFAULT_LIMITS, **request.get("limits", {})}
        graphs = {}
        for key, value in request.get("graphs", {}).items():
            try:
                graphs[key] = SceneGraph.from_json(value)
            except ValueError:
                graphs[key] = None
        limits["_base_vm"] = _vm_bytes()
        for job in request.get("jobs", []):
            result = run_job(job, graphs.get(job.get("graph")), limits, child_filter, devnull, single_threaded)
            send(out_fd, {"id": job.get("id"), **result})


def main() -> None:
    out_fd = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # stray prints never corrupt the protocol
    sys.stdout = sys.stderr
    serve(0, out_fd, seccomp="--no-seccomp" not in sys.argv[1:])


if __name__ == "__main__":
    main()
