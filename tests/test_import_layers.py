"""The import rules of ARCHITECTURE.md ("Import rules"), checked over every product module.

Layers, lowest first: the core (``reasonvqa/``), the data packages (``templates/``, ``data/``), the stages
(``tasks/<stage>/``, ``knowledge/``, ``annotation_exports/``) and the composition layer (``flows/``). The core
imports no other layer; a data package imports the core and itself; a stage imports the core, the data
packages and itself, never a sibling stage; ``flows/`` may import anything. Every ``import`` statement
counts, those inside functions too. Work-folder URLs (``reasonvqa.workstore``) are known to the core and the
stage runner only.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("tasks/sources", "tasks/proposals", "tasks/questions", "tasks/verify", "tasks/balance", "tasks/release",
          "tasks/evaluate",
          "knowledge", "annotation_exports")
DATA_PACKAGES = ("templates", "data")
PRODUCT_FOLDERS = ("reasonvqa", "flows", "tasks", "knowledge", "annotation_exports", "templates", "data")

# The stage runner: the only modules outside the core that may use work-folder URLs (``reasonvqa.workstore``).
# stage_runner.py moves each task's paths onto its process's mirror; work_session.py, beside it, holds the
# build's work folder (lock or lease) and forgets the build's mirrors when the build ends.
RUNNER = ("flows/stage_runner.py", "flows/work_session.py")


def layer_of_file(relative: str) -> str:
    """The layer a product file belongs to: ``core``, ``flows``, a data package or a stage folder."""
    top = relative.split("/")[0]
    if top == "reasonvqa":
        return "core"
    if top == "tasks":
        parts = relative.split("/")
        return "tasks" if len(parts) == 2 else f"tasks/{parts[1]}"
    return top


def layer_of_module(module: str) -> str | None:
    """The layer of a dotted ``reasonvqa...`` module name; None for a module outside the project."""
    parts = module.split(".")
    if parts[0] != "reasonvqa":
        return None
    if len(parts) == 1:
        return "core"
    if parts[1] == "tasks":
        return "tasks" if len(parts) == 2 else f"tasks/{parts[2]}"
    if parts[1] in ("flows", "knowledge", "annotation_exports", "templates", "data"):
        return parts[1]
    return "core"


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted module) for every import; ``from a import b`` yields ``a.b`` when ``a`` is a package root."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"relative import at line {node.lineno}: the rules read absolute names only"
            if node.module in ("reasonvqa", "reasonvqa.tasks"):  # the name may be a sub-package: check each
                found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
            elif node.module:
                found.append((node.lineno, node.module))
    return found


def allowed(source: str, target: str) -> str | None:
    """None when a module of layer ``source`` may import layer ``target``, else the rule it breaks."""
    if source == target or source == "flows":
        return None
    if source == "core":
        return "the core imports no stage, data package or flows/"
    if source in DATA_PACKAGES:
        return None if target == "core" else "a data package imports only the core and itself"
    if source in STAGES:
        if target in ("core", *DATA_PACKAGES):
            return None
        if target == "flows":
            return "a stage never imports flows/ (flows/ passes values to it)"
        return "a stage never imports a sibling stage (shared code goes to the core, or flows/ passes the value)"
    return f"{source} is no known layer: add it to ARCHITECTURE.md's import rules and this test"


def product_files() -> list[Path]:
    return sorted(f for top in PRODUCT_FOLDERS for f in (ROOT / top).rglob("*.py"))


def test_every_import_follows_the_layer_rules():
    broken = []
    for path in product_files():
        relative = path.relative_to(ROOT).as_posix()
        source = layer_of_file(relative)
        for line, module in imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
            target = layer_of_module(module)
            rule = None if target is None else allowed(source, target)
            if rule:
                broken.append(f"{relative}:{line}: imports {module} ({source} -> {target}): {rule}")
    assert not broken, "import rules broken (ARCHITECTURE.md, Import rules):\n" + "\n".join(broken)


def workstore_users() -> list[str]:
    """``file:line`` of each import of ``reasonvqa.workstore`` (or of the name from ``reasonvqa``) outside the
    core and the stage runner."""
    users = []
    for path in product_files():
        relative = path.relative_to(ROOT).as_posix()
        if layer_of_file(relative) == "core" or relative in RUNNER:
            continue
        users += [f"{relative}:{line}" for line, module in imported_modules(ast.parse(path.read_text(encoding="utf-8")))
                  if module == "reasonvqa.workstore"]
    return users


def test_only_the_core_and_the_stage_runner_use_work_folder_urls():
    users = workstore_users()
    assert not users, (
        "work-folder URLs belong to the core and the stage runner (ARCHITECTURE.md, Import rules): use "
        "reasonvqa.work_files or reasonvqa.stage instead of reasonvqa.workstore at:\n" + "\n".join(users))
    assert all((ROOT / runner).is_file() for runner in RUNNER), f"the stage runner moved: update RUNNER {RUNNER}"


def test_the_rules_see_a_sibling_import_and_a_core_import_of_a_stage():
    tree = ast.parse("from reasonvqa.tasks import balance\nimport reasonvqa.tasks.release.writer\n"
                     "from reasonvqa import schemas, flows\nfrom reasonvqa.knowledge.config import KnowledgeConfig\n")
    modules = imported_modules(tree)
    assert modules == [(1, "reasonvqa.tasks.balance"), (2, "reasonvqa.tasks.release.writer"),
                       (3, "reasonvqa.schemas"), (3, "reasonvqa.flows"), (4, "reasonvqa.knowledge.config")]
    layers = [layer_of_module(m) for _, m in modules]
    assert layers == ["tasks/balance", "tasks/release", "core", "flows", "knowledge"]
    assert allowed("tasks/release", "tasks/balance").startswith("a stage never imports a sibling stage")
    assert allowed("core", "knowledge").startswith("the core imports no stage")
    assert allowed("tasks/release", "templates") is None
    assert allowed("flows", "tasks/release") is None
    assert allowed("templates", "tasks/questions") == "a data package imports only the core and itself"
    assert layer_of_file("tasks/balance/balance.py") == "tasks/balance"
    assert layer_of_file("reasonvqa/schemas.py") == "core"
    assert imported_modules(ast.parse("from reasonvqa import workstore\nfrom reasonvqa.workstore import fetch\n")) == [
        (1, "reasonvqa.workstore"), (2, "reasonvqa.workstore")]
