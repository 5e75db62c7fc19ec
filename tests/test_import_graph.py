"""The package's shape: every module imports, and no two modules import each other, directly or
round a longer circle (a lazy import inside a function counts: it is a circle all the same)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import compile_lens

PACKAGE = Path(compile_lens.__file__).parent
MAX_LINES = 500  # over it, the module's docstring says why


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if "_boot" in parts:  # sitecustomize: runs in the user's program, installs the recorder on import
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules `name` imports (type-checking-only imports left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for child in node.body for n in ast.walk(child)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle, as the modules round it; [] when there is none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def _without_parents(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's __init__ runs before its modules: `pkg.mod` -> `pkg` is not an edge of design."""
    return {n: {t for t in ts if not n.startswith(t + ".")} for n, ts in graph.items()}


def test_no_import_circle():
    modules = _modules()
    graph = _without_parents({name: _imports(name, path, modules) for name, path in modules.items()})
    assert "compile_lens.cli.check" in graph["compile_lens.cli.report"]  # the scan sees relative imports
    assert _cycle(graph) == []


def test_the_scan_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]


def test_every_module_imports():
    names = [n for n in _modules() if not n.endswith("__main__")]
    code = "import importlib, sys\nfor n in sys.argv[1:]:\n    importlib.import_module(n)\n"
    done = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_modules_are_small_or_say_why():
    long = [str(p.relative_to(PACKAGE)) for p in _modules().values()
            if len(p.read_text(encoding="utf-8").splitlines()) > MAX_LINES
            and "Over 500 lines" not in (ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or "")]
    assert long == []
