"""In which order a file's targets run, and which are measured within another.

The model the user compiles comes first: targets compiled at a call site (`torch.compile(GPT(...))`,
`model = GPT(...); torch.compile(model)`) in this file or in a workspace file that imports it; then
the outermost targets (no other target of the file builds them in its `__init__`), then the rest,
the outer before the inner. A target built inside another that is measured anyway (a nanoGPT
`Block` inside `GPT`) is *within* it: the outer one's line costs already cover its lines, so the
editor measures it only when asked. The CLI and the language server both run targets in this order
(`jobs.analysis.analyze_file`); the editor alone defers the inner ones.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

from .call_sites import compile_call_sites
from .deps import workspace_imports

if TYPE_CHECKING:
    from .targets import Discovery


@dataclass
class MeasureOrder:
    names: list[str] = field(default_factory=list)  # every target of the file, in the order to run
    within: dict[str, str] = field(default_factory=dict)  # inner target -> the measured one covering its lines


def built_inside(tree: ast.Module, names: set[str]) -> dict[str, list[str]]:
    """Targets each class of the file builds in its `__init__` (`self.attn = CausalSelfAttention(c)`,
    `nn.ModuleList([Block(c) for _ in ...])`), by name, in the order they are built."""
    found: dict[str, list[str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or node.name not in names:
            continue
        init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        if init is None:
            continue
        inner: list[str] = []
        for call in ast.walk(init):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in names \
                    and call.func.id != node.name and call.func.id not in inner:
                inner.append(call.func.id)
        if inner:
            found[node.name] = inner
    return found


def measure_order(discovery: Discovery) -> MeasureOrder:
    """The order of `discovery.targets` (their inputs resolved: only a runnable target covers another)."""
    names = [t.name for t in discovery.targets]
    index = {n: i for i, n in enumerate(names)}
    runnable = {t.name for t in discovery.targets if t.inputs is not None}
    compiled = {s.target for s in discovery.call_sites} | set(discovery.compiled_elsewhere)
    parents: dict[str, set[str]] = {}
    for outer, inner in discovery.contains.items():
        for name in inner:
            if outer in index and name in index:
                parents.setdefault(name, set()).add(outer)

    def ancestors(name: str) -> set[str]:
        seen: set[str] = set()
        todo = list(parents.get(name, ()))
        while todo:
            n = todo.pop()
            if n not in seen and n != name:  # a cycle (A builds B builds A) ends here
                seen.add(n)
                todo += parents.get(n, ())
        return seen

    def depth(name: str, seen: frozenset[str] = frozenset()) -> int:
        ups = [p for p in parents.get(name, ()) if p not in seen]
        return 0 if not ups else 1 + min(depth(p, seen | {name}) for p in ups)

    outermost = {n for n in names if not parents.get(n)}

    def rank(name: str) -> tuple[int, int, int]:
        return (0 if name in compiled else 1 if name in outermost else 2, depth(name), index[name])

    within: dict[str, str] = {}
    for name in names:
        if name in compiled:
            continue  # the user compiles it: measured as its own model
        covering = [a for a in ancestors(name) if a in runnable and (a in compiled or a in outermost)]
        if covering:
            within[name] = min(covering, key=rank)
    return MeasureOrder(sorted(names, key=rank), within)


# --- workspace files that import this one and compile its targets ------------------------------

_SKIP_DIRS = {".git", ".hg", ".venv", "venv", "env", "node_modules", "__pycache__", "site-packages", ".tox",
              ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", ".compile-lens"}
MAX_FILES = 2000  # a monorepo is not walked whole on every save: the first files found are read
_read: dict[tuple[str, int, int, frozenset[str]], tuple[list[str], set[str]]] = {}  # by file, mtime, size, names


def compiled_in_importers(path: str, root: str, names: set[str]) -> dict[str, str]:
    """Targets of `path` (among `names`) that a workspace file importing it compiles:
    name -> that file, relative to `root`. Plain `ast`, no user code."""
    real = os.path.realpath(path)
    found: dict[str, str] = {}
    if not names or not root or not os.path.isdir(root):
        return found
    for other in _python_files(root):
        if other == real:
            continue
        try:
            stat = os.stat(other)
        except OSError:
            continue
        key = (other, stat.st_mtime_ns, stat.st_size, frozenset(names))
        if key not in _read:
            if len(_read) > 4 * MAX_FILES:
                _read.clear()
            _read[key] = _importer(other, root, names)
        imports, compiled = _read[key]
        if real in imports:
            for name in sorted(compiled):
                found.setdefault(name, os.path.relpath(other, root))
    return found


def _importer(path: str, root: str, names: set[str]) -> tuple[list[str], set[str]]:
    """(workspace files `path` imports, which of `names` it compiles at a call site)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return [], set()
    if "compile" not in text or not any(n in text for n in names):
        return [], set()  # most files: no parse
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return [], set()
    compiled = {s.target for s in compile_call_sites(tree, names)}
    return (workspace_imports(path, text, root) if compiled else []), compiled


def _python_files(root: str) -> Iterator[str]:
    count = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                count += 1
                if count > MAX_FILES:
                    return
                yield os.path.realpath(os.path.join(folder, name))


def note_importers(discovery: Discovery, path: str, root: str) -> None:
    """Fill `discovery.compiled_elsewhere` from the workspace (the front ends call this once per
    saved file; `measure_order` reads it)."""
    discovery.compiled_elsewhere = compiled_in_importers(path, root, {t.name for t in discovery.targets})
