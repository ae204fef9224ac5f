"""The README's user journeys run as written: every fenced block tagged ```` ```bash journey=<name> ````.

Blocks are looked for in README.md and then docs/*.md (by file name), so a block keeps running when its
section moves to a docs page. The blocks of one journey form one bash script (``set -euo pipefail``),
run in a new empty folder that holds the checkout's ``prefect.yaml`` and ``data/`` (as "from the
checkout" means), with the project's virtual environment first on PATH, a private PREFECT_HOME and
port 4200 replaced by a free one. Between two blocks, the step the README asks a person to do (review
an annotation batch in Label Studio) is done by ``HUMAN_STEPS``. Whatever a journey started in the
background (a Prefect server, a worker) is stopped with it: the script runs in its own process group.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from reasonvqa.children import free_port
from reasonvqa.tasks.release.verify import verify_release

PROJECT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```bash journey=(?P<journey>[a-z0-9-]+)\s*$")
README_PORT = "4200"


@dataclass(frozen=True)
class Block:
    journey: str
    source: str  # file:line of the opening fence
    text: str


def journey_blocks(paths: list[Path]) -> dict[str, list[Block]]:
    """The tagged blocks of ``paths``, by journey, in the order they appear."""
    journeys: dict[str, list[Block]] = {}
    for path in paths:
        lines = path.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            match = FENCE.match(lines[i])
            if match is None:
                i += 1
                continue
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            block = Block(match["journey"], f"{path.relative_to(PROJECT)}:{i + 1}", "\n".join(lines[i + 1:end]))
            journeys.setdefault(block.journey, []).append(block)
            i = end + 1
    return journeys


def documents() -> list[Path]:
    return [PROJECT / "README.md", *sorted((PROJECT / "docs").glob("*.md"))]


def annotate_batch(folder: Path) -> str:
    """A reviewer's Label Studio export of ``batch1``: every question marked correct."""
    from tests.annotation_exports.helpers import annotate, write_json

    tasks = json.loads((folder / "batch1" / "tasks.json").read_text())
    verdict = {"id": "v", "from_name": "question_decision", "to_name": "image", "type": "choices",
               "value": {"choices": ["correct"]}}
    write_json(folder / "label_studio_export.json",
               [annotate(task, [verdict], task_id=i + 1) for i, task in enumerate(tasks)])
    return "label_studio_export.json"


# (journey, index of the block it comes before): what a person does there
HUMAN_STEPS = {("sample", 1): annotate_batch}
# journeys whose commands run their flows on the session's Prefect API (tests/conftest.py's ``prefect_api``), as
# with a configured PREFECT_API_URL, instead of each `reasonvqa build` starting a server of its own: that start is
# checked by tests/reasonvqa/test_processes.py and tests/test_packaging.py (deployments starts its own server)
SESSION_API_JOURNEYS = ("sample",)
# what each journey must have left behind, checked after it ran
EXPECTED_RELEASES = {
    "sample": ["0.1.0", "0.1.0-places", "0.1.0-gld", "0.1.0-reviewed"],
    "deployments": ["0.1.0", "0.1.0-places"],
}
# journeys run by another test file, whose tests use what they leave running: `deployments` is the module fixture
# of tests/test_prefect_yaml.py (its server, work pool, deployments and worker), checked there by
# test_the_deployments_journey_runs_as_written
RUN_ELSEWHERE = {"deployments": "tests/test_prefect_yaml.py"}


def test_the_journeys_are_found():
    journeys = journey_blocks(documents())
    assert sorted(journeys) == sorted(EXPECTED_RELEASES)
    commands = "\n".join(block.text for blocks in journeys.values() for block in blocks)
    for command in ("reasonvqa build", "reasonvqa verify", "reasonvqa resplit", "reasonvqa export", "reasonvqa import",
                    "prefect deploy --all", "prefect deployment run", "/health"):
        assert command in commands


def test_fences_are_read_with_their_file_and_line(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "PROJECT", tmp_path)
    page = tmp_path / "page.md"
    page.write_text("text\n```bash journey=a\necho one\n```\n```bash\nuntagged\n```\n```bash journey=a\necho two\n```\n")
    assert journey_blocks([page]) == {"a": [Block("a", "page.md:2", "echo one"), Block("a", "page.md:8", "echo two")]}


def group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process of process group ``pgid`` remains (Linux /proc)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # the process ended while being read
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def stop_groups(groups: list[int], grace_s: float = 20.0) -> None:
    """SIGTERM every process of ``groups``; SIGKILL what is left after ``grace_s``."""
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(group_alive(g) for g in groups) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


@contextlib.contextmanager
def journey_running(journey: str, folder: Path, env: dict, port: str, timeout_s: float) -> Iterator[str]:
    """Run the journey's blocks one bash process each (the shell's exported variables carried from one to the next,
    ``HUMAN_STEPS`` between them), raising AssertionError naming the block that failed; yields the output while
    what the blocks started in the background (a server, a worker) still runs, and stops it on exit."""
    state = folder.parent / "exported.sh"
    log = folder.parent / f"{journey}.log"
    groups: list[int] = []
    deadline = time.monotonic() + timeout_s
    try:
        for i, block in enumerate(journey_blocks(documents())[journey]):
            step = HUMAN_STEPS.get((journey, i))
            if step is not None:
                step(folder)
            script = "\n".join(["set -euo pipefail", f"source {shlex.quote(str(state))}" if state.exists() else "",
                                block.text.replace(README_PORT, port), f"export -p > {shlex.quote(str(state))}"])
            with log.open("a") as out:
                out.write(f"### {block.source}\n")
                out.flush()
                process = subprocess.Popen(["bash", "-c", script], cwd=folder, env=env, stdout=out,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, process_group=0)
            groups.append(process.pid)
            try:
                code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                code = "timeout"
            if code != 0:
                raise AssertionError(f"journey {journey}: the block at {block.source} exited {code}:\n"
                                     f"{log.read_text(errors='replace')[-6000:]}")
        yield log.read_text(errors="replace")
    finally:
        stop_groups(groups)


def journey_checkout(tmp_path: Path) -> tuple[Path, dict]:
    """A new folder holding the checkout's ``prefect.yaml`` and ``data/``, and the environment a journey runs in
    (this venv first on PATH, a private PREFECT_HOME, no other PREFECT_ setting)."""
    folder = tmp_path / "checkout"
    folder.mkdir()
    shutil.copy(PROJECT / "prefect.yaml", folder / "prefect.yaml")
    (folder / "data").symlink_to(PROJECT / "data", target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               PREFECT_HOME=str(tmp_path / "home"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_WORKER_QUERY_SECONDS="1", COLUMNS="500")
    return folder, env


@pytest.mark.integration
@pytest.mark.parametrize("journey", sorted(set(EXPECTED_RELEASES) - set(RUN_ELSEWHERE)))
def test_journey_runs_as_written(journey, tmp_path, request):
    folder, env = journey_checkout(tmp_path)
    if journey in SESSION_API_JOURNEYS:
        env["PREFECT_API_URL"] = request.getfixturevalue("prefect_api")
    with journey_running(journey, folder, env, str(free_port()), timeout_s=480):
        pass
    for version in EXPECTED_RELEASES[journey]:
        assert verify_release(folder / "out" / "reasonvqa-sample" / version) == []
