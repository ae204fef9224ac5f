"""Suite-wide test setup and fixtures."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

# One OpenMP thread per xdist worker (torch, and the build subprocesses that inherit it): with a worker per core,
# torch's default of a thread per core has 2 workers x 2 threads spinning on 2 cores; measured on the proposals
# tests (test_stage.py, test_models.py) at load ~6: 107 -> 55 CPU s, 259 -> 110 s wall. Before torch is imported.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("OMP_NUM_THREADS", "1")

from tests.prefect_harness import prefect_environment, reopen_prefect_consoles
from tests.tool_cache import locked
from reasonvqa.torchvision_cpu import prepare

# Before anything imports torchvision, transformers or segment_anything (see reasonvqa/torchvision_cpu.py).
prepare()


@pytest.fixture(scope="session")
def prefect_api() -> Iterator[str]:
    """One temporary Prefect API (prefect_test_harness) for the session of this process (each xdist worker); its
    URL, also exported as PREFECT_API_URL to the subprocesses tests start, so a `reasonvqa build` there uses it
    instead of starting and migrating a server of its own (~8 CPU s a command)."""
    prefect_environment()
    from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with contextlib.ExitStack() as stack:
        # the harness's server (a subprocess) without the automations' triggers and the event store, which no
        # test of this API reads (measured: 1.7 -> 1.35 server CPU s a sample build); only while it starts, so
        # servers that tests start later (deployments, `--watch`) keep Prefect's defaults
        with pytest.MonkeyPatch.context() as services:
            services.setenv("PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED", "false")
            services.setenv("PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED", "false")
            stack.enter_context(prefect_test_harness(server_startup_timeout=180))  # ~65 s on a loaded 2-core machine
        url = PREFECT_API_URL.value()
        # no flow-run heartbeats in the tests' processes, as against the CLI's own server (reasonvqa/prefect_api.py):
        # a flow call's exit waits for the heartbeat thread's 1 s sleep, 0.5 s on average per flow run
        with pytest.MonkeyPatch.context() as patch, temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            patch.setenv("PREFECT_API_URL", url)
            yield url


@pytest.fixture(scope="session")
def run_folder(request, tmp_path_factory) -> Path:
    """A folder of this test run that every parallel worker (pytest-xdist) sees: builds shared across workers
    go there, each made by the first worker to ask under a file lock (``tests.tool_cache.locked``)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(request.config, "workerinput") else base  # workers' folders sit side by side


@pytest.fixture(scope="session")
def sample_release(request, run_folder) -> Path:
    """The release of ``build_reasonvqa(sample_config(), out)``, built once per test run and shared.

    Parallel workers share it too: the first to ask builds it under a file lock (starting its Prefect API,
    ``prefect_api``, only then), the others wait and reuse it. Read it only: a test that changes it (or its
    work folder ``sample_release.parents[1] / ".work"``) copies ``sample_release.parents[1]`` to its own
    ``tmp_path`` first.
    """
    built = run_folder / "sample-release.path"
    with locked(run_folder / "sample-release.lock"):
        if not built.exists():
            request.getfixturevalue("prefect_api")
            reopen_prefect_consoles()
            from reasonvqa.flows.build_reasonvqa import build_reasonvqa
            from reasonvqa.flows.config import sample_config

            out = run_folder / "sample-release"
            built.write_text(str(build_reasonvqa(sample_config(), str(out))))
    return Path(built.read_text())


@pytest.fixture
def hide_module(monkeypatch):
    """``hide_module(name)``: for this test, ``import name`` (and its submodules) fails as if the package
    were not installed, and fsspec forgets a file system class it already imported from it."""
    def hide(name: str) -> None:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, name, None)  # the import system raises ModuleNotFoundError on None
        fsspec_registry = importlib.import_module("fsspec.registry")
        for protocol, cls in list(fsspec_registry._registry.items()):
            if cls.__module__ == name or cls.__module__.startswith(name + "."):
                monkeypatch.delitem(fsspec_registry._registry, protocol)
        with pytest.raises(ImportError):
            importlib.import_module(name)

    return hide


# --- make test-fast: the suite without its slow files -------------------------------------------------------
# Every run records each test's time (setup, call and teardown) in pytest's cache; `--fast` leaves out the
# files whose tests took more than FAST_FILE_BUDGET_S together last time (a module fixture's build counts
# once, in its file). Before any record exists it leaves out SLOW_PATHS, the slow parts measured once.
DURATIONS_KEY = "reasonvqa/durations"
FAST_FILE_BUDGET_S = 2.0
SLOW_PATHS = ("tests/flows/", "tests/annotation_exports/test_labelstudio_server.py", "tests/test_packaging.py",
              "tests/test_prefect_yaml.py", "tests/test_dockerfile.py")


def pytest_addoption(parser):
    parser.addoption("--fast", action="store_true",
                     help="leave out the test files that took over %.0f s last run (make test-fast)" % FAST_FILE_BUDGET_S)


def _test_file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _seconds_per_file(config) -> dict[str, float]:
    """Each test file's recorded seconds (last run of each test), empty before any run."""
    cache = getattr(config, "cache", None)  # None with -p no:cacheprovider
    per_file: dict[str, float] = {}
    for nodeid, seconds in (cache.get(DURATIONS_KEY, {}) if cache else {}).items():
        per_file[_test_file(nodeid)] = per_file.get(_test_file(nodeid), 0.0) + seconds
    return per_file


# --- make test: the slowest work first, on both cores ---------------------------------------------------------
# Before any record (a fresh clone), units are ordered by these seconds: each unit's setup + call + teardown in a
# full run (`pytest -n 2 --dist loadfile`, 2 cores, load 3-8 from other work, 2026-12-08) times 0.5, about a quiet
# machine's seconds (a shared build counts where it was made; test_prefect_yaml.py since it took in the deployments
# journey: its two parts added); the rest after them in collection order.
ESTIMATED_S = {
    "tests/test_prefect_yaml.py": 150,
    "tests/flows/test_build_work_url.py": 76,
    "tests/test_readme.py::test_journey_runs_as_written[sample]": 72,
    "tests/flows/test_build_models_url.py::test_region_proposals_on_a_url_work_folder": 60,
    "tests/tasks/balance/test_partitioned.py": 54,
    "tests/flows/test_build_partitioned.py": 51,
    "tests/reasonvqa/test_processes.py": 50,
    "tests/flows/test_knowledge_rebuild.py": 39,
    "tests/test_packaging.py": 38,
    "tests/flows/test_resplit.py": 27,
    "tests/flows/test_build_remote_cluster.py": 27,
    "tests/flows/test_stage_runner.py": 23,
    "tests/flows/test_build_models_url.py::test_grounded_vlm_questions_on_a_url_work_folder": 16,
    "tests/flows/test_build_reasonvqa.py": 15,
    "tests/tasks/verify/test_sandbox.py": 14,
    "tests/knowledge/test_wordnet.py": 14,
    "tests/reasonvqa/test_prefect_api.py": 14,
    "tests/tasks/questions/test_grounded_wording.py": 13,
    "tests/annotation_exports/test_labelstudio_server.py": 13,
    "tests/tasks/balance/test_stats.py": 12,
    "tests/flows/test_review_roundtrip.py": 12,
    "tests/reasonvqa/test_lease.py": 11,
    "tests/flows/test_rate_limit.py": 11,
    "tests/tasks/proposals/test_nms.py": 10,
    "tests/flows/test_new_source.py": 9,
    "tests/knowledge/test_wikidata.py": 9,
    "tests/flows/test_sample_wording.py": 9,
    "tests/flows/test_build_verified_qa.py": 8,
    "tests/annotation_exports/test_apply.py": 7,
    "tests/tasks/proposals/test_stage.py": 7,
    "tests/flows/test_build_grounded.py": 5,
    "tests/annotation_exports/test_import_validation.py": 5,
    "tests/flows/test_cli_evaluate.py": 5,
    "tests/flows/test_assemble_release.py": 5,
    "tests/tasks/questions/test_templated.py": 5,
    "tests/tasks/sources/test_nuscenes.py": 5,
    "tests/flows/test_add_a_stage.py": 4,
    "tests/flows/test_absence_review.py": 4,
    "tests/tasks/release/test_verify.py": 4,
    "tests/benchmarks/test_measure.py": 4,
}
# Files whose tests share no module fixture: under --dist loadfile each of their tests is a unit of its own,
# so two long tests of one file run on two workers at once instead of one after the other.
PER_TEST_FILES = ("tests/test_readme.py", "tests/flows/test_build_models_url.py")


def _unit(nodeid: str) -> str:
    """The unit of work --dist loadfile hands to one worker: the test file, or the test in PER_TEST_FILES."""
    return nodeid if _test_file(nodeid) in PER_TEST_FILES else _test_file(nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    per_file = _seconds_per_file(config)
    # Slowest units first: xdist (--dist loadfile, Makefile) hands each to the next free worker, so the long
    # ones start at once and the short ones fill in at the end (before any record: ESTIMATED_S).
    recorded = cache.get(DURATIONS_KEY, {}) if (cache := getattr(config, "cache", None)) else {}
    known = {**ESTIMATED_S, **per_file} | {n: s for n, s in recorded.items() if _unit(n) == n}
    items.sort(key=lambda item: -known.get(_unit(item.nodeid), known.get(_test_file(item.nodeid), 0.0)))
    if not config.getoption("fast"):
        return
    if per_file:
        slow = {f for f, seconds in per_file.items() if seconds > FAST_FILE_BUDGET_S}
        is_slow = lambda item: _test_file(item.nodeid) in slow  # noqa: E731
    else:
        is_slow = lambda item: item.nodeid.startswith(SLOW_PATHS)  # noqa: E731
    left_out = [item for item in items if is_slow(item)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not is_slow(item)]


class _DurationRecorder:
    """Adds up each test's phases as reports arrive (in the xdist controller, from every worker)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report):
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist) keeps the record
        config.pluginmanager.register(_DurationRecorder(), "reasonvqa-durations")
        # xdist's default (--loadscope-reorder) queues files by their number of tests, most first, which puts
        # the few long end-to-end tests last, on one worker while the other idles: keep the order above
        if hasattr(config.option, "loadscopereorder"):
            config.option.loadscopereorder = False


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, with each test of PER_TEST_FILES a unit of its own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class _Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return nodeid if _test_file(nodeid) in PER_TEST_FILES else super()._split_scope(nodeid)

    return _Scheduling(config, log)


def pytest_sessionfinish(session):
    recorder = session.config.pluginmanager.get_plugin("reasonvqa-durations")
    cache = getattr(session.config, "cache", None)
    if recorder is None or cache is None or not recorder.seconds:
        return
    merged = dict(cache.get(DURATIONS_KEY, {}))
    merged.update({nodeid: round(seconds, 3) for nodeid, seconds in recorder.seconds.items()})
    cache.set(DURATIONS_KEY, merged)
