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

With ``programs_per_child`` > 1 (the config's default is 16; 1 turns it off) a run of consecutive checked
programs on one graph shares one forked child (``run_shared``): the same limits and layers, a CPU
timer and a wall deadline per program, and results that equal the one-child-per-program results
(a program that does not end plainly reruns alone; a program that changed the graph ends the
child). The programs of a run are then isolated from each other by the interpreter and the
allow-list, not by the OS.

Parsing in the worker, not the child, is bounded work on bounded input (``MAX_SOURCE_CHARS``;
CPython's parser and compiler stop deep nesting with errors, reported as ``syntax_error``), and
it spares each child the copy-on-write faults of allocating a syntax tree in forked memory.
"""

from __future__ import annotations

import builtins
import ctypes
import functools
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
from contextlib import closing
from types import CodeType
from typing import Any, Generator, Iterator

from reasonvqa.tasks.verify.program_check import SAFE_BUILTINS, ProgramRejected, parse_program
from reasonvqa.tasks.verify.scene_graph import SceneGraph, describe_graph
from reasonvqa.tasks.verify.seccomp_filter import build_filters

HEADER = struct.Struct(">I")
_LIBC = ctypes.PyDLL(None, use_errno=True)  # PyDLL: the interpreter lock stays held across fork()
DEFAULT_LIMITS = {"cpu_seconds": 1, "wall_seconds": 2.0, "memory_mb": 256, "output_bytes": 65536, "open_files": 16,
                  "programs_per_child": 1}
# A shared child hands these programs back to run alone: their outcome depends on what the process
# already holds (memory headroom, a CPU timer the program may have caught), not only on the program.
RERUN_ALONE_REASONS = ("memory_limit", "recursion_limit")
SHARED_VM_SLACK = 16 * 2**20  # a shared child that grew more than this since its fork starts no more programs


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


def _limit_child(limits: dict, keep_fd: int, devnull: int, programs: int = 1) -> None:
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(3, keep_fd)
    os.closerange(keep_fd + 1, 65536)
    cpu = int(limits["cpu_seconds"]) * programs + (programs > 1)
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
        _write_all(write_fd, _result_bytes(run_code(*prepared, graph, check), limits))
    finally:
        os._exit(0)


def _result_bytes(result: dict, limits: dict) -> bytes:
    data = json.dumps(result, sort_keys=True).encode()
    if len(data) > limits["output_bytes"]:
        data = json.dumps({"status": "error", "output": None, "reason": f"output_too_large: {len(data)} bytes"}).encode()
    return data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


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
    return run_alone((*prepared, check), graph, limits, filt, devnull, single_threaded)


def run_alone(item: tuple[str, CodeType, bool], graph: SceneGraph, limits: dict, filt: Any, devnull: int,
              single_threaded: bool) -> dict:
    """Run one prepared program ``(entry, code, check)`` in a child of its own."""
    entry, code, check = item
    read_fd, write_fd = os.pipe()
    pid = fork(single_threaded)
    if pid == 0:
        os.close(read_fd)
        _child((entry, code), graph, check, limits, filt, write_fd, devnull)
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


def run_shared(items: list[tuple[str, CodeType, bool]], graph: SceneGraph, limits: dict, filt: Any, devnull: int,
               single_threaded: bool) -> Generator[dict, None, None]:
    """Results of prepared programs on one graph, in order, from children that run several each.

    A shared child stops at the first program that does not end plainly (CPU timer, memory or
    recursion limit, no result before the deadline) or that changed the graph; that program then
    runs alone (``run_alone``, so its result is the one-child-per-program result) and the rest go to
    a new shared child. See ``_shared_child`` for what a shared child does and does not isolate.
    """
    pending = list(items)
    while pending:
        if len(pending) == 1:
            yield run_alone(pending[0], graph, limits, filt, devnull, single_threaded)
            return
        done = 0
        with closing(_shared_results(pending, graph, limits, filt, devnull, single_threaded)) as results:
            for result in results:
                done += 1
                yield result
        if done < len(pending):
            yield run_alone(pending[done], graph, limits, filt, devnull, single_threaded)
            done += 1
        pending = pending[done:]


def _shared_results(items: list[tuple[str, CodeType, bool]], graph: SceneGraph, limits: dict, filt: Any,
                    devnull: int, single_threaded: bool) -> Generator[dict, None, None]:
    """Fork one shared child for ``items``; yield the results it sends until it stops."""
    read_fd, write_fd = os.pipe()
    pid = fork(single_threaded)
    if pid == 0:
        os.close(read_fd)
        _shared_child(items, graph, limits, filt, write_fd, devnull)
    os.close(write_fd)
    last = None
    try:
        for _ in items[:-1]:
            result = _next_result(read_fd, limits)
            if result is None:
                return
            yield result
        last = _next_result(read_fd, limits)
    finally:  # the child is reaped before its last result goes out: none outlives the reply
        os.close(read_fd)
        _kill(pid)
        os.waitpid(pid, 0)
    if last is not None:
        yield last


def _next_result(fd: int, limits: dict) -> dict | None:
    """The next result a shared child sends within ``wall_seconds``; None when it stopped or sent no result."""
    frame = _read_frame(fd, time.monotonic() + float(limits["wall_seconds"]), int(limits["output_bytes"]) + 4096)
    try:
        return json.loads(frame) if frame is not None else None
    except ValueError:
        return None


def _read_frame(fd: int, deadline: float, cap: int) -> bytes | None:
    """One length-prefixed frame from a shared child; None at its end, past the deadline or over ``cap``."""
    header = _read_until(fd, HEADER.size, deadline)
    if header is None or not 0 < HEADER.unpack(header)[0] <= cap:
        return None
    return _read_until(fd, HEADER.unpack(header)[0], deadline)


def _read_until(fd: int, n: int, deadline: float) -> bytes | None:
    data = b""
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class _CpuTimer(BaseException):
    """Raised by SIGPROF in a shared child when a program used its CPU seconds."""


def _on_cpu_timer(signum: int, frame: Any) -> None:
    _TIMER_FIRED[0] = True
    raise _CpuTimer("cpu_limit")


_TIMER_FIRED = [False]


def graph_state(graph: SceneGraph) -> str:
    """Everything of a graph that a program can read or change, in order: nodes, both adjacencies and
    their data, graph attributes, and which object each instance attribute holds (a program may
    rebind ``caption`` or shadow a method). Reads the internals only: no program code runs here."""
    attributes = vars(graph)
    return repr((graph._node, graph._succ, graph._pred, graph.graph,  # type: ignore[attr-defined]  # networkx internals, not in its stubs attributes.get("caption"),
                 [(name, id(value)) for name, value in attributes.items()]))


def cache_views(graph: SceneGraph) -> SceneGraph:
    """Create networkx's lazily cached views (``graph.nodes``, ``.pred``, ...) now, so that the first
    program reading one does not count as changing the graph in a shared child."""
    for cls in type(graph).__mro__:
        for name, value in vars(cls).items():
            if isinstance(value, functools.cached_property):
                getattr(graph, name)
    return graph


def _shared_child(items: list[tuple[str, CodeType, bool]], graph: SceneGraph, limits: dict, filt: Any,
                  write_fd: int, devnull: int) -> None:
    """Runs several programs one after the other in one forked child; never returns.

    Each program gets the same limits and layers as in a child of its own (rlimits, seccomp,
    empty environment and folder, no descriptors but the result pipe) and a pristine graph: the
    child stops after a program that changed it. CPU seconds are counted per program by an
    ITIMER_PROF timer; RLIMIT_CPU covers the whole child. What is shared is the process: a
    program that escaped the interpreter's rules could affect the programs after it in the
    same child (not files, sockets or other processes: seccomp holds those for the child).
    """
    try:
        gc.disable()
        _limit_child(limits, write_fd, devnull, programs=len(items))
        if filt is not None:
            filt.load()
        pristine = graph_state(graph)
        grown = _vm_bytes() + SHARED_VM_SLACK
        signal.signal(signal.SIGPROF, _on_cpu_timer)
        for entry, code, check in items:
            if _vm_bytes() > grown:  # what earlier programs left would shrink this one's headroom
                break
            _TIMER_FIRED[0] = False
            signal.setitimer(signal.ITIMER_PROF, float(limits["cpu_seconds"]))
            result = run_code(entry, code, graph, check)
            signal.setitimer(signal.ITIMER_PROF, 0)
            if _TIMER_FIRED[0] or result["reason"] in RERUN_ALONE_REASONS:
                break
            data = _result_bytes(result, limits)
            _write_all(write_fd, HEADER.pack(len(data)) + data)
            if graph_state(graph) != pristine:
                break
    finally:
        os._exit(0)


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
        graphs: dict[str, SceneGraph | None] = {}
        for key, value in request.get("graphs", {}).items():
            try:
                graphs[key] = cache_views(SceneGraph.from_json(value))
            except ValueError:
                graphs[key] = None
        limits["_base_vm"] = _vm_bytes()
        for job, result in answer(request.get("jobs", []), graphs, limits, child_filter, devnull, single_threaded):
            send(out_fd, {"id": job.get("id"), **result})


def answer(jobs: list[dict], graphs: dict[str, SceneGraph | None], limits: dict, filt: Any, devnull: int,
           single_threaded: bool) -> Iterator[tuple[dict, dict]]:
    """(job, result) in job order: one child per program, or with ``programs_per_child`` > 1 one
    shared child per run of consecutive jobs on the same graph."""
    per_child = int(limits.get("programs_per_child", 1))
    start = 0
    while start < len(jobs):
        key = (jobs[start].get("graph"), bool(jobs[start].get("check", True)))
        size = per_child if key[1] else 1  # programs without the allow-list (tests of the OS layers) run alone
        end = start + 1
        while end < len(jobs) and end - start < size and (jobs[end].get("graph"), bool(jobs[end].get("check", True))) == key:
            end += 1
        run, start = jobs[start:end], end
        graph = graphs.get(key[0]) if key[0] is not None else None  # a job may name no graph
        if len(run) == 1 or graph is None:
            for job in run:
                yield job, run_job(job, graph, limits, filt, devnull, single_threaded)
            continue
        prepared = [prepare(job.get("program", ""), key[1]) for job in run]
        shared = run_shared([(*p, key[1]) for p in prepared if not isinstance(p, dict)],
                            graph, limits, filt, devnull, single_threaded)
        with closing(shared):  # the last shared child is reaped before the next run
            for job, p in zip(run, prepared):
                yield job, p if isinstance(p, dict) else next(shared)


def main() -> None:
    out_fd = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # stray prints never corrupt the protocol
    sys.stdout = sys.stderr
    serve(0, out_fd, seccomp="--no-seccomp" not in sys.argv[1:])


if __name__ == "__main__":
    main()
