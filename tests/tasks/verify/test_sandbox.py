"""The hostile corpus: each program is contained with the allow-list on, and again with it off
(so the OS layers alone are tested); the parent and the workers survive all of them."""

import json
import socket
import time
from pathlib import Path

import psutil
import pytest

from reasonvqa.tasks.verify.program_check import ProgramRejected, check_program
from reasonvqa.tasks.verify.sandbox import WORKER_MODULE, Job, Sandbox, SandboxConfig
from reasonvqa.tasks.verify.scene_graph import SceneGraph

HOSTILE = Path(__file__).parent / "hostile"
GRAPH = SceneGraph("A brown dog on green grass.", {
    "dog": {"attributes": ["brown"], "relations_to": {"grass": ["on"]}},
    "grass": {"attributes": ["green"], "relations_to": {}},
}).to_json()
GOOD = '''
def execute_command(scene_graph):
    """What is the dog on?"""
    for target, rels in scene_graph.get_outgoing_relations("dog").items():
        if "on" in rels.get("relations", []):
            return f"The dog is on the {target}."
    return None
'''
CHECKED_REASON = {
    "infinite_loop": ("timeout", "cpu_limit"), "memory_bomb": ("error", "memory_limit"),
    "import_os": ("rejected", "top_level_statement"), "open_for_write": ("rejected", "forbidden_syntax"),
    "socket_connect": ("rejected", "top_level_statement"), "fork": ("rejected", "top_level_statement"),
    "mro_escape": ("rejected", "dunder_attribute"), "getattr_escape": ("rejected", "forbidden_name"),
    "format_escape": ("rejected", "forbidden_attribute"), "huge_output": ("error", "output_too_large"),
    "kill_parent": ("rejected", "top_level_statement"), "raise_limits": ("rejected", "top_level_statement"),
}


@pytest.fixture(scope="module", params=[1, 8], ids=["child_per_program", "shared_children"])
def sandbox(request):
    with Sandbox(SandboxConfig(workers=2, wall_seconds=3.0, programs_per_child=request.param)) as box:
        yield box


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.setblocking(False)
    yield server
    server.close()


def _corpus(marker: Path, port: int) -> dict[str, str]:
    return {p.stem: p.read_text().replace("MARKER", str(marker)).replace("PORT", str(port))
            for p in sorted(HOSTILE.glob("*.py"))}


def _assert_contained(sandbox, marker, listener):
    assert not marker.exists(), "a hostile program wrote a file"
    with pytest.raises(BlockingIOError):
        listener.accept()  # nobody connected
    for worker in sandbox._workers:
        assert worker is not None and worker.proc.poll() is None
        top = psutil.Process(worker.proc.pid)  # the worker, or the bwrap process that runs it
        workers = [p for p in [top, *top.children(recursive=True)]
                   if p.name() != "bwrap" and WORKER_MODULE in " ".join(p.cmdline())]
        assert len(workers) == 1  # a forked child has the worker's command line: none outlived its limit
    good = sandbox.run([Job("good", GOOD, "g")], {"g": GRAPH})["good"]
    assert good == {"status": "ok", "output": "The dog is on the grass.", "reason": None}


def test_hostile_corpus_with_the_allow_list(sandbox, tmp_path, listener):
    marker = tmp_path / "pwned"
    programs = _corpus(marker, listener.getsockname()[1])
    assert set(programs) == set(CHECKED_REASON)
    results = sandbox.run([Job(name, src, "g") for name, src in programs.items()], {"g": GRAPH})
    got = {name: (r["status"], r["reason"].split(":")[0]) for name, r in results.items()}
    if got["infinite_loop"] == ("timeout", "wall_clock_limit"):  # a loaded machine gives less than 1 CPU second in 3 s
        got["infinite_loop"] = ("timeout", "cpu_limit")
    assert got == CHECKED_REASON
    _assert_contained(sandbox, marker, listener)


@pytest.mark.parametrize("bwrap, per_child", [("off", 1), ("auto", 1), ("off", 8)])
def test_hostile_corpus_without_the_allow_list_is_held_by_the_os_layers(bwrap, per_child, tmp_path, listener):
    with Sandbox(SandboxConfig(workers=2, wall_seconds=3.0, bwrap=bwrap, programs_per_child=per_child)) as sandbox:
        if sandbox.seccomp_status != "on":
            pytest.skip(f"seccomp {sandbox.seccomp_status}")
        if bwrap == "auto" and sandbox.bwrap_status != "on":
            pytest.skip(f"bwrap {sandbox.bwrap_status}")
        _run_unchecked(sandbox, tmp_path, listener)


def _run_unchecked(sandbox, tmp_path, listener):
    marker = tmp_path / "pwned"
    programs = _corpus(marker, listener.getsockname()[1])
    start = time.monotonic()
    results = sandbox.run([Job(name, src, "g", check=False) for name, src in programs.items()], {"g": GRAPH})
    assert time.monotonic() - start < 30
    status = {name: r["status"] for name, r in results.items()}
    assert status["infinite_loop"] == "timeout"
    assert results["memory_bomb"]["reason"] == "memory_limit"
    assert results["huge_output"]["reason"].startswith("output_too_large")
    # seccomp denies clone: glibc's system() cannot spawn the shell and returns the status of an exit
    # code 127 (127 << 8 = 32512); the program itself ends normally with that number
    assert results["import_os"] == {"status": "ok", "output": 127 << 8, "reason": None}
    for name in ("open_for_write", "socket_connect", "fork", "kill_parent", "raise_limits"):
        reason = results[name]["reason"] or ""
        assert status[name] == "error" and ("not permitted" in reason or "not allowed" in reason), (name, results[name])
    assert results["mro_escape"] == {"status": "ok", "output": "escaped", "reason": None}  # system() ran nothing
    _assert_contained(sandbox, marker, listener)


def test_wall_clock_deadline_kills_a_sleeping_program(tmp_path):
    sleeper = "import time\ndef verify(sg):\n    time.sleep(60)\n"
    with Sandbox(SandboxConfig(workers=1, wall_seconds=0.5)) as box:
        start = time.monotonic()
        result = box.run([Job("s", sleeper, "g", check=False)], {"g": GRAPH})["s"]
        assert time.monotonic() - start < 5
    assert result == {"status": "timeout", "output": None, "reason": "wall_clock_limit"}


def test_outputs_are_json_and_deterministic(sandbox):
    program = "def verify(sg):\n    return {'entities': set(sg.get_entities()), 'n': len(sg.get_entities()), 'sub': sg.generate_subgraph(['dog'])}\n"
    first = sandbox.run([Job("a", program, "g")], {"g": GRAPH})["a"]
    assert first == {"status": "ok", "reason": None,
                     "output": {"entities": ["dog", "grass"], "n": 2, "sub": "There is a dog (with brown)."}}
    assert sandbox.run([Job("a", program, "g")], {"g": GRAPH})["a"] == first


def test_program_errors_and_unknown_graphs_are_reported(sandbox):
    results = sandbox.run([Job("key", "def verify(sg):\n    return sg.get_attributes('cat')['color']\n", "g"),
                           Job("nograph", GOOD, "missing")], {"g": GRAPH})
    assert results["key"] == {"status": "error", "output": None, "reason": "KeyError: 'color'"}
    assert results["nograph"]["reason"] == "unknown_graph"


@pytest.mark.parametrize("source, reason", [
    ("", "empty_program"), ("def verify(sg)\n  return 1", "syntax_error"),
    ("def helper(x):\n    return x\n", "no_entry_point"), ("def verify(a, b):\n    return 1\n", "bad_signature"),
    ("class A:\n    pass\ndef verify(sg):\n    return 1\n", "top_level_statement"),
    ("def verify(sg):\n    return eval('1')\n", "forbidden_name"),
    ("def verify(sg):\n    return sg._adj\n", "dunder_attribute"),
    ("def verify(sg):\n    x = '__class__'\n    return x\n", "dunder_string"),
    ("def verify(sg):\n    yield 1\n", "forbidden_syntax"),
])
def test_allow_list_reasons(source, reason):
    with pytest.raises(ProgramRejected) as info:
        check_program(source)
    assert info.value.reason == reason


def test_allow_list_accepts_prove_style_programs():
    assert check_program(GOOD) == "execute_command"


def test_cli_sandbox_run_prints_one_json_object_and_exits_0(tmp_path):
    from typer.testing import CliRunner

    from reasonvqa.flows.cli import app

    graph = tmp_path / "graph.json"
    graph.write_text('{"dog": {"attributes": ["brown"], "relations_to": {"grass": ["on"]}}}')
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text(GOOD)
    bad.write_text((HOSTILE / "mro_escape.py").read_text())
    runner = CliRunner()
    ok = runner.invoke(app, ["sandbox", "run", str(good), "--graph", str(graph)])
    assert ok.exit_code == 0 and json.loads(ok.stdout) == {"status": "ok", "output": "The dog is on the grass.", "reason": None}
    rejected = runner.invoke(app, ["sandbox", "run", str(bad), "--graph", str(graph)])
    assert rejected.exit_code == 0
    assert json.loads(rejected.stdout) == {"status": "rejected", "output": None, "reason": "dunder_attribute: line 2: .__subclasses__"}
    graph.write_text("[1, 2]")
    broken = runner.invoke(app, ["sandbox", "run", str(good), "--graph", str(graph)])
    assert broken.exit_code == 2 and "graph.json" in broken.stderr


def test_programs_are_parsed_once_and_compile_time_errors_are_rejections():
    from reasonvqa.tasks.verify.program_check import parse_program
    from reasonvqa.tasks.verify.sandbox_worker import prepare

    entry, tree = parse_program(GOOD)
    assert entry == "execute_command" and tree.body[0].name == "execute_command"
    assert prepare(GOOD, True)[0] == "execute_command"
    assert prepare("def verify(sg):\n    break\n", True) == {
        "status": "rejected", "output": None, "reason": "syntax_error: 'break' outside loop (<program>, line 2)"}
    assert prepare("import os\n", True)["reason"].startswith("top_level_statement")


def test_rejected_programs_come_back_with_their_reason(sandbox):
    result = sandbox.run([Job("r", "def verify(sg):\n    return sg.__class__\n", "g")], {"g": GRAPH})["r"]
    assert result == {"status": "rejected", "output": None, "reason": "dunder_attribute: line 2: .__class__"}


SHARED_CHILD_PROGRAMS = {
    "good": GOOD,
    "grows_a_list": "def verify(sg):\n    sg.get_attributes('dog')['attributes'].append('wet')\n    return sg.get_attributes('dog')\n",
    "reads_after": "def verify(sg):\n    return [sg.get_attributes('dog'), sg.get_entities(), sg.caption]\n",
    "shadows": "def verify(sg):\n    sg.get_entities = lambda: ['cat']\n    return sg.get_entities()\n",
    "reads_once_more": "def verify(sg):\n    return [sg.get_entities(), sg.caption]\n",
    "clears": "def verify(sg):\n    sg.clear()\n    return sg.get_entities()\n",
    "loops": (HOSTILE / "infinite_loop.py").read_text(),
    "reads_again": "def verify(sg):\n    return sg.describe()\n",
    "catches_the_timer": "def verify(sg):\n    while True:\n        try:\n            while True:\n                pass\n"
                         "        except:\n            pass\n",
    "set_order": "def verify(sg):\n    return list(set(sg.get_entities()) | {'a', 'b', 'c', 'd'})\n",
    "rejected": "import os\n",
    "catches_memory": "def verify(sg):\n    try:\n        x = [0] * 10**9\n    except:\n        return 'caught'\n",
    "last": "def verify(sg):\n    return sorted(sg.get_outgoing_relations('dog'))\n",
}


def test_shared_children_give_the_results_of_a_child_per_program():
    """Every program sees a pristine graph and gets the result it gets alone: after a program that
    changed the graph or did not end plainly (CPU timer caught or not, memory) the child is replaced."""
    jobs = [Job(name, src, "g") for name, src in SHARED_CHILD_PROGRAMS.items()]
    results = {}
    for per_child in (1, 8, 64):
        with Sandbox(SandboxConfig(workers=1, wall_seconds=3.0, programs_per_child=per_child)) as box:
            got = box.run(jobs, {"g": GRAPH})
        for result in got.values():  # on a loaded machine a CPU-bound program may meet the wall clock first
            if result["reason"] == "wall_clock_limit":
                result["reason"] = "cpu_limit"
        results[per_child] = got
    assert results[8] == results[1] and results[64] == results[1]
    assert box.protections()["child_per_program"] == "off (up to 64 programs on one graph share a child)"
    got = results[1]
    assert got["grows_a_list"]["output"] == {"attributes": ["brown", "wet"]}
    assert got["reads_after"]["output"] == [{"attributes": ["brown"]}, ["dog", "grass"], "A brown dog on green grass."]
    assert got["shadows"]["output"] == ["cat"]
    assert got["reads_once_more"]["output"] == [["dog", "grass"], "A brown dog on green grass."]
    assert got["clears"]["output"] == [] and got["reads_again"]["output"].startswith("There is a dog (with brown).")
    assert got["loops"]["status"] == got["catches_the_timer"]["status"] == "timeout"
    assert got["catches_memory"] == {"status": "ok", "output": "caught", "reason": None}
    assert got["last"]["output"] == ["grass"]


def test_set_order_is_the_same_in_every_worker():
    """Workers run with PYTHONHASHSEED=0 (``python -I`` would ignore it): set order does not vary by run."""
    program = SHARED_CHILD_PROGRAMS["set_order"]
    outputs = set()
    for _ in range(3):
        with Sandbox(SandboxConfig(workers=1)) as box:
            outputs.add(json.dumps(box.run([Job("s", program, "g")], {"g": GRAPH})["s"]["output"]))
    assert len(outputs) == 1
