"""Code actions: findings and model constructions → edits. Pure: source text in, lsprotocol out.

`code_actions` answers `textDocument/codeAction` cheaply: it decides which actions apply and puts
what each needs in `data`; `resolve` computes the edit (`codeAction/resolve`) from the current
text of the file the edit goes to. No torch, no server state. Positions are characters, as in the
rest of the server's output.

What each fix does to torch 2.13's trace (checked with `torch._dynamo.explain`):
- `capture_scalar_outputs = True` removes the `.item()` break (GB0124) — unless the value is then
  branched on (the break moves to the branch), so it is not offered then;
- `reorderable_logging_functions.add(print)` removes a print break only when every argument is a
  tensor, a constant or a format string (else GB0296); otherwise `ignore_logging_functions`
  (print does not run under torch.compile) is offered instead;
- `ignore_logging_functions.add(logging.Logger.warning)` removes a logger-method break (GB0291);
- `@torch.compiler.disable` on a helper removes the breaks inside it, but the graph still breaks
  once where it is called (GB0098): the title says so;
- `dynamic=True` stops size recompiles (CL210), not specializations (CL211: ints in `range()`,
  strings, dtypes), so it is offered for CL210 only; `mark_dynamic(x, dim)` before each call marks
  the first input too (one graph instead of two).
"""

from __future__ import annotations

import ast
import bisect
import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Sequence

from lsprotocol import types as lsp

from .discovery import compile_call_sites, discover

SOURCE = "Compile Lens"
QUICKFIX = lsp.CodeActionKind.QuickFix
REWRITE = lsp.CodeActionKind.RefactorRewrite

CONFIG = "torch._dynamo.config"
CAPTURE = f"{CONFIG}.capture_scalar_outputs = True"
_IGNORE = re.compile(r"#\s*compile-lens:\s*ignore(?:\[(?P<codes>[^\]]*)\])?")
_SIZE_INDEX = re.compile(r"size mismatch at index (?P<dim>\d+)")
_CHAINABLE = {"to", "cuda", "cpu", "eval", "train", "half", "float", "double", "bfloat16", "requires_grad_"}
_NOT_REORDERABLE = {"shape", "dtype", "device", "size", "tolist", "item", "numpy", "names", "layout"}
_DISABLES = {"torch.compiler.disable", "torch._dynamo.disable", "compiler.disable", "disable"}
_COMPILES = {"torch.compile", "torch.compiler.compile"}
_LOGGING_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}
_INSTALLED = ("site-packages", "dist-packages")  # an installed library's file: never edited


# ===== entry points =============================================================================

def code_actions(source: str, uri: str, rng: lsp.Range, diagnostics: Sequence[lsp.Diagnostic],
                 figures: Optional[dict[str, str]] = None,
                 only: Optional[Sequence[str]] = None, discovery: Any = None,
                 guesses: Optional[dict[str, Any]] = None) -> list[lsp.CodeAction]:
    """The actions for `rng` in this file, unresolved (no edit; `data` says how to make it).

    `diagnostics`: the request context's (only Compile Lens' are used); `figures`: measured
    speedups by target name ("1.42×"); `only`: the kinds the client asked for; `discovery`: the
    targets of exactly this text, when the caller has them (else they are found here); `guesses`:
    the input recipes the worker guessed after import, by target name (from its last results)."""
    src = _Source.parse(source)
    actions: list[lsp.CodeAction] = []
    if src is not None:
        if discovery is not None:
            src.memo("discovery", lambda: discovery)
        for d in diagnostics:
            if d.source == SOURCE and d.code:
                actions += _fixes_for(src, uri, d)
        fixed = {a.data.get("target") for a in actions if isinstance(a.data, dict) and a.data.get("fix") == "directive"}
        actions += [a for a in _rewrites_at(src, uri, rng.start.line, figures or {}, guesses)
                    if not (isinstance(a.data, dict) and a.data.get("fix") == "directive" and a.data.get("target") in fixed)]
    if only:
        actions = [a for a in actions if any(a.kind == k or (a.kind or "").startswith(f"{k}.") for k in only)]
    return actions


def resolve(action: lsp.CodeAction, source: str) -> lsp.CodeAction:
    """Fill in `action.edit` from `source`, the current text of the file `action.data["uri"]`.

    Returns the action unchanged (no edit) when it no longer applies to that text, or when the
    edited file would not parse."""
    data = action.data if isinstance(action.data, dict) else {}
    make = _RESOLVERS.get(data.get("fix", ""))
    src = _Source.parse(source)
    if make is None or src is None or not data.get("uri"):
        return action
    try:
        edits = make(src, data)
    except (KeyError, TypeError, ValueError, IndexError):
        edits = None
    if not edits:
        return action
    text_edits = [e.to_lsp() for e in _merge_inserts(edits)]
    try:  # compiled, not only parsed: a `return` or `nonlocal` out of place fails here too
        compile(apply_edits(source, text_edits), "<edited>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return action
    action.edit = lsp.WorkspaceEdit(changes={data["uri"]: text_edits})
    return action


def _merge_inserts(edits: list[_Edit]) -> list[_Edit]:
    """Insertions at one position become one edit: not every client keeps their order."""
    merged: list[_Edit] = []
    for e in edits:
        same = next((m for m in merged if (m.line, m.col) == (m.end_line, m.end_col) == (e.line, e.col)
                     and (e.end_line, e.end_col) == (e.line, e.col)), None)
        if same is not None:
            same.text += e.text
        else:
            merged.append(_Edit(e.line, e.col, e.end_line, e.end_col, e.text))
    return merged


def apply_edits(source: str, edits: Sequence[lsp.TextEdit]) -> str:
    """The text after `edits` (LSP semantics: positions refer to the original text)."""
    starts = [0]
    for m in re.finditer(r"\r\n|\r|\n", source):
        starts.append(m.end())

    def offset(p: lsp.Position) -> int:
        if p.line >= len(starts):
            return len(source)
        line_end = starts[p.line + 1] if p.line + 1 < len(starts) else len(source)
        return min(starts[p.line] + p.character, line_end)

    spans = sorted(((offset(e.range.start), offset(e.range.end), i, e.new_text) for i, e in enumerate(edits)),
                   key=lambda s: (s[0], s[2]))
    out, at = [], 0
    for start, end, _, text in spans:
        out.append(source[at:start])
        out.append(text)
        at = max(at, end)
    out.append(source[at:])
    return "".join(out)


# ===== the source, its lines and positions =====================================================

@dataclass
class _Edit:
    line: int  # 0-based
    col: int  # characters
    end_line: int
    end_col: int
    text: str

    def to_lsp(self) -> lsp.TextEdit:
        return lsp.TextEdit(lsp.Range(lsp.Position(self.line, self.col), lsp.Position(self.end_line, self.end_col)),
                            self.text)


class _Source:
    """A parsed file. Parsed once per text (a cursor move re-asks with the same text); what the
    actions need is looked up in the top-level statement at hand, not the whole file."""

    _recent: dict[str, _Source] = {}

    def __init__(self, text: str, tree: ast.Module):
        self.text = text
        self.tree = tree
        self.rows = re.split(r"\r\n|\r|\n", text)  # the last one is "" when the text ends with a newline
        self.nl = "\r\n" if "\r\n" in text else "\r" if "\r" in text and "\n" not in text else "\n"
        self._starts = [min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])]) for n in tree.body]
        self._memo: dict[Any, Any] = {}

    @classmethod
    def parse(cls, text: str) -> Optional[_Source]:
        found = cls._recent.get(text)
        if found is not None:
            return found
        try:
            src = cls(text, ast.parse(text))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if len(cls._recent) >= 2:  # a big file's tree is megabytes: the last texts only
            cls._recent.pop(next(iter(cls._recent)))
        cls._recent[text] = src
        return src

    def memo(self, key: Any, make: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def top(self, line: int) -> Optional[ast.stmt]:
        """The top-level statement (with its decorators) that spans 1-based `line`."""
        i = bisect.bisect_right(self._starts, line) - 1
        if i < 0:
            return None
        node = self.tree.body[i]
        return node if line <= (node.end_lineno or node.lineno) else None

    def walk_line(self, line: int) -> Iterator[ast.AST]:
        top = self.top(line)
        return ast.walk(top) if top is not None else iter(())

    def parent(self, node: ast.AST) -> Optional[ast.AST]:
        top = self.top(getattr(node, "lineno", 0))
        if top is None:
            return None
        if node is top:
            return self.tree

        def build() -> dict[ast.AST, ast.AST]:
            found = {}
            for outer in ast.walk(top):
                for child in ast.iter_child_nodes(outer):
                    found[child] = outer
            return found

        return self.memo(("parents", id(top)), build).get(node)

    def row(self, line: int) -> str:
        """1-based line's text."""
        return self.rows[line - 1] if 0 < line <= len(self.rows) else ""

    def col(self, line: int, byte_offset: int) -> int:
        """ast columns are UTF-8 byte offsets; edits use characters."""
        text = self.row(line)
        return byte_offset if text.isascii() else len(text.encode("utf-8")[:byte_offset].decode("utf-8", "ignore"))

    def start(self, node: ast.AST) -> tuple[int, int]:
        return node.lineno - 1, self.col(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> tuple[int, int]:
        line = node.end_lineno or node.lineno  # type: ignore[attr-defined]
        return line - 1, self.col(line, node.end_col_offset or 0)  # type: ignore[attr-defined]

    def indent(self, line: int) -> str:
        text = self.row(line)
        return text[: len(text) - len(text.lstrip())]

    def insert_lines(self, before: int, lines: list[str]) -> _Edit:
        """Whole lines inserted before 0-based line `before` (at the end of the file when past it)."""
        if before < len(self.rows) - 1 or (before == len(self.rows) - 1 and self.rows[-1] == ""):
            body = self.nl.join(lines) + self.nl
            return _Edit(before, 0, before, 0, body)
        last = len(self.rows) - 1
        return _Edit(last, len(self.rows[last]), last, len(self.rows[last]), self.nl + self.nl.join(lines))

    def blank(self, index: int) -> bool:
        """0-based line `index` is blank (or past the end)."""
        return index >= len(self.rows) or not self.rows[index].strip()

    def enclosing(self, node: ast.AST, kinds: tuple) -> Optional[ast.AST]:
        parent = self.parent(node)
        while parent is not None and not isinstance(parent, kinds):
            parent = self.parent(parent) if parent is not self.tree else None
        return parent

    def calls(self) -> list[ast.Call]:
        """Every call in the file (once per text)."""
        return self.memo("calls", lambda: [n for n in ast.walk(self.tree) if isinstance(n, ast.Call)])

    def discovery(self) -> Any:
        return self.memo("discovery", lambda: discover(self.text))


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def _is_compile(func: ast.AST) -> bool:
    return _dotted(func) in _COMPILES


def _decorator_names(node: ast.AST) -> list[str]:
    return [_dotted(d.func if isinstance(d, ast.Call) else d) for d in getattr(node, "decorator_list", [])]


def _action(title: str, kind: str, data: dict, diagnostic: Optional[lsp.Diagnostic] = None,
            preferred: bool = False) -> lsp.CodeAction:
    return lsp.CodeAction(title=title, kind=kind, diagnostics=[diagnostic] if diagnostic else None,
                          is_preferred=preferred or None, data=data)


# ===== the module header: imports and config lines =============================================

def _is_config_stmt(node: ast.stmt) -> bool:
    """`torch._dynamo.config.x = ...` or `torch._dynamo.config.x.add(...)` (what these fixes write)."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return _dotted(node.targets[0]).startswith(CONFIG + ".")
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return _dotted(node.value.func).startswith(CONFIG + ".")
    return False


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


def _header(src: _Source) -> _Header:
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
        while i < len(body) and _is_config_stmt(body[i]):
            config_end = body[i].end_lineno or body[i].lineno
            i += 1
    return _Header(imports, top, config_end)


def _binds(src: _Source, name: str) -> bool:
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


def _header_edits(src: _Source, modules: list[str], configs: list[str]) -> list[_Edit]:
    """`import m` for each module not imported yet, and config lines after the imports (once each)."""
    present = {ast.unparse(s) for s in src.tree.body if _is_config_stmt(s)}
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


def _blank_lines_before(src: _Source, index: int) -> int:
    """PEP 8: two blank lines above a top-level def/class, one above anything else."""
    text = src.rows[index] if index < len(src.rows) else ""
    return 2 if re.match(r"(async\s+def|def|class)\b|@", text) else 1


def _import_position(src: _Source, h: _Header, module: str) -> int:
    """0-based line to put `import module` at: before what imports from the same package, else
    (stdlib `logging`) before the first import, else after the last one."""
    plain = [s for s in h.imports if not (isinstance(s, ast.ImportFrom) and s.module == "__future__")]
    same = [s for s in plain if _imports_module(s, module)]
    if same:
        return same[0].lineno - 1
    if module in ("logging",) and plain:
        return plain[0].lineno - 1
    return h.end or 0


# ===== quick fixes for a diagnostic ============================================================

def _fixes_for(src: _Source, uri: str, d: lsp.Diagnostic) -> list[lsp.CodeAction]:
    code = str(d.code)
    data = d.data if isinstance(d.data, dict) else {}
    found: list[lsp.CodeAction] = []
    gb = data.get("gb_id") or (code if code.startswith("GB") else None)
    line = d.range.start.line + 1
    if gb == "GB0124" or code == "CL102":
        found += _capture_scalar(src, uri, d, line)
    if gb in ("GB0059", "GB0296") or code == "CL101":
        found += _print_fix(src, uri, d, line, gb)
    if gb == "GB0291" or code == "CL107":
        found += _logging_fix(src, uri, d, line)
    found += _disable_helper(src, uri, d, data, code)
    if data.get("kind") == "recompile":
        found += _recompile_fixes(src, uri, d, data)
    if data.get("kind") == "guessed_inputs" and data.get("text") and _still_guessed(src, str(data.get("target"))):
        found.append(_action(f"Write the guessed inputs as a directive to correct: inputs={data['text']}", QUICKFIX,
                             {"fix": "directive", "uri": uri, "target": data["target"], "text": data["text"]}, d))
    found += _ignore(src, uri, d, code)
    return found


# --- ignore -------------------------------------------------------------------------------------

def _ignore(src: _Source, uri: str, d: lsp.Diagnostic, code: str) -> list[lsp.CodeAction]:
    line = d.range.start.line + 1
    text = src.row(line)
    if line > len(src.rows) or text.rstrip().endswith("\\"):
        return []
    match = _IGNORE.search(text)
    if match and match["codes"] is None:
        return []  # everything on this line is ignored already
    return [_action(f"Ignore {code} on this line (# compile-lens: ignore[{code}])", QUICKFIX,
                    {"fix": "ignore", "uri": uri, "line": line, "code": code}, d)]


def _resolve_ignore(src: _Source, data: dict) -> Optional[list[_Edit]]:
    line, code = int(data["line"]), str(data["code"])
    text = src.row(line)
    match = _IGNORE.search(text)
    if match:
        if match["codes"] is None:
            return None
        codes = [c.strip() for c in match["codes"].split(",") if c.strip()]
        if code.upper() in {c.upper() for c in codes}:
            return None
        new = f"# compile-lens: ignore[{', '.join(codes + [code])}]"
        return [_Edit(line - 1, match.start(), line - 1, match.end(), new)]
    if _ends_inside_string(src, line):
        return None
    end = len(text.rstrip())
    return [_Edit(line - 1, end, line - 1, len(text), f"  # compile-lens: ignore[{code}]")]


def _ends_inside_string(src: _Source, line: int) -> bool:
    for node in src.walk_line(line):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) \
                and node.lineno <= line < (node.end_lineno or node.lineno):
            return True
        if isinstance(node, ast.JoinedStr) and node.lineno <= line < (node.end_lineno or node.lineno):
            return True
    return False


# --- .item(): capture_scalar_outputs -------------------------------------------------------------

def _calls_on_line(src: _Source, line: int, test: Callable[[ast.Call], bool]) -> list[ast.Call]:
    return [n for n in src.walk_line(line) if isinstance(n, ast.Call)
            and n.lineno <= line <= (n.end_lineno or n.lineno) and test(n)]


def _is_item(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == "item" and not call.args


def _item_branched(src: _Source, call: ast.Call) -> bool:
    """The scalar is branched on or used as a size/count: capturing it moves the break, not removes it."""
    func = src.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or src.tree
    names: set[str] = set()
    stmt = src.enclosing(call, (ast.stmt,))
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
            names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    # the call itself inside a test
    parent = src.parent(call)
    while parent is not None and not isinstance(parent, (ast.stmt, ast.Module)):
        if isinstance(parent, (ast.IfExp, ast.Compare, ast.BoolOp)):
            return True
        parent = src.parent(parent)
    if isinstance(parent, (ast.If, ast.While, ast.Assert)) and call in set(ast.walk(parent.test)):
        return True
    if not names:
        return False
    for node in ast.walk(func):
        tests = []
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            tests.append(node.test)
        elif isinstance(node, ast.Compare):
            tests.append(node)
        elif isinstance(node, ast.Call) and (_dotted(node.func) in ("range", "int", "bool", "len")
                                             or isinstance(node.func, ast.Attribute)
                                             and node.func.attr in ("view", "reshape", "expand", "repeat",
                                                                    "zeros", "ones", "empty", "randn", "rand",
                                                                    "arange", "full", "narrow")):
            tests += node.args
        for test in tests:
            if any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(test)):
                return True
    return False


def _capture_scalar(src: _Source, uri: str, d: lsp.Diagnostic, line: int) -> list[lsp.CodeAction]:
    if any(ast.unparse(s) == CAPTURE for s in src.tree.body if _is_config_stmt(s)):
        return []
    here = _calls_on_line(src, line, _is_item)
    if not here:
        return []
    # the setting is global: every `.item()` in the file must stay break-free with it
    if src.memo("item-branched", lambda: any(_item_branched(src, c) for c in src.calls() if _is_item(c))):
        return []
    return [_action("Capture .item() in the graph (torch._dynamo.config.capture_scalar_outputs = True)",
                    QUICKFIX, {"fix": "config", "uri": uri, "config": [CAPTURE], "modules": ["torch"]}, d,
                    preferred=True)]


def _resolve_config(src: _Source, data: dict) -> Optional[list[_Edit]]:
    return _header_edits(src, list(data.get("modules") or []), list(data["config"])) or None


# --- print and logging ---------------------------------------------------------------------------

def _is_print(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == "print"


def _reorderable(node: ast.expr, assigned: dict[str, list[ast.expr]], depth: int = 0) -> bool:
    """Arguments torch can reorder a print with: tensors, constants, format strings (a static guess)."""
    if depth > 5:
        return False
    if isinstance(node, (ast.Constant, ast.JoinedStr)):
        return True
    if isinstance(node, ast.Name):
        return all(_reorderable(v, assigned, depth + 1) for v in assigned.get(node.id, []))
    if isinstance(node, ast.Attribute):
        return False  # .shape, .dtype, self.something: not a tensor for sure
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            if node.func.attr in _NOT_REORDERABLE:
                return False
            head = _dotted(node.func.value)
            return head in ("torch", "F", "torch.nn.functional") or _reorderable(node.func.value, assigned, depth + 1)
        return False
    if isinstance(node, ast.BinOp):
        return _reorderable(node.left, assigned, depth + 1) and _reorderable(node.right, assigned, depth + 1)
    if isinstance(node, ast.UnaryOp):
        return _reorderable(node.operand, assigned, depth + 1)
    if isinstance(node, ast.Subscript):
        return isinstance(node.value, ast.Name) and _reorderable(node.value, assigned, depth + 1)
    return False


def _assignments(func: ast.AST) -> dict[str, list[ast.expr]]:
    found: dict[str, list[ast.expr]] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.value)
                elif isinstance(target, (ast.Tuple, ast.List)):
                    for elt in target.elts:
                        if isinstance(elt, ast.Name):
                            found.setdefault(elt.id, []).append(ast.Attribute(ast.Name("?"), "?"))
        elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
            found.setdefault(node.target.id, []).append(ast.Attribute(ast.Name("?"), "?"))
    return found


def _print_reorderable(src: _Source, call: ast.Call) -> bool:
    func = src.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef)) or src.tree
    assigned = _assignments(func)
    if any(not isinstance(k.value, ast.Constant) for k in call.keywords):
        return False
    return all(not isinstance(a, ast.Starred) and _reorderable(a, assigned) for a in call.args)


def _print_fix(src: _Source, uri: str, d: lsp.Diagnostic, line: int, gb: Optional[str]) -> list[lsp.CodeAction]:
    if not _calls_on_line(src, line, _is_print):
        return []
    present = {ast.unparse(s) for s in src.tree.body if _is_config_stmt(s)}
    reorder = f"{CONFIG}.reorderable_logging_functions.add(print)"
    skip = f"{CONFIG}.ignore_logging_functions.add(print)"
    if reorder in present or skip in present:
        return []  # torch checks `reorderable` first: adding `ignore` now would change nothing
    reorderable = src.memo("prints-reorderable", lambda: all(
        _print_reorderable(src, p) for p in src.calls() if _is_print(p)))
    if gb != "GB0296" and reorderable:
        return [_action("Print after the graph runs (torch._dynamo.config.reorderable_logging_functions)",
                        QUICKFIX, {"fix": "config", "uri": uri, "config": [reorder], "modules": ["torch"]}, d,
                        preferred=True)]
    return [_action("Skip print() in compiled code (torch._dynamo.config.ignore_logging_functions)", QUICKFIX,
                    {"fix": "config", "uri": uri, "config": [skip], "modules": ["torch"]}, d)]


def _logging_call(call: ast.Call) -> bool:
    """`logger.warning(...)`, `logging.info(...)`: a method the edit can name as it exists in the
    standard library (`logging.Logger.warning`), so the added line runs."""
    if not isinstance(call.func, ast.Attribute) or not isinstance(call.func.value, (ast.Name, ast.Attribute)):
        return False
    receiver, method = _dotted(call.func.value), call.func.attr
    if not receiver or method not in _LOGGING_METHODS:
        return False
    return callable(getattr(logging, method, None)) if receiver == "logging" else hasattr(logging.Logger, method)


def _logging_fix(src: _Source, uri: str, d: lsp.Diagnostic, line: int) -> list[lsp.CodeAction]:
    data = d.data if isinstance(d.data, dict) else {}
    if data.get("call_site"):
        return []  # the logging call is in another file (often a library's): this line has none
    calls = _calls_on_line(src, line, _logging_call)  # not the first call on the line: the logging one
    if len(calls) != 1:
        return []
    call = calls[0]
    assert isinstance(call.func, ast.Attribute)
    receiver, method = _dotted(call.func.value), call.func.attr
    if receiver == "logging":
        target, shown = f"logging.{method}", f"logging.{method}"
    else:
        target, shown = f"logging.Logger.{method}", f"{receiver}.{method}"
    return [_action(f"Skip `{shown}()` in compiled code (torch._dynamo.config.ignore_logging_functions)",
                    QUICKFIX, {"fix": "config", "uri": uri, "modules": ["torch", "logging"],
                               "config": [f"{CONFIG}.ignore_logging_functions.add({target})"]}, d,
                    preferred=True)]


# --- a break inside a helper: @torch.compiler.disable -------------------------------------------

def _find_def(src: _Source, name: str) -> Optional[ast.AST]:
    """The def of `name` ("helper", or "Net.helper" for a method): module level, else a method."""
    parts = name.split(".")
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    if len(parts) == 2:
        for node in src.tree.body:
            if isinstance(node, ast.ClassDef) and node.name == parts[0]:
                for item in node.body:
                    if isinstance(item, defs) and item.name == parts[1]:
                        return item
        return None
    for node in src.tree.body:
        if isinstance(node, defs) and node.name == name:
            return node
    methods = [item for node in src.tree.body if isinstance(node, ast.ClassDef)
               for item in node.body if isinstance(item, defs) and item.name == name]
    return methods[0] if len(methods) == 1 else None


def _disable_helper(src: _Source, uri: str, d: lsp.Diagnostic, data: dict, code: str) -> list[lsp.CodeAction]:
    function, where = None, uri
    if data.get("kind") == "graph_break":
        function = data.get("function")
        target = str(data.get("target") or "")
        if not function or "<" in function or function in ("forward", "?", target, target.split(".")[-1]):
            return []
        if data.get("call_site"):
            related = d.related_information or []
            if not related:
                return []
            where = related[-1].location.uri
            if any(part in where for part in _INSTALLED):
                return []  # the helper is an installed library's: not the user's code to edit
    elif code.startswith("CL1") and data.get("function") and data.get("root"):
        if data["function"] == data["root"] or "<" in data["function"]:
            return []
        function = data["function"]
    if not function:
        return []
    if where == uri:
        node = _find_def(src, function)
        if node is None or set(_decorator_names(node)) & (_DISABLES | _COMPILES):
            return []
    short = function.split(".")[-1]
    return [_action(f"Run `{short}` outside the graph (@torch.compiler.disable; the graph still breaks where it is called)",
                    QUICKFIX, {"fix": "disable", "uri": where, "function": function}, d)]


def _resolve_disable(src: _Source, data: dict) -> Optional[list[_Edit]]:
    node = _find_def(src, str(data["function"]))
    if node is None or set(_decorator_names(node)) & (_DISABLES | _COMPILES):
        return None
    # right above the `def`, under its other decorators: `@property`, `@staticmethod` then wrap the
    # disabled function (disable on a property object would fail when the module is imported)
    edits = [src.insert_lines(node.lineno - 1, [src.indent(node.lineno) + "@torch.compiler.disable"])]
    return _header_edits(src, ["torch"], []) + edits


# --- recompiles on a dimension: dynamic=True, or mark_dynamic before the call -------------------

@dataclass
class _Site:
    node: ast.AST  # the torch.compile Call, or the decorator expression
    decorator: bool


def _compile_sites(src: _Source, target: str) -> list[_Site]:
    """The `torch.compile(...)` calls and `@torch.compile` decorators that compile `target`."""
    def find() -> list[_Site]:
        sites = []
        for site in compile_call_sites(src.tree, {target}):
            for node in src.walk_line(site.line):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == target:
                    sites += [_Site(dec, True) for dec in node.decorator_list
                              if dec.lineno == site.line and dec.col_offset + 1 == site.column]
                elif isinstance(node, ast.Call) and node.lineno == site.line and \
                        node.col_offset + 1 == site.column and _is_compile(node.func):
                    sites.append(_Site(node, False))
        return sites

    return src.memo(("sites", target), find)


def _dynamic_value(node: ast.AST) -> Any:
    if isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg == "dynamic":
                return kw.value.value if isinstance(kw.value, ast.Constant) else "?"
    return None


def _recompile_fixes(src: _Source, uri: str, d: lsp.Diagnostic, data: dict) -> list[lsp.CodeAction]:
    target, changed = data.get("target"), data.get("changed")
    dim_match = _SIZE_INDEX.search(d.message or "")
    if data.get("recompile_kind") != "automatic-dynamic" or not target or not changed or not dim_match:
        return []  # dynamic=True does not stop specializations (ints in range(), strings, dtypes)
    dim = int(dim_match["dim"])
    found = []
    sites = _compile_sites(src, target)
    if sites and not any(_dynamic_value(s.node) is True for s in sites):
        found.append(_action(f"Compile `{target}` with dynamic=True", QUICKFIX,
                             {"fix": "dynamic", "uri": uri, "target": target}, d, preferred=True))
    for call, arg in _compiled_calls(src, target, changed)[:1]:
        found.append(_action(f"Mark dimension {dim} of `{arg}` dynamic before the call (torch._dynamo.mark_dynamic)",
                             QUICKFIX, {"fix": "mark_dynamic", "uri": uri, "target": target, "changed": changed,
                                        "dim": dim, "line": call.lineno}, d))
    return found


def _resolve_dynamic(src: _Source, data: dict) -> Optional[list[_Edit]]:
    edits: list[_Edit] = []
    for site in _compile_sites(src, str(data["target"])):
        node = site.node
        if _dynamic_value(node) is True:
            continue
        if isinstance(node, ast.Call):
            kw = next((k for k in node.keywords if k.arg == "dynamic"), None)
            if kw is not None:  # dynamic=False / None: make it True
                (l1, c1), (l2, c2) = src.start(kw.value), src.end(kw.value)
                edits.append(_Edit(l1, c1, l2, c2, "True"))
            else:
                edits.append(_add_keyword(src, node, "dynamic=True"))
        else:  # a bare `@torch.compile`
            line, col = src.end(node)
            edits.append(_Edit(line, col, line, col, "(dynamic=True)"))
    return edits or None


def _add_keyword(src: _Source, call: ast.Call, text: str) -> _Edit:
    """`f(a)` → `f(a, text)`; `f()` → `f(text)`; a call laid out one argument a line gets a new line."""
    last = ([*call.args, *call.keywords] or [None])[-1]
    close_line, close_col = src.end(call)
    close_col -= 1  # the `)`
    if last is None:
        return _Edit(close_line, close_col, close_line, close_col, text)
    end_line, end_col = src.end(last.value if isinstance(last, ast.keyword) and last.arg is None else last)
    between = src.rows[end_line][end_col:] if end_line != close_line else src.rows[end_line][end_col:close_col]
    trailing_comma = between.strip().startswith(",")
    if end_line != close_line and trailing_comma:
        indent = src.indent(end_line + 1)
        return src.insert_lines(close_line, [indent + text + ","]) if src.rows[close_line][:close_col].strip() == "" \
            else _Edit(close_line, close_col, close_line, close_col, f"{text},")
    if trailing_comma:
        comma = src.rows[end_line].index(",", end_col)
        return _Edit(end_line, comma + 1, end_line, comma + 1, f" {text}")
    return _Edit(end_line, end_col, end_line, end_col, f", {text}")


def _params(src: _Source, target: str) -> list[str]:
    for node in src.tree.body:
        if isinstance(node, ast.ClassDef) and node.name == target:
            forward = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
            return [a.arg for a in (forward.args.posonlyargs + forward.args.args)[1:]] if forward else []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == target:
            return [a.arg for a in node.args.posonlyargs + node.args.args]
    return []


def _compiled_calls(src: _Source, target: str, changed: str) -> list[tuple[ast.Call, str]]:
    """Calls of the compiled `target` in this file whose `changed` argument is a plain name, each
    a statement of its own (so a line can go above it)."""
    compiled: set[str] = set()
    for site in _compile_sites(src, target):
        if site.decorator:
            compiled.add(target)
            continue
        stmt = src.enclosing(site.node, (ast.stmt,))
        if isinstance(stmt, ast.Assign) and stmt.value is site.node:
            compiled |= {_dotted(t) for t in stmt.targets if _dotted(t)}
    params = _params(src, target)
    index = params.index(changed) if changed in params else None
    found = []
    for node in src.calls():
        if _dotted(node.func) not in compiled:
            continue
        arg = next((k.value for k in node.keywords if k.arg == changed), None)
        if arg is None and index is not None and index < len(node.args):
            arg = node.args[index]
        if not isinstance(arg, ast.Name):
            continue
        stmt = src.enclosing(node, (ast.stmt,))
        simple = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)
        if isinstance(stmt, simple) and not src.row(stmt.lineno)[:src.col(stmt.lineno, stmt.col_offset)].strip():
            found.append((node, arg.id))
    return sorted(found, key=lambda f: f[0].lineno)


def _resolve_mark_dynamic(src: _Source, data: dict) -> Optional[list[_Edit]]:
    calls = [c for c in _compiled_calls(src, str(data["target"]), str(data["changed"])) if c[0].lineno == data["line"]]
    if not calls:
        return None
    call, arg = calls[0]
    stmt = src.enclosing(call, (ast.stmt,))
    assert stmt is not None
    line = f"{src.indent(stmt.lineno)}torch._dynamo.mark_dynamic({arg}, {int(data['dim'])})"
    if src.row(stmt.lineno - 1).strip() == line.strip():
        return None
    return _header_edits(src, ["torch"], []) + [src.insert_lines(stmt.lineno - 1, [line])]


# ===== rewrites at the cursor: wrap in torch.compile, write inferred inputs ====================

def _rewrites_at(src: _Source, uri: str, line0: int, figures: dict[str, str],
                 guesses: Optional[dict[str, Any]] = None) -> list[lsp.CodeAction]:
    line = line0 + 1
    found = src.discovery()
    modules = {t.name for t in found.targets if t.kind == "module"} if found else set()
    actions = []
    for kind, node, name in _wrap_candidates(src, line, modules):
        figure = figures.get(name) if name else None
        title = "Wrap in torch.compile" + (f" ({figure} measured)" if figure else "")
        actions.append(_action(title, REWRITE, {"fix": "wrap", "uri": uri, "what": kind, "line": node.lineno,
                                                "name": name}))
    for spec in found.targets if found else []:
        if spec.line == line and spec.inputs is not None and spec.inputs.source == "inferred":
            # a guess made after import (from a library's config) is known once the worker ran
            made = (guesses or {}).get(spec.name)
            text = spec.inputs.text or (getattr(made, "text", "") if spec.inputs.after_import else "")
            if not text:
                continue
            origin = spec.inputs.origin or (getattr(made, "origin", "") if made is not None else "")
            directive = f"inputs={text}"
            actions.append(_action(f"Write these inputs as a directive: {directive}" + (f" ({origin})" if origin else ""),
                                   REWRITE, {"fix": "directive", "uri": uri, "target": spec.name, "text": text}))
    return actions


def _torch_nn_names(src: _Source) -> tuple[set[str], set[str]]:
    """(prefixes that mean torch.nn, e.g. {"nn", "torch.nn"}; names imported from torch.nn)."""
    return src.memo("nn", lambda: _read_torch_nn_names(src))


def _read_torch_nn_names(src: _Source) -> tuple[set[str], set[str]]:
    prefixes, names = {"torch.nn"}, set()
    for node in src.tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "torch" and not node.level:
            prefixes |= {a.asname or a.name for a in node.names if a.name == "nn"}
        elif isinstance(node, ast.Import):
            prefixes |= {a.asname for a in node.names if a.name == "torch.nn" and a.asname}
        elif isinstance(node, ast.ImportFrom) and node.module == "torch.nn" and not node.level:
            names |= {a.asname or a.name for a in node.names if a.name[:1].isupper()}
    return prefixes, names


def _constructed(call: ast.expr, modules: set[str], nn: tuple[set[str], set[str]], local_only: bool) -> Optional[str]:
    """The class a module construction builds ('' for torch.nn layers), or None when it is not one."""
    while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _CHAINABLE \
            and isinstance(call.func.value, ast.Call):
        call = call.func.value  # Net(...).to(device).eval()
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    if isinstance(func, ast.Name) and func.id in modules:
        return func.id
    if local_only:
        return None
    prefixes, names = nn
    if isinstance(func, ast.Name) and func.id in names:
        return ""
    if isinstance(func, ast.Attribute) and func.attr[:1].isupper() and _dotted(func.value) in prefixes:
        return ""
    return None


def _compiled_later(src: _Source, target: str) -> bool:
    """`torch.compile(target)` or `target.compile()` anywhere in the file (a name compiled in one
    function counts for all: conservative)."""
    def compiled() -> set[str]:
        found = set()
        for node in src.calls():
            if _is_compile(node.func) and node.args:
                found.add(ast.unparse(node.args[0]))
            elif isinstance(node.func, ast.Attribute) and node.func.attr == "compile":
                found.add(ast.unparse(node.func.value))
        return found

    return target in src.memo("compiled", compiled)


def _inside_compiled(src: _Source, node: ast.AST) -> bool:
    parent = src.parent(node)
    while parent is not None and parent is not src.tree:
        if isinstance(parent, ast.Call) and _is_compile(parent.func):
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                set(_decorator_names(parent)) & (_COMPILES | {"compile"}):
            return True
        parent = src.parent(parent)
    return False


def _wrap_candidates(src: _Source, line: int, modules: set[str]) -> Iterator[tuple[str, ast.AST, Optional[str]]]:
    nn = _torch_nn_names(src)
    for node in src.walk_line(line):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Return)) and node.value is not None \
                and node.lineno <= line <= (node.end_lineno or node.lineno):
            func = src.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            in_init = isinstance(func, ast.FunctionDef) and func.name == "__init__"
            name = _constructed(node.value, modules, nn, local_only=in_init)
            if name is None or _inside_compiled(src, node.value):
                continue
            if not isinstance(node, ast.Return):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) != 1 or not isinstance(targets[0], (ast.Name, ast.Attribute)):
                    continue
                if _compiled_later(src, ast.unparse(targets[0])):
                    continue
            yield "value", node, name or None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == line \
                and node in src.tree.body and _wrappable_def(src, node):
            yield "def", node, node.name


def _wrappable_def(src: _Source, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    if isinstance(node, ast.AsyncFunctionDef) or node.name == "main" or node.name.startswith("test"):
        return False
    if not (node.args.args or node.args.posonlyargs or node.args.vararg):
        return False
    if set(_decorator_names(node)) & (_COMPILES | _DISABLES | {"compile", "property", "staticmethod",
                                                                 "classmethod", "contextmanager",
                                                                 "contextlib.contextmanager"}):
        return False
    if any(name.startswith(("torch.library.", "library.")) for name in _decorator_names(node)):
        return False  # a custom op's definition, not code to compile
    if node.name in src.memo("attribute-bases", lambda: {n.value.id for n in ast.walk(src.tree)
                                                         if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}):
        return False  # `fn.register_fake`, `fn.cache_clear()`: the compiled wrapper has no such attribute
    params = {a.arg for a in node.args.posonlyargs + node.args.args}
    tensor_code = False
    for n in ast.walk(node):
        if isinstance(n, (ast.Yield, ast.YieldFrom, ast.With, ast.AsyncWith, ast.Try, ast.While, ast.Global)):
            return False  # a generator, a context, a loop that waits: not something to compile
        if isinstance(n, ast.For) and not (isinstance(n.iter, ast.Call) and _dotted(n.iter.func) == "range"):
            return False  # iterating a loader or a list: a training loop, not tensor code
        if isinstance(n, ast.Name) and n.id in ("torch", "F", "nn"):
            tensor_code = True
        if isinstance(n, ast.BinOp) and any(isinstance(side, ast.Name) and side.id in params
                                            for side in (n.left, n.right)):
            tensor_code = True
    return tensor_code and not _compiled_later(src, node.name)


def _resolve_wrap(src: _Source, data: dict) -> Optional[list[_Edit]]:
    line = int(data["line"])
    found = src.discovery()
    modules = {t.name for t in found.targets if t.kind == "module"} if found else set()
    for kind, node, _name in _wrap_candidates(src, line, modules):
        if kind != data.get("what") or node.lineno != line:
            continue
        if kind == "def":
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])  # type: ignore[attr-defined]
            edits = [src.insert_lines(first - 1, [src.indent(first) + "@torch.compile"])]
        else:
            value = node.value  # type: ignore[attr-defined]
            (l1, c1), (l2, c2) = src.start(value), src.end(value)
            edits = [_Edit(l1, c1, l1, c1, "torch.compile("), _Edit(l2, c2, l2, c2, ")")]
        return _header_edits(src, ["torch"], []) + edits
    return None


def _still_guessed(src: _Source, target: str) -> bool:
    """The target's inputs are still Compile Lens's guess in this text (no directive written since)."""
    found = src.discovery()
    spec = next((t for t in (found.targets if found else []) if t.name == target), None)
    return spec is not None and spec.inputs is not None and spec.inputs.source == "inferred"


def _resolve_directive(src: _Source, data: dict) -> Optional[list[_Edit]]:
    node = next((n for n in src.tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name == data["target"]), None)
    found = src.discovery()
    spec = next((t for t in (found.targets if found else []) if t.name == data["target"]), None)
    if node is None or spec is None or spec.inputs is None or spec.inputs.source != "inferred":
        return None
    text = spec.inputs.text or str(data.get("text") or "")  # after import: the worker's guess
    try:
        ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):
        return None
    if not text or "\n" in text:
        return None
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return [src.insert_lines(first - 1, [f"{src.indent(first)}# compile-lens: inputs={text}"])]


_RESOLVERS: dict[str, Callable[[_Source, dict], Optional[list[_Edit]]]] = {
    "ignore": _resolve_ignore,
    "config": _resolve_config,
    "disable": _resolve_disable,
    "dynamic": _resolve_dynamic,
    "mark_dynamic": _resolve_mark_dynamic,
    "wrap": _resolve_wrap,
    "directive": _resolve_directive,
}
