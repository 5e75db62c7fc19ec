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
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

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
LIST_TTL_S = 2.0  # `check` of a folder asks once per file: the workspace is listed once per this long
_listed: dict[str, tuple[float, list[tuple[str, int, int]]]] = {}  # root -> (when, [(file, mtime, size)])
# (file, mtime, size, module name) -> (workspace files it imports, its tree), or None: it calls no
# `compile`, or never names the module (an importer must: `from model import GPT`, `import model`)
_read: dict[tuple[str, int, int, str], Optional[tuple[list[str], ast.Module]]] = {}


def compiled_in_importers(path: str, root: str, names: set[str]) -> dict[str, str]:
    """Targets of `path` (among `names`) that a workspace file importing it compiles:
    name -> that file, relative to `root`. Plain `ast`, no user code."""
    real = os.path.realpath(path)
    stem = os.path.splitext(os.path.basename(real))[0]
    found: dict[str, str] = {}
    if not names or not root or not os.path.isdir(root):
        return found
    for listed in _python_files(root):
        if listed[0] == real:
            continue
        key = (*listed, stem)
        if key not in _read:
            if len(_read) > 4 * MAX_FILES:
                _read.clear()
            _read[key] = _importer(listed[0], root, stem)
        read = _read[key]
        if read is None or real not in read[0]:
            continue
        for site in compile_call_sites(read[1], names):
            found.setdefault(site.target, os.path.relpath(key[0], root))
    return found


def _importer(path: str, root: str, stem: str) -> Optional[tuple[list[str], ast.Module]]:
    """(workspace files `path` imports, its tree), or None when it compiles nothing or never names
    the module `stem` (most files of a large workspace: read, never parsed)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return None
    if "compile" not in text or stem not in text or not _imports_module(text, stem):
        return None  # most files: no parse
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    return workspace_imports(path, text, root), tree


def _imports_module(text: str, stem: str) -> bool:
    """An import statement that names the module (`from model import`, `from .model import`,
    `from pkg.model import`, `import model`): the files worth parsing."""
    pattern = rf"^\s*(?:from\s+[\w.]*\b{re.escape(stem)}\b|import\s+[\w., ]*\b{re.escape(stem)}\b)"
    return re.search(pattern, text, re.M) is not None


def _python_files(root: str) -> list[tuple[str, int, int]]:
    now = time.monotonic()
    listed = _listed.get(root)
    if listed is not None and now - listed[0] < LIST_TTL_S:
        return listed[1]
    files: list[tuple[str, int, int]] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(names):
            if name.endswith(".py") and len(files) < MAX_FILES:
                full = os.path.realpath(os.path.join(folder, name))
                try:
                    stat = os.stat(full)
                except OSError:
                    continue
                files.append((full, stat.st_mtime_ns, stat.st_size))
        if len(files) >= MAX_FILES:
            break
    _listed[root] = (now, files)
    return files


def note_importers(discovery: Discovery, path: str, root: str) -> None:
    """Fill `discovery.compiled_elsewhere` from the workspace (the front ends call this once per
    saved file; `measure_order` reads it)."""
    discovery.compiled_elsewhere = compiled_in_importers(path, root, {t.name for t in discovery.targets})
