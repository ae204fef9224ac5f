"""The project as a user gets it: a wheel installed (not editable) into a fresh virtual environment.

The wheel is built from a copy of the tracked files, installed with ``--no-deps`` into a new venv
whose only link to this one is a ``.pth`` line naming this venv's site-packages (so the
dependencies are reused, but ``.pth`` files there, among them the editable install's finder, are
not run). ``reasonvqa build --sample`` then runs from an unrelated folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOT_FOLDERS = ("tasks", "flows", "knowledge", "templates", "data")

pytestmark = pytest.mark.integration


def _tracked_copy(dest: Path) -> Path:
    """The files git tracks (or, outside a git checkout, the tree minus venvs and outputs)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True)
    if listed.returncode == 0 and listed.stdout:
        for name in listed.stdout.decode().split("\0"):
            if name and (REPO / name).is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, dest / name)
    else:
        shutil.copytree(REPO, dest, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".*", "out", "work", "build", "*.egg-info", "__pycache__"))
    return dest


def _run(args: list, cwd: Path, env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """Build the wheel, install it into a fresh venv; the venv's python, bin folder and environment."""
    root = tmp_path_factory.mktemp("packaging")
    source = _tracked_copy(root / "source")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", root / "wheel", source],
         cwd=root)
    wheel = next((root / "wheel").glob("reasonvqa_pipeline-*.whl"))

    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / Path(sys.executable).name
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=root).stdout.strip())
    (site / "_reuse_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel], cwd=root)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PREFECT_"))}
    # dependencies' commands (the `oxigraph` server) come from this venv, after the new one's
    env["PATH"] = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PREFECT_HOME"] = str(root / "prefect-home")
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    return {"python": python, "bin": bin_dir, "site": site, "env": env, "cwd": elsewhere, "root": root}


def test_the_wheel_installs_only_under_the_reasonvqa_namespace(installed):
    probe = (
        "import importlib, importlib.util, sys\n"
        "import reasonvqa, reasonvqa.tasks, reasonvqa.paths as p\n"
        "print(reasonvqa.__file__); print(reasonvqa.tasks.__file__); print(p.SAMPLE_DIR); print(p.TEMPLATES_DIR)\n"
        "print(','.join(type(f).__name__ for f in sys.meta_path))\n"
        f"for name in {ROOT_FOLDERS!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "        print('imported', name)\n"
        "    except ImportError:\n"
        "        print('absent', name)\n"
    )
    lines = _run([installed["python"], "-c", probe], cwd=installed["cwd"], env=installed["env"]).stdout.split("\n")
    site = installed["site"]
    for path in lines[:4]:
        assert Path(path).is_relative_to(site), path
    assert (Path(lines[2]) / "vg" / "image_data.json").is_file()
    assert (Path(lines[3]) / "domains.yaml").is_file()
    assert "Editable" not in lines[4] and "_EditableFinder" not in lines[4]
    assert lines[5:5 + len(ROOT_FOLDERS)] == [f"absent {name}" for name in ROOT_FOLDERS]
    top_level = {p.name for p in site.iterdir()}
    assert not top_level & {*ROOT_FOLDERS, "annotation_exports"}


def test_sample_build_from_another_folder_passes_verify(installed):
    out = installed["root"] / "out"
    reasonvqa = installed["bin"] / "reasonvqa"
    built = _run([reasonvqa, "build", "--sample", "--out", out], cwd=installed["cwd"], env=installed["env"])
    release = Path(built.stdout.strip().splitlines()[-1])
    assert release == out / "reasonvqa-sample" / "0.1.0"
    verified = _run([reasonvqa, "verify", release], cwd=installed["cwd"], env=installed["env"])
    assert verified.stdout.strip() == f"OK {release}"
    assert sorted(p.name for p in release.iterdir()) == [
        "README.md", "croissant.json", "entity_links", "images", "knowledge", "knowledge_queries", "manifest.json",
        "manifest.json.sha256", "pool", "regions", "stats", "test", "train"]
