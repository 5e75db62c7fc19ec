"""The module header: the imports and `torch._dynamo.config` lines these fixes write, once each."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Optional

from .source import Edit, Source, dotted

CONFIG = "torch._dynamo.config"
CAPTURE = f"{CONFIG}.capture_scalar_outputs = True"


def is_config_stmt(node: ast.stmt) -> bool:
    """`torch._dynamo.config.x = ...` or `torch._dynamo.config.x.add(...)` (what these fixes write)."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return dotted(node.targets[0]).startswith(CONFIG + ".")
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return dotted(node.value.func).startswith(CONFIG + ".")
    return False


def config_lines(src: Source) -> set[str]:
    """The file's top-level `torch._dynamo.config` lines, as `ast.unparse` writes them."""
    return src.memo("config-lines", lambda: {ast.unparse(s) for s in src.tree.body if is_config_stmt(s)})


def _only_imports(node: ast.stmt) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, ast.Try):
        parts = node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
        return all(_only_imports(s) or isinstance(s, ast.Pass) for s in parts)
    return False


@dataclass
class _Header:
    imports: list[ast.stmt]  # the leading import statements (and try-blocks of imports)
    top: int  # 0-based line to insert at when there are no imports (after docstring / shebang)
    config_end: Optional[int]  # 1-based last line of the config statements right after the imports

    @property
    def end(self) -> Optional[int]:
        return (self.imports[-1].end_lineno or self.imports[-1].lineno) if self.imports else None


def _header(src: Source) -> _Header:
    body = src.tree.body
    i, top = 0, 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        top = body[0].end_lineno or body[0].lineno
        i = 1
    elif src.rows and src.rows[0].startswith("#!"):
        top = 1
        if len(src.rows) > 1 and re.match(r"#.*coding[:=]", src.rows[1]):
            top = 2
    imports: list[ast.stmt] = []
    while i < len(body) and _only_imports(body[i]):
        imports.append(body[i])
        i += 1
    config_end = None
    if imports:
        while i < len(body) and is_config_stmt(body[i]):
            config_end = body[i].end_lineno or body[i].lineno
            i += 1
    return _Header(imports, top, config_end)


def _binds(src: Source, name: str) -> bool:
    """A module-level `import name` (or `import name.sub`) binds `name`."""
    for node in src.tree.body:
        for stmt in ([node] + (node.body if isinstance(node, ast.Try) else [])):
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    if bound == name and alias.name.split(".")[0] == name:
                        return True
    return False


def _imports_module(stmt: ast.stmt, root: str) -> bool:
    if isinstance(stmt, ast.Import):
        return any(a.name.split(".")[0] == root for a in stmt.names)
    if isinstance(stmt, ast.ImportFrom):
        return (stmt.module or "").split(".")[0] == root and not stmt.level
    return False


def header_edits(src: Source, modules: list[str], configs: list[str]) -> list[Edit]:
    """`import m` for each module not imported yet, and config lines after the imports (once each)."""
    present = config_lines(src)
    configs = [c for c in dict.fromkeys(configs) if ast.unparse(ast.parse(c).body[0]) not in present]
    modules = [m for m in dict.fromkeys(modules) if not _binds(src, m)]
    if not modules and not configs:
        return []
    h = _header(src)
    inserts: dict[int, list[str]] = {}
    if h.end is None:  # no imports at all: a new block after the docstring
        lines = [f"import {m}" for m in modules] + ([""] if modules and configs else []) + configs
        at = h.top
        if at > 0:
            lines.insert(0, "")
        if not src.blank(at):
            lines += [""] * _blank_lines_before(src, at)
        return [src.insert_lines(at, lines)]
    for module in modules:
        at = _import_position(src, h, module)
        inserts.setdefault(at, []).append(f"import {module}")
    if configs:
        if h.config_end is not None:
            inserts.setdefault(h.config_end, []).extend(configs)
        else:
            tail = [""] + configs + ([""] * _blank_lines_before(src, h.end) if not src.blank(h.end) else [])
            inserts.setdefault(h.end, []).extend(tail)
    return [src.insert_lines(at, lines) for at, lines in sorted(inserts.items())]


def _blank_lines_before(src: Source, index: int) -> int:
    """PEP 8: two blank lines above a top-level def/class, one above anything else."""
    text = src.rows[index] if index < len(src.rows) else ""
    return 2 if re.match(r"(async\s+def|def|class)\b|@", text) else 1


def _import_position(src: Source, h: _Header, module: str) -> int:
    """0-based line to put `import module` at: before what imports from the same package, else
    (stdlib `logging`) before the first import, else after the last one."""
    plain = [s for s in h.imports if not (isinstance(s, ast.ImportFrom) and s.module == "__future__")]
    same = [s for s in plain if _imports_module(s, module)]
    if same:
        return same[0].lineno - 1
    if module in ("logging", "warnings") and plain:
        return plain[0].lineno - 1
    return h.end or 0


def _resolve_config(src: Source, data: dict) -> Optional[list[Edit]]:
    return header_edits(src, list(data.get("modules") or []), list(data["config"])) or None
