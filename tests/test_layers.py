"""The import rules of the layout, checked on the installed tree: import-linter's contracts in
pyproject.toml (layers, forbidden packages, no cycles between siblings) all kept, and no import
cycle between any two modules."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ("core", "protos", "sim", "training", "serving", "clients", "datasets")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


@pytest.fixture(scope="module")
def installed_tree(tmp_path_factory) -> Path:
    """The package as a wheel installs it: l3p/ holding the apps (apps/ in the checkout) and every subpackage. grimp walks
    the package's folder, and in the checkout the subpackages are its siblings."""
    root = tmp_path_factory.mktemp("tree")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "apps", root / "l3p", ignore=skip)
    for name in SUBPACKAGES:
        shutil.copytree(ROOT / name, root / "l3p" / name, ignore=skip)
    return root


def test_every_import_contract_is_kept(installed_tree):
    contracts = re.findall(r'^name = "(.*)"$', (ROOT / "pyproject.toml").read_text().split("[tool.importlinter]")[1],
                           re.MULTILINE)
    assert len(contracts) >= 6
    proc = subprocess.run([str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                          cwd=installed_tree, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(installed_tree), "COLUMNS": "250"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kept = re.findall(r"^(.*?) KEPT\b", proc.stdout, re.MULTILINE)
    assert sorted(kept) == sorted(contracts), proc.stdout
    assert f"Contracts: {len(contracts)} kept, 0 broken." in proc.stdout


def _cycles(installed_tree: Path) -> list[list[str]]:
    code = """
import json, sys
import grimp
graph = grimp.build_graph("l3p", cache_dir=None)
edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
print(json.dumps(edges))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=installed_tree, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(installed_tree)})
    assert proc.returncode == 0, proc.stderr
    import json

    edges: dict[str, list[str]] = json.loads(proc.stdout)
    # Tarjan's strongly connected components: every component of more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in edges.get(module, ()):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycle_between_modules(installed_tree):
    """Modules that import each other, directly or around a loop, including through a package's
    __init__ (a module importing its own package's re-exports while that __init__ imports it)."""
    cycles = _cycles(installed_tree)
    assert cycles == [], "modules in an import cycle: " + "; ".join(" <-> ".join(c) for c in cycles)


# The one exception: bundle signatures (core/signing.py, shared by the exporter and the server)
# need Ed25519, which only `cryptography` provides; it is imported inside the functions that sign
# or verify, never when l3p.core is imported (checked below).
LAZY_IN_CORE = {"l3p.core.signing": {"cryptography"}}


def test_core_imports_nothing_but_the_standard_library_and_numpy(installed_tree):
    code = """
import json
import grimp
graph = grimp.build_graph("l3p", include_external_packages=True, cache_dir=None)
core = {m for m in graph.modules if m == "l3p.core" or m.startswith("l3p.core.")}
imported = {}
for module in core:
    imported[module] = sorted(m for m in graph.find_modules_directly_imported_by(module) if not m.startswith("l3p"))
print(json.dumps(imported))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=installed_tree, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(installed_tree)})
    assert proc.returncode == 0, proc.stderr
    import json

    external = set()
    for module, names in json.loads(proc.stdout).items():
        external |= set(names) - LAZY_IN_CORE.get(module, set())
    assert external - set(sys.stdlib_module_names) == {"numpy"}
    # Importing every core module loads no package but numpy, the lazy ones included.
    modules = [f"l3p.core.{path.stem}" for path in (installed_tree / "l3p" / "core").glob("*.py")]
    check = ("import sys, importlib\n"
             f"for name in {modules!r}: importlib.import_module(name)\n"
             f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(set().union(*LAZY_IN_CORE.values()))!r})))")
    proc = subprocess.run([sys.executable, "-c", check], cwd=installed_tree, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(installed_tree)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
