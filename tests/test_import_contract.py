"""The import contract of DESIGN.md, checked statically over every layer's source.

Layers import only downwards, and across layers only the other layer's top-level package
(``import schedule``, ``from schedule import te``), never its modules
(``from schedule.lower import x``, ``import schedule.codegen``). Relative imports stay
inside their package and are always fine. Product code never imports ``tests`` or ``bench``.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# layer -> the other layers it may import (its own package is always allowed).
ALLOWED: dict[str, frozenset[str]] = {
    "api": frozenset({"tuner", "ir", "search", "cost_model", "workers", "db", "schedule"}),
    "tuner": frozenset({"ir", "search", "cost_model", "workers", "db", "schedule"}),
    "ir": frozenset({"schedule"}),
    "search": frozenset({"cost_model", "schedule"}),
    "cost_model": frozenset({"schedule"}),
    "workers": frozenset({"schedule"}),
    "db": frozenset(),
    "schedule": frozenset(),
}
# layer -> the layers whose names it may import only from their public face: the names
# listed in that package's ``__all__`` (the tuner drives search, workers and db through
# their interfaces, never through their internals).
PUBLIC_FACE_ONLY: dict[str, frozenset[str]] = {
    "tuner": frozenset({"search", "workers", "db"}),
}
# First-party top-level names that no layer may import.
NEVER_IMPORTED = frozenset({"tests", "bench"})
FIRST_PARTY = frozenset(ALLOWED) | NEVER_IMPORTED
DYNAMIC_IMPORTERS = frozenset({"import_module", "__import__"})


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    statement: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.statement}  -- {self.reason}"


def _imports(tree: ast.AST, source: str) -> Iterator[tuple[int, str, str]]:
    """(line, absolute module name, statement text) for every absolute import in ``tree``,
    including ones nested in functions and ``importlib.import_module("...")`` calls."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            text = " ".join((ast.get_source_segment(source, node) or "").split())
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield node.lineno, alias.name, text
            elif node.level == 0 and node.module:
                yield node.lineno, node.module, text
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            arg = node.args[0]
            if (
                name in DYNAMIC_IMPORTERS
                and isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and not arg.value.startswith(".")
            ):
                text = " ".join((ast.get_source_segment(source, node) or "").split())
                yield node.lineno, arg.value, text


def public_names(root: Path, package: str) -> frozenset[str]:
    """The names in ``package``'s ``__all__`` (read statically from its ``__init__.py``)."""
    tree = ast.parse((root / package / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return frozenset(ast.literal_eval(node.value))
    return frozenset()


def _non_public_uses(tree: ast.AST, source: str, layer: str,
                     public: dict[str, frozenset[str]]) -> Iterator[tuple[int, str, str]]:
    """(line, statement, name) for each name of a public-face-only layer that ``layer``
    takes from outside that layer's ``__all__``: ``from db import x`` or ``db.x``."""
    guarded = {pkg: public[pkg] for pkg in PUBLIC_FACE_ONLY.get(layer, ()) if pkg in public}
    modules = {alias.asname or alias.name: alias.name for node in ast.walk(tree)
               if isinstance(node, ast.Import) for alias in node.names
               if alias.name in guarded}  # names bound to a guarded package by `import`
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in guarded:
            for alias in node.names:
                if alias.name not in guarded[node.module]:
                    text = " ".join((ast.get_source_segment(source, node) or "").split())
                    yield node.lineno, text, f"{node.module}.{alias.name}"
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id in modules
              and node.attr not in guarded[modules[node.value.id]]):
            text = ast.get_source_segment(source, node) or ""
            yield node.lineno, text, f"{modules[node.value.id]}.{node.attr}"


def check_source(source: str, layer: str, path: str,
                 public: dict[str, frozenset[str]] | None = None) -> list[Violation]:
    """Contract violations in one module of ``layer``; ``public``: the ``__all__`` of the
    packages some layer may use only through their public face."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        return [Violation(path, exc.lineno or 0, "<unparsable>", f"syntax error: {exc.msg}")]
    found = []
    for line, module, text in _imports(tree, source):
        top = module.split(".")[0]
        if top not in FIRST_PARTY or top == layer:
            continue
        if top in NEVER_IMPORTED:
            reason = f"product code must not import '{top}'"
        elif top not in ALLOWED[layer]:
            allowed = ", ".join(sorted(ALLOWED[layer])) or "no other layer"
            reason = f"layer '{layer}' may not import '{top}' (it may import: {allowed})"
        elif module != top:
            reason = (
                f"reaches into '{top}' internals; use its public API: "
                f"`import {top}` or `from {top} import ...`"
            )
        else:
            continue
        found.append(Violation(path, line, text, reason))
    for line, text, name in _non_public_uses(tree, source, layer, public or {}):
        found.append(Violation(path, line, text, f"'{name}' is not part of the public face "
                               f"(__all__) of '{name.split('.')[0]}'"))
    return found


def check_tree(root: Path) -> tuple[int, list[Violation]]:
    """(number of files checked, violations) over every layer package under ``root``."""
    checked, violations = 0, []
    public = {pkg: public_names(root, pkg)
              for pkgs in PUBLIC_FACE_ONLY.values() for pkg in pkgs
              if (root / pkg / "__init__.py").is_file()}
    for layer in sorted(ALLOWED):
        for file in sorted((root / layer).rglob("*.py")):
            checked += 1
            rel = file.relative_to(root).as_posix()
            violations += check_source(file.read_text(encoding="utf-8"), layer, rel, public)
    return checked, violations


def test_layers_import_only_downwards_and_only_public_packages() -> None:
    checked, violations = check_tree(REPO_ROOT)
    assert checked > 0, "no layer sources found: the checker is looking in the wrong place"
    assert not violations, "import contract violations (see DESIGN.md):\n" + "\n".join(
        map(str, violations)
    )


def test_every_top_level_package_is_a_known_layer() -> None:
    unknown = sorted(
        d.name
        for d in REPO_ROOT.iterdir()
        if (d / "__init__.py").is_file() and d.name not in ALLOWED and d.name != "tests"
    )
    assert not unknown, (
        f"top-level packages outside the import contract: {unknown}; add them to ALLOWED "
        "here, to DESIGN.md and to pyproject.toml"
    )


def test_pyproject_packages_match_the_layers() -> None:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(include) == sorted(f"{layer}*" for layer in ALLOWED)


# --- the checker itself: it must catch violations, not pass vacuously ---------------------

CLEAN = """\
import json
import numpy as np
import schedule
from schedule import te, lower
from . import rules
from .rules import apply_rules
from search.sketch import Sketch
import cost_model
"""


def test_checker_accepts_allowed_imports() -> None:
    assert check_source(CLEAN, "search", "search/x.py") == []


@pytest.mark.parametrize(
    ("layer", "source", "reason_part"),
    [
        ("schedule", "import tuner\n", "layer 'schedule' may not import 'tuner'"),
        ("tuner", "from api import app\n", "layer 'tuner' may not import 'api'"),
        ("db", "from schedule import te\n", "may import: no other layer"),
        ("search", "from schedule.lower import lower_stmt\n", "reaches into 'schedule'"),
        ("search", "import schedule.codegen\n", "reaches into 'schedule'"),
        ("workers", "def f():\n    from db import Database\n", "may not import 'db'"),
        ("tuner", "import importlib\nimportlib.import_module('api')\n", "may not import 'api'"),
        ("ir", "from tests.helpers import x\n", "must not import 'tests'"),
    ],
)
def test_checker_reports_violations(layer: str, source: str, reason_part: str) -> None:
    violations = check_source(source, layer, f"{layer}/bad.py")
    assert len(violations) == 1
    assert reason_part in violations[0].reason


@pytest.mark.parametrize("source", [
    "from search import SketchPolicy, _private\n",
    "import workers\nworkers.ray_pool\n",
    "def f():\n    from db import record_store\n",
])
def test_the_tuner_uses_search_workers_and_db_only_through_their_public_face(
        source: str) -> None:
    public = {"search": frozenset({"SketchPolicy"}), "workers": frozenset({"LocalPool"}),
              "db": frozenset({"Database"})}
    violations = check_source(source, "tuner", "tuner/x.py", public)
    assert len(violations) == 1 and "not part of the public face" in violations[0].reason
    assert check_source(source, "api", "api/x.py", public) == []  # only the tuner is held
    fine = "from db import Database\nimport workers\nworkers.LocalPool\ndb = 1\ndb.jobs\n"
    assert check_source(fine, "tuner", "tuner/x.py", public) == []


def test_violation_names_file_line_and_statement() -> None:
    source = "import numpy\n\nfrom schedule.codegen import (\n    emit_c,\n)\n"
    [violation] = check_source(source, "workers", "workers/runner.py")
    assert str(violation).startswith(
        "workers/runner.py:3: from schedule.codegen import ( emit_c, )"
    )


def test_check_tree_finds_a_violation_on_disk(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "__init__.py").write_text('"""db."""\n')
    (tmp_path / "db" / "models.py").write_text("import os\nimport tuner\n")
    checked, violations = check_tree(tmp_path)
    assert checked == 2
    assert [str(v).split("  --")[0] for v in violations] == ["db/models.py:2: import tuner"]
