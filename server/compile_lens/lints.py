"""Static lints: the usual graph-break patterns and recompile hazards, from `ast` alone.

CL1xx predict graph breaks inside code that `torch.compile` will trace: the `forward` of
`nn.Module` subclasses, `@torch.compile` functions, functions passed to `torch.compile(...)`, and
the helpers in this file that they call. CL2xx flag recompile hazards anywhere in the file.

No torch and no pygls: this runs in the language server on every keystroke. `ast.parse` alone takes
longer than the budget on a 5,000-line file, so parsing is incremental: each top-level statement is
parsed on its own and cached by its text, and so are the facts read from it; a keystroke re-parses
one statement and re-runs only the cheap cross-statement resolution.
"""

from __future__ import annotations

import ast
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Union

from .protocol import Finding, Frame

# code -> (severity, title): the rule table (README, renderers, SARIF rule metadata).
CODES: dict[str, tuple[str, str]] = {
    "CL101": ("information", "print() in compiled code"),
    "CL102": ("information", ".item() in compiled code"),
    "CL103": ("information", ".tolist() in compiled code"),
    "CL104": ("information", ".numpy() in compiled code"),
    "CL105": ("information", "branch on a tensor value in compiled code"),
    "CL106": ("information", "NumPy call in compiled code"),
    "CL107": ("information", "logging call in compiled code"),
    "CL201": ("warning", "torch.compile() called repeatedly"),
    "CL202": ("warning", "torch.compile() of a new lambda or closure each time"),
    "CL203": ("warning", "Python scalar that varies in a loop passed to a compiled callable"),
}

PREDICTED = " (predicted; a trace will confirm)"


def lint_source(source: str, path: str) -> Optional[list[Finding]]:
    """Static lints for one file. None when the source does not parse (mid-typing): the caller then
    keeps what it published before."""
    source = _normalise_newlines(source)
    with _LOCK:  # the cache's trees are shifted in place; one lint at a time
        chunks = _CACHE.chunks(path, source)
        if chunks is None:
            return None
        return _lint_chunks(chunks, source, path)


def forget(path: str) -> None:
    """Drop the parse cache of a closed document."""
    with _LOCK:
        _CACHE.forget(path)


def _lint_chunks(chunks: list[_Chunk], source: str, path: str) -> list[Finding]:
    index = _Index([chunk.facts for chunk in chunks])
    out = _Output(path, source.split("\n"))
    _predicted_breaks(index, out)
    _recompile_hazards(index, out)
    return out.sorted()


def _normalise_newlines(source: str) -> str:
    # The parser treats \r\n and \r as \n; doing the same keeps our line numbers equal to its.
    if "\r" in source:
        source = source.replace("\r\n", "\n").replace("\r", "\n")
    return source


# ===== incremental parsing =====================================================================

_LOCK = threading.Lock()
_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)
_TRIPLE_QUOTE = re.compile(r"\"\"\"|'''")
_CONTINUATION_KEYWORDS = ("else", "elif", "except", "finally")
_MAX_MERGE = 4  # a chunk that fails alone is retried joined with up to this many next chunks


@dataclass(eq=False)
class _Chunk:
    """One or more consecutive top-level statements, parsed, with the facts read from them."""

    text: str
    start: int  # 0-based line index of its first line in the document
    facts: _Facts

    @classmethod
    def parse(cls, text: str, start: int) -> Optional[_Chunk]:
        try:
            # Leading newlines make the parser number lines as in the document: no shift needed.
            tree = ast.parse("\n" * start + text)
        except _PARSE_ERRORS:
            return None
        return cls(text, start, _extract(tree))

    def move_to(self, start: int) -> None:
        """Lines above were added or removed: renumber the cached tree in place."""
        delta = start - self.start
        if delta:
            _shift_lines(self.facts.tree, delta)
            self.start = start


class _ChunkCache:
    """Per document: chunk text -> the parsed chunks with that text (a text can occur twice)."""

    def __init__(self, max_files: int = 16):
        self._files: OrderedDict[str, dict[str, list[_Chunk]]] = OrderedDict()
        self._max_files = max_files

    def forget(self, path: str) -> None:
        self._files.pop(path, None)

    def chunks(self, path: str, source: str) -> Optional[list[_Chunk]]:
        lines = source.split("\n")
        starts = _top_level_starts(lines, source)
        spans = list(zip(starts, starts[1:] + [len(lines)]))
        old = self._files.pop(path, {})
        new: dict[str, list[_Chunk]] = {}
        result: list[_Chunk] = []
        i = 0
        while i < len(spans):
            chunk, used = self._chunk_at(spans, i, lines, old)
            if chunk is None:
                return self._whole_file(path, source, old, new)
            result.append(chunk)
            new.setdefault(chunk.text, []).append(chunk)
            i += used
        self._remember(path, new)
        return result

    def _chunk_at(self, spans, i, lines, old) -> tuple[Optional[_Chunk], int]:
        """The chunk starting at span i, joined with the next spans when it does not parse alone
        (a line at column 0 inside brackets, say)."""
        start = spans[i][0]
        for used in range(1, min(_MAX_MERGE, len(spans) - i) + 1):
            text = "\n".join(lines[start:spans[i + used - 1][1]])
            chunk = _take(old, text, start) or _Chunk.parse(text, start)
            if chunk is not None:
                return chunk, used
        return None, 0

    def _whole_file(self, path, source, old, new) -> Optional[list[_Chunk]]:
        """Splitting failed: either a real syntax error (None) or a split we guessed wrong."""
        chunk = _take(old, source, 0) or _Chunk.parse(source, 0)
        if chunk is None:
            for text, chunks in old.items():  # keep what we had: the user is mid-edit
                new.setdefault(text, []).extend(chunks)
            self._remember(path, new)
            return None
        self._remember(path, {source: [chunk]})
        return [chunk]

    def _remember(self, path: str, chunks: dict[str, list[_Chunk]]) -> None:
        self._files[path] = chunks
        while len(self._files) > self._max_files:
            self._files.popitem(last=False)


def _take(cache: dict[str, list[_Chunk]], text: str, start: int) -> Optional[_Chunk]:
    """A cached chunk with this text (preferably already at `start`), removed from `cache`."""
    found = cache.get(text)
    if not found:
        return None
    at = next((k for k, c in enumerate(found) if c.start == start), len(found) - 1)
    chunk = found.pop(at)
    chunk.move_to(start)
    return chunk


def _top_level_starts(lines: list[str], source: str) -> list[int]:
    """Line indexes where a top-level statement (with its decorators) starts: a guess from the text
    alone; a wrong guess makes a chunk fail to parse, and the caller recovers."""
    in_string = _lines_inside_strings(source, len(lines))
    starts = [0]
    after_decorator = False
    for i, line in enumerate(lines):
        if not line or line[0] in " \t\f#)]}\\" or in_string[i]:
            continue
        if line.startswith(_CONTINUATION_KEYWORDS) and _keyword_at_start(line):
            continue
        boundary = not after_decorator
        after_decorator = line[0] == "@"
        if boundary and i:
            starts.append(i)
    return starts


def _keyword_at_start(line: str) -> bool:
    word = line.split(None, 1)[0].split(":", 1)[0]
    return word in _CONTINUATION_KEYWORDS


def _lines_inside_strings(source: str, n_lines: int) -> bytearray:
    """1 for each line that begins inside a triple-quoted string (such lines start no statement)."""
    inside = bytearray(n_lines)
    line, pos, opened = 0, 0, None  # opened: (quote, line) of the string we are in
    for match in _TRIPLE_QUOTE.finditer(source):
        line += source.count("\n", pos, match.start())
        pos = match.start()
        quote = match.group()
        if opened is None:
            opened = (quote, line)
        elif quote == opened[0]:
            inside[opened[1] + 1:line + 1] = b"\x01" * (line - opened[1])
            opened = None
    if opened is not None:
        inside[opened[1] + 1:] = b"\x01" * (n_lines - opened[1] - 1)
    return inside


_POSITIONED: dict[type, bool] = {}


def _shift_lines(tree: ast.AST, delta: int) -> None:
    for node in _walk(tree):
        kind = type(node)
        positioned = _POSITIONED.get(kind)
        if positioned is None:
            positioned = _POSITIONED[kind] = "lineno" in kind._attributes
        if positioned:
            node.lineno += delta  # type: ignore[attr-defined]
            if node.end_lineno is not None:  # type: ignore[attr-defined]
                node.end_lineno += delta  # type: ignore[attr-defined]


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _children(node: ast.AST) -> list[ast.AST]:
    """Child nodes, without the Load/Store markers (a faster `ast.iter_child_nodes`)."""
    kind = type(node)
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = _CHILD_FIELDS[kind] = tuple(f for f in kind._fields if f != "ctx")
    out: list[ast.AST] = []
    for name in fields:
        value = getattr(node, name, None)
        if isinstance(value, list):
            out.extend(v for v in value if isinstance(v, ast.AST))
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


def _walk(node: ast.AST):
    """Every node under `node`, iteratively (deeply nested code must not hit the recursion limit)."""
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(_children(node))


# ===== facts: what each chunk says, read syntactically =========================================

# A binding's kind for the scalar analysis (CL203): None when it is not (known to be) a Python
# scalar, else the names whose scalar-ness it depends on (empty: a scalar for sure).
Kind = Optional[frozenset]
SCALAR: frozenset = frozenset()

_FuncNode = Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda]


@dataclass(eq=False)
class _Loop:
    node: ast.AST  # For, While or a comprehension
    targets: set[str] = field(default_factory=set)  # names the loop itself binds
    assigned: set[str] = field(default_factory=set)  # names (re)bound in its body


@dataclass(eq=False)
class _Class:
    node: ast.ClassDef
    name: str
    qualname: str
    bases: list[str]  # dotted names as written ("nn.Module"); "" for other expressions
    methods: dict[str, _Func] = field(default_factory=dict)


@dataclass(eq=False)
class _Func:
    node: _FuncNode
    name: str
    qualname: str
    cls: Optional[_Class]  # the class it is a method of
    parent: Optional[_Func]  # the function it is nested in
    decorators: list[str] = field(default_factory=list)  # dotted (a call's callee for `@f(...)`)
    compile_decorator: Optional[ast.expr] = None  # `@torch.compile...` as written, if any
    children: list[_Func] = field(default_factory=list)  # nested defs and lambdas
    nested: dict[str, _Func] = field(default_factory=dict)  # nested defs by name
    name_calls: list[tuple[str, ast.Call]] = field(default_factory=list)  # f(...)
    self_calls: list[tuple[str, ast.Call]] = field(default_factory=list)  # self.f(...)
    candidates: list[tuple] = field(default_factory=list)  # raw CL1xx material, see _on_call
    bindings: dict[str, list[Kind]] = field(default_factory=dict)


class _Site(NamedTuple):
    """A call somewhere in the file, with where it sits."""

    call: ast.Call
    func: Optional[_Func]  # innermost enclosing function (None: module or class level)
    loops: tuple[_Loop, ...]  # enclosing loops inside that function, innermost last
    guarded: bool  # under an `if` inside that loop/function: likely a one-time or cached compile


class _Ctx(NamedTuple):
    func: Optional[_Func]
    cls: Optional[_Class]  # set only directly in a class body
    loops: tuple[_Loop, ...]
    guarded: bool


_TOP = _Ctx(None, None, (), False)


@dataclass(eq=False)
class _Facts:
    tree: ast.Module
    imports: list[tuple[str, str]] = field(default_factory=list)  # (local name, qualified name)
    module_calls: list[tuple[str, str]] = field(default_factory=list)  # `name = f(...)` at top level
    classes: list[_Class] = field(default_factory=list)
    functions: list[_Func] = field(default_factory=list)  # module-level defs
    all_funcs: list[_Func] = field(default_factory=list)  # every def, any depth
    lambdas: dict[ast.Lambda, _Func] = field(default_factory=dict)
    compile_calls: list[_Site] = field(default_factory=list)  # calls of a `*compile` callee
    loop_calls: list[_Site] = field(default_factory=list)  # every call inside a loop
    assigned_calls: list[tuple[str, ast.Call, Optional[_Func]]] = field(default_factory=list)
    bindings: dict[str, list[Kind]] = field(default_factory=dict)  # module scope


def _extract(tree: ast.Module) -> _Facts:
    return _Extractor(tree).facts


class _Extractor:
    """One iterative pass over a chunk: each node is handled with the context it sits in."""

    def __init__(self, tree: ast.Module):
        self.facts = _Facts(tree)
        self.stack: list[tuple[ast.AST, _Ctx]] = [(node, _TOP) for node in reversed(tree.body)]
        handlers = {
            ast.FunctionDef: self._on_def, ast.AsyncFunctionDef: self._on_def,
            ast.Lambda: self._on_lambda, ast.ClassDef: self._on_class,
            ast.For: self._on_for, ast.AsyncFor: self._on_for, ast.While: self._on_while,
            ast.If: self._on_if, ast.IfExp: self._on_ifexp, ast.Call: self._on_call,
            ast.Assign: self._on_assign, ast.AnnAssign: self._on_assign,
            ast.AugAssign: self._on_augassign, ast.NamedExpr: self._on_assign,
            ast.Import: self._on_import, ast.ImportFrom: self._on_import,
            ast.ListComp: self._on_comprehension, ast.SetComp: self._on_comprehension,
            ast.GeneratorExp: self._on_comprehension, ast.DictComp: self._on_comprehension,
        }
        while self.stack:
            node, ctx = self.stack.pop()
            handler = handlers.get(type(node))
            if handler is None:
                self._push(_children(node), ctx)
            else:
                handler(node, ctx)

    def _push(self, nodes, ctx: _Ctx) -> None:
        self.stack.extend((n, ctx) for n in nodes if n is not None)

    def _bind(self, ctx: _Ctx, name: str, kind: Kind) -> None:
        scope = ctx.func.bindings if ctx.func is not None else self.facts.bindings
        scope.setdefault(name, []).append(kind)
        for loop in ctx.loops:
            loop.assigned.add(name)

    # --- scopes ---

    def _on_def(self, node, ctx: _Ctx) -> None:
        owner = ctx.cls.qualname if ctx.cls else ctx.func.qualname if ctx.func else ""
        func = _Func(node, node.name, f"{owner}.{node.name}" if owner else node.name, ctx.cls, ctx.func)
        for dec in node.decorator_list:
            callee = dec.func if isinstance(dec, ast.Call) else dec
            func.decorators.append(_dotted(callee) or "")
        self.facts.all_funcs.append(func)
        if ctx.cls is not None:
            ctx.cls.methods[node.name] = func
        elif ctx.func is not None:
            ctx.func.children.append(func)
            ctx.func.nested[node.name] = func
            self._bind(ctx, node.name, None)
        else:
            self.facts.functions.append(func)
            self._bind(ctx, node.name, None)
        self._bind_params(func, node.args)
        inner = _Ctx(func, None, (), False)
        self._push(node.decorator_list, ctx)
        self._push(node.args.defaults + [d for d in node.args.kw_defaults if d is not None], ctx)
        self._push(reversed(node.body), inner)

    def _on_lambda(self, node: ast.Lambda, ctx: _Ctx) -> None:
        owner = ctx.func.qualname if ctx.func else ctx.cls.qualname if ctx.cls else ""
        func = _Func(node, "<lambda>", f"{owner}.<lambda>" if owner else "<lambda>", None, ctx.func)
        self.facts.lambdas[node] = func
        if ctx.func is not None:
            ctx.func.children.append(func)
        self._bind_params(func, node.args)
        self._push(node.args.defaults + [d for d in node.args.kw_defaults if d is not None], ctx)
        self._push([node.body], _Ctx(func, None, (), False))

    def _bind_params(self, func: _Func, args: ast.arguments) -> None:
        positional = args.posonlyargs + args.args
        defaults: list[Optional[ast.expr]] = [None] * (len(positional) - len(args.defaults))
        defaults += args.defaults
        pairs = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
        for arg, default in pairs:
            func.bindings.setdefault(arg.arg, []).append(_param_kind(arg, default))
        for arg in (args.vararg, args.kwarg):
            if arg is not None:
                func.bindings.setdefault(arg.arg, []).append(None)

    def _on_class(self, node: ast.ClassDef, ctx: _Ctx) -> None:
        owner = ctx.cls.qualname if ctx.cls else ctx.func.qualname if ctx.func else ""
        bases = [_dotted(b) or "" for b in node.bases]
        cls = _Class(node, node.name, f"{owner}.{node.name}" if owner else node.name, bases)
        self.facts.classes.append(cls)
        self._bind(ctx, node.name, None)
        self._push(node.decorator_list + node.bases, ctx)
        self._push(reversed(node.body), ctx._replace(cls=cls))

    # --- loops and branches ---

    def _on_for(self, node, ctx: _Ctx) -> None:
        loop = _Loop(node)
        for name, kind in _loop_target_kinds(node.target, node.iter):
            self._bind(ctx, name, kind)
            loop.targets.add(name)
        self._push([node.iter] + node.orelse, ctx)
        self._push(reversed(node.body), ctx._replace(loops=ctx.loops + (loop,), guarded=False))

    def _on_while(self, node: ast.While, ctx: _Ctx) -> None:
        self._branch(node.test, "while", ctx)
        inner = ctx._replace(loops=ctx.loops + (_Loop(node),), guarded=False)
        self._push(node.orelse, ctx)
        self._push([node.test] + node.body[::-1], inner)

    def _on_comprehension(self, node, ctx: _Ctx) -> None:
        loop = _Loop(node)
        for gen in node.generators:
            for name, kind in _loop_target_kinds(gen.target, gen.iter):
                self._bind(ctx, name, kind)
                loop.targets.add(name)
        inner = ctx._replace(loops=ctx.loops + (loop,), guarded=False)
        first, *rest = node.generators
        self._push([first.iter], ctx)  # evaluated once
        parts = [p for g in rest for p in [g.iter, *g.ifs]] + first.ifs
        parts += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        self._push(parts, inner)

    def _on_if(self, node: ast.If, ctx: _Ctx) -> None:
        self._branch(node.test, "if", ctx)
        self._push([node.test], ctx)
        self._push(node.body + node.orelse, ctx._replace(guarded=True))

    def _on_ifexp(self, node: ast.IfExp, ctx: _Ctx) -> None:
        self._branch(node.test, "ifexp", ctx)
        self._push([node.test, node.body, node.orelse], ctx)

    def _branch(self, test: ast.expr, keyword: str, ctx: _Ctx) -> None:
        if ctx.func is None:
            return
        reducers, calls = _condition_calls(test)
        if reducers or calls:
            ctx.func.candidates.append(("branch", test, (keyword, reducers, calls)))

    # --- calls, bindings, imports ---

    def _on_call(self, node: ast.Call, ctx: _Ctx) -> None:
        callee = node.func
        dotted = _dotted(callee)
        func = ctx.func
        if func is not None:
            if isinstance(callee, ast.Name):
                func.name_calls.append((callee.id, node))
                if callee.id == "print":
                    func.candidates.append(("print", node, None))
            elif isinstance(callee, ast.Attribute):
                value = callee.value
                if isinstance(value, ast.Name) and value.id == "self":
                    func.self_calls.append((callee.attr, node))
                elif dotted is not None:
                    func.candidates.append(("call", node, dotted))
                elif isinstance(value, ast.Call) and callee.attr in _LOG_METHODS:
                    func.candidates.append(("logcall", node, _dotted(value.func)))
                if callee.attr in _TENSOR_TO_PYTHON:
                    func.candidates.append((callee.attr, node, None))
        if dotted is not None and dotted.endswith("compile"):
            self.facts.compile_calls.append(_Site(node, func, ctx.loops, ctx.guarded))
        if ctx.loops:
            self.facts.loop_calls.append(_Site(node, func, ctx.loops, ctx.guarded))
        self._push(_children(node), ctx)

    def _on_assign(self, node, ctx: _Ctx) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        for target in targets:
            for name, kind in _assigned_kinds(target, value):
                self._bind(ctx, name, kind)
            if isinstance(value, ast.Call):
                name = _dotted(target)
                if name is not None:
                    self.facts.assigned_calls.append((name, value, ctx.func))
                    if ctx.func is None and ctx.cls is None:
                        self.facts.module_calls.append((name, _dotted(value.func) or ""))
        self._push([value] if value is not None else [], ctx)

    def _on_augassign(self, node: ast.AugAssign, ctx: _Ctx) -> None:
        if isinstance(node.target, ast.Name):
            kind = _scalar_kind(node.value)
            self._bind(ctx, node.target.id, None if kind is None else kind | {node.target.id})
        self._push([node.target, node.value], ctx)

    def _on_import(self, node, ctx: _Ctx) -> None:
        for alias in node.names:
            if isinstance(node, ast.Import):
                local = alias.asname or alias.name.split(".")[0]
                qualified = alias.name if alias.asname else local
            elif node.module and not node.level and alias.name != "*":
                local = alias.asname or alias.name
                qualified = f"{node.module}.{alias.name}"
            else:
                continue
            self.facts.imports.append((local, qualified))
            self._bind(ctx, local, None)


# --- syntactic helpers for the extractor ---

_TENSOR_TO_PYTHON = {"item": "CL102", "tolist": "CL103", "numpy": "CL104"}
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical",
                          "fatal", "log"})
# Conditions: calls that reduce a tensor to one value (its truth depends on the data) ...
_REDUCERS = frozenset({"sum", "any", "all", "max", "min", "mean", "item", "prod", "norm", "std",
                       "var", "median", "amax", "amin", "argmax", "argmin", "count_nonzero",
                       "nonzero", "allclose", "equal", "isclose", "nansum", "nanmean"})
# ... and parts of a condition that are static to Dynamo (shapes, dtypes, modes): not looked into.
_STATIC_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "training", "is_cuda", "layout",
                           "requires_grad", "is_leaf", "is_sparse", "is_quantized", "is_meta",
                           "grad_fn", "names"})
_STATIC_METHODS = frozenset({"size", "dim", "ndimension", "numel", "nelement", "stride",
                             "is_contiguous", "is_floating_point", "is_complex", "get_device",
                             "element_size", "storage_offset", "has_names", "is_signed",
                             "startswith", "endswith", "get", "keys", "values", "items"})
_STATIC_BUILTINS = frozenset({"len", "isinstance", "issubclass", "hasattr", "getattr", "callable",
                              "type", "id", "str", "repr"})


def _dotted(node: ast.AST) -> Optional[str]:
    """"a.b.c" for a chain of names and attributes, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _condition_calls(test: ast.expr) -> tuple[list[ast.Call], list[tuple[str, ast.Call]]]:
    """The calls in a condition that may make it data-dependent: tensor reductions, and dotted
    calls (resolved later: a `torch.*` one counts) — skipping the static parts."""
    reducers: list[ast.Call] = []
    calls: list[tuple[str, ast.Call]] = []
    stack: list[ast.AST] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Attribute) and node.attr in _STATIC_ATTRS:
            continue
        if isinstance(node, ast.Compare) and all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            continue  # identity (`x.grad is None`) never depends on values
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, ast.Call):
            callee = node.func
            if isinstance(callee, ast.Name) and callee.id in _STATIC_BUILTINS:
                continue
            if isinstance(callee, ast.Attribute):
                if callee.attr in _STATIC_METHODS:
                    continue
                if callee.attr in _REDUCERS:
                    reducers.append(node)
                dotted = _dotted(callee)
                if dotted is not None:
                    calls.append((dotted, node))
        stack.extend(_children(node))
    return reducers, calls


def _scalar_kind(node: ast.AST, depth: int = 0) -> Kind:
    """Is this expression a Python scalar? SCALAR, None (not known to be), or the names it is one
    if they are."""
    if depth > 30:
        return None
    if isinstance(node, ast.Constant):
        value = node.value
        return SCALAR if isinstance(value, (int, float, complex, str)) else None
    if isinstance(node, ast.Name):
        return frozenset((node.id,))
    if isinstance(node, ast.UnaryOp):
        return _scalar_kind(node.operand, depth + 1)
    if isinstance(node, ast.BinOp):
        return _union(_scalar_kind(node.left, depth + 1), _scalar_kind(node.right, depth + 1))
    if isinstance(node, ast.IfExp):
        return _union(_scalar_kind(node.body, depth + 1), _scalar_kind(node.orelse, depth + 1))
    if isinstance(node, ast.Call):
        callee = node.func
        if isinstance(callee, ast.Name):
            if callee.id in ("int", "float", "round", "len", "bool", "abs"):
                return SCALAR
            if callee.id in ("min", "max") and node.args and not node.keywords:
                kinds = [_scalar_kind(a, depth + 1) for a in node.args]
                return _union(*kinds)
        if isinstance(callee, ast.Attribute):
            if callee.attr == "item" and not node.args:
                return SCALAR
            dotted = _dotted(callee)
            if dotted is not None and dotted.startswith("math."):
                return SCALAR
    return None


def _union(*kinds: Kind) -> Kind:
    out: frozenset = SCALAR
    for kind in kinds:
        if kind is None:
            return None
        out |= kind
    return out


def _param_kind(arg: ast.arg, default: Optional[ast.expr]) -> Kind:
    annotation = arg.annotation
    if isinstance(annotation, ast.Name) and annotation.id in ("int", "float", "bool", "str"):
        return SCALAR
    if isinstance(default, ast.Constant) and default.value is not None and _scalar_kind(default) == SCALAR:
        return SCALAR
    return None


def _names_in_target(target: ast.AST) -> list[str]:
    return [n.id for n in _walk(target) if isinstance(n, ast.Name)]


def _assigned_kinds(target: ast.AST, value: Optional[ast.expr]) -> list[tuple[str, Kind]]:
    if isinstance(target, ast.Name):
        return [(target.id, None if value is None else _scalar_kind(value))]
    if (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
            and len(target.elts) == len(value.elts)
            and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts)):
        return [pair for t, v in zip(target.elts, value.elts) for pair in _assigned_kinds(t, v)]
    return [(name, None) for name in _names_in_target(target)]


_SCALAR_ITERATORS = frozenset({"range", "count", "arange", "linspace", "logspace", "geomspace"})


def _loop_target_kinds(target: ast.AST, iterable: ast.expr) -> list[tuple[str, Kind]]:
    """The names a `for` binds, and whether each value is a Python scalar (`range`, `enumerate`'s
    index, a literal list of numbers)."""
    callee = _dotted(iterable.func) if isinstance(iterable, ast.Call) else None
    last = callee.rsplit(".", 1)[-1] if callee else None
    if isinstance(target, ast.Name):
        literal = isinstance(iterable, (ast.List, ast.Tuple, ast.Set)) and iterable.elts and all(
            _scalar_kind(e) == SCALAR for e in iterable.elts)
        scalar = last in _SCALAR_ITERATORS or bool(literal)
        return [(target.id, SCALAR if scalar else None)]
    if last == "enumerate" and isinstance(target, ast.Tuple) and target.elts:
        first, *rest = target.elts
        kinds = [(first.id, SCALAR)] if isinstance(first, ast.Name) else []
        names = _names_in_target(first) if not isinstance(first, ast.Name) else []
        return kinds + [(n, None) for n in names + [n for r in rest for n in _names_in_target(r)]]
    return [(name, None) for name in _names_in_target(target)]


# ===== index: the chunks' facts resolved against each other ====================================

_MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.Sequential", "torch.nn.modules.module.Module",
                           "nn.Module", "nn.Sequential", "Module"})
_CACHE_DECORATORS = frozenset({"cache", "lru_cache", "cached_property"})
# torch.* calls in a condition that are static to Dynamo (configuration and shape queries).
_STATIC_TORCH_PREFIXES = ("is_", "are_", "get_", "has_")
_STATIC_TORCH_NAMES = frozenset({"numel", "typename", "finfo", "iinfo", "result_type",
                                 "promote_types", "can_cast", "broadcast_shapes", "Size", "device",
                                 "dtype"})
_STATIC_TORCH_MODULES = frozenset({"cuda", "backends", "distributed", "jit", "compiler", "_dynamo",
                                   "fx", "onnx", "_C", "version", "mps", "xpu", "cpu", "overrides",
                                   "_guards", "_utils", "utils", "testing", "hub"})


class _Index:
    def __init__(self, all_facts: list[_Facts]):
        self.facts = all_facts
        self.aliases: dict[str, str] = {}
        for facts in all_facts:
            self.aliases.update(facts.imports)
        self.functions: dict[str, _Func] = {f.name: f for facts in all_facts for f in facts.functions}
        self.classes: dict[str, _Class] = {c.name: c for facts in all_facts for c in facts.classes}
        self.lambdas: dict[ast.Lambda, _Func] = {}
        self.bindings: dict[str, list[Kind]] = {}
        for facts in all_facts:
            self.lambdas.update(facts.lambdas)
            for name, kinds in facts.bindings.items():
                self.bindings.setdefault(name, []).extend(kinds)
        self.loggers = {name for facts in all_facts for name, callee in facts.module_calls
                        if self.resolve(callee) == "logging.getLogger"}
        self.module_classes = self._module_classes()

    def iter(self, attr: str):
        for facts in self.facts:
            yield from getattr(facts, attr)

    def resolve(self, dotted: Optional[str]) -> str:
        """Through the file's imports: `np.mean` -> `numpy.mean`, `nn.Module` -> `torch.nn.Module`."""
        if not dotted:
            return ""
        head, dot, rest = dotted.partition(".")
        return self.aliases.get(head, head) + dot + rest

    def is_torch_compile(self, dotted: Optional[str]) -> bool:
        return bool(dotted) and self.resolve(dotted) == "torch.compile"

    def _module_classes(self) -> set[_Class]:
        """nn.Module subclasses, directly or through other classes of this file."""
        found: set[_Class] = set()
        names: set[str] = set()
        pending = list(self.iter("classes"))
        changed = True
        while changed:
            changed = False
            for cls in pending:
                if cls not in found and any(self._is_module_base(b, names) for b in cls.bases):
                    found.add(cls)
                    names.add(cls.name)
                    changed = True
        return found

    def _is_module_base(self, base: str, module_names: set[str]) -> bool:
        if not base:
            return False
        return (base in _MODULE_BASES or self.resolve(base) in _MODULE_BASES
                or base in module_names or base.rsplit(".", 1)[-1] == "LightningModule")

    def method(self, cls: Optional[_Class], name: str) -> Optional[_Func]:
        """`self.name` seen from a method of `cls`: its own, else from its bases in this file."""
        seen: set[str] = set()
        queue = [cls] if cls is not None else []
        while queue:
            current = queue.pop(0)
            if current.name in seen:
                continue
            seen.add(current.name)
            if name in current.methods:
                return current.methods[name]
            queue += [self.classes[b] for b in current.bases if b in self.classes]
        return None

    def callee(self, name: str, scope: Optional[_Func]) -> Optional[_Func]:
        """What a call `name(...)` made in `scope` runs: a nested def visible there, else a
        module-level function."""
        while scope is not None:
            if name in scope.nested:
                return scope.nested[name]
            scope = scope.parent
        return self.functions.get(name)

    def compile_arg(self, site: _Site) -> Optional[ast.expr]:
        call = site.call
        if call.args:
            return call.args[0]
        return next((k.value for k in call.keywords if k.arg == "model"), None)

    def compiled_function(self, site: _Site) -> Optional[_Func]:
        """The function a `torch.compile(f)` call compiles, when it is defined in this file."""
        arg = self.compile_arg(site)
        if isinstance(arg, ast.Lambda):
            return self.lambdas.get(arg)
        if isinstance(arg, ast.Name):
            return self.callee(arg.id, site.func)
        if (isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name)
                and arg.value.id == "self" and site.func is not None):
            return self.method(_method_class(site.func), arg.attr)
        return None

    def is_static_torch_call(self, resolved: str) -> bool:
        parts = resolved.split(".")
        if len(parts) > 2 and parts[1] in _STATIC_TORCH_MODULES:
            return True
        last = parts[-1]
        return last != "is_nonzero" and (last.startswith(_STATIC_TORCH_PREFIXES)
                                         or last in _STATIC_TORCH_NAMES)


def _method_class(func: Optional[_Func]) -> Optional[_Class]:
    """The class whose `self` a function sees (a method, or a def/lambda nested in one)."""
    while func is not None:
        if func.cls is not None:
            return func.cls
        func = func.parent
    return None


def _with_nested(func: _Func) -> list[_Func]:
    """A function and every def/lambda nested in it: all run when it is traced."""
    out, stack = [], [func]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(current.children)
    return out


def _is_dynamo_disabled(func: _Func, index: _Index) -> bool:
    return any(index.resolve(d) in ("torch.compiler.disable", "torch._dynamo.disable")
               for d in func.decorators)


# ===== CL1xx: graph breaks predicted inside compiled code ======================================

def _compiled_roots(index: _Index) -> list[_Func]:
    """Where tracing starts: forward of modules, @torch.compile defs, torch.compile(f) arguments."""
    roots: list[_Func] = []
    for cls in index.module_classes:
        forward = cls.methods.get("forward")
        if forward is not None:
            roots.append(forward)
    roots += [f for f in index.iter("all_funcs") if any(index.is_torch_compile(d) for d in f.decorators)]
    for site in index.iter("compile_calls"):
        if index.is_torch_compile(_dotted(site.call.func)):
            func = index.compiled_function(site)
            if func is not None:
                roots.append(func)
    roots.sort(key=lambda f: (f.node.lineno, f.node.col_offset))
    return roots


def _traced_functions(index: _Index) -> list[tuple[_Func, _Func, tuple[Frame, ...]]]:
    """(function, the root it is traced from, the call chain to it) for the roots and every helper
    in this file they call, directly or through other helpers; each once, by its shortest chain."""
    out = []
    seen: set[_Func] = set()
    queue = [(root, root, ()) for root in _compiled_roots(index)]
    while queue:
        func, root, chain = queue.pop(0)
        if func in seen or _is_dynamo_disabled(func, index):
            continue
        seen.add(func)
        out.append((func, root, chain))
        for inner in _with_nested(func):
            for name, call in inner.name_calls:
                target = index.callee(name, inner)
                if target is not None and target not in seen:
                    queue.append((target, root, chain + (_frame(index, call, inner),)))
            for name, call in inner.self_calls:
                target = index.method(_method_class(inner), name)
                if target is not None and target not in seen:
                    queue.append((target, root, chain + (_frame(index, call, inner),)))
    return out


def _frame(index: _Index, call: ast.AST, func: Optional[_Func]) -> Frame:
    return Frame("", call.lineno, func.qualname if func else "<module>")  # path filled by _Output


def _predicted_breaks(index: _Index, out: _Output) -> None:
    for func, root, chain in _traced_functions(index):
        where = _where(func, root)
        context = {"function": func.qualname, "root": root.qualname}
        for inner in _with_nested(func):
            for kind, node, info in inner.candidates:
                _candidate(index, out, kind, node, info, where, context, chain)
            for name, call in inner.name_calls:
                resolved = index.resolve(name)
                if name in index.aliases and resolved.startswith("numpy."):
                    _numpy_call(out, call, name, where, context, chain)


def _where(func: _Func, root: _Func) -> str:
    if func is root:
        return "inside compiled code"
    return f"in `{func.qualname}` (called from compiled `{root.qualname}`)"


def _candidate(index, out, kind, node, info, where, context, chain) -> None:
    if kind == "print":
        out.add(node, "CL101", f"print() {where} will likely break the graph" + PREDICTED,
                dict(context, kind="print", statement=out.statement_of(node)), chain, predicted=True)
    elif kind in _TENSOR_TO_PYTHON:
        why = {"item": "it copies a tensor value into Python",
               "tolist": "it copies tensor values into a Python list",
               "numpy": "it turns the tensor into a NumPy array"}[kind]
        out.add(node, _TENSOR_TO_PYTHON[kind], f"`.{kind}()` {where} will likely break the graph: "
                f"{why}" + PREDICTED, dict(context, kind=kind), chain, predicted=True)
    elif kind == "branch":
        _branch(index, out, node, info, where, context, chain)
    elif kind == "call":
        _dotted_call(index, out, node, info, where, context, chain)
    elif kind == "logcall" and index.resolve(info) == "logging.getLogger":
        _logging_call(out, node, "logging.getLogger(...)." + node.func.attr, where, context, chain)


def _branch(index, out, test, info, where, context, chain) -> None:
    keyword, reducers, calls = info
    data_dependent = any(
        index.resolve(_dotted(r.func.value)).split(".")[0] not in ("numpy", "math") for r in reducers
    ) or any(
        index.resolve(d).startswith("torch.") and not index.is_static_torch_call(index.resolve(d))
        for d, _ in calls
    )
    if not data_dependent:
        return
    what = {"if": "`if` on a tensor value", "while": "`while` on a tensor value",
            "ifexp": "a conditional expression on a tensor value"}[keyword]
    out.add(test, "CL105", f"{what} {where} will likely break the graph: the branch depends on the "
            f"data" + PREDICTED, dict(context, kind="branch", condition=out.text_of(test)), chain,
            predicted=True)


def _dotted_call(index, out, call, dotted, where, context, chain) -> None:
    head = dotted.split(".", 1)[0]
    resolved = index.resolve(dotted)
    if head in index.aliases and resolved.startswith("numpy."):
        _numpy_call(out, call, dotted, where, context, chain)
        return
    receiver, _, method = dotted.rpartition(".")
    if method in _LOG_METHODS and (index.resolve(receiver) == "logging" or receiver in index.loggers):
        _logging_call(out, call, dotted, where, context, chain)


def _numpy_call(out, call, dotted, where, context, chain) -> None:
    out.add(call, "CL106", f"NumPy call `{dotted}()` {where} may break the graph (Dynamo traces many "
            f"NumPy functions, not all)" + PREDICTED, dict(context, kind="numpy-call", call=dotted),
            chain, predicted=True)


def _logging_call(out, call, dotted, where, context, chain) -> None:
    out.add(call, "CL107", f"logging call `{dotted}()` {where} will likely break the graph"
            + PREDICTED, dict(context, kind="logging", call=dotted, statement=out.statement_of(call)),
            chain, predicted=True)


# ===== CL2xx: recompile hazards ================================================================

def _recompile_hazards(index: _Index, out: _Output) -> None:
    sites = [s for s in index.iter("compile_calls") if index.is_torch_compile(_dotted(s.call.func))]
    repeated_candidates = _repeated_compiles(index, out, sites)
    _compiles_in_repeated_calls(index, out, repeated_candidates)
    _varying_scalar_args(index, out)


def _repeated_compiles(index: _Index, out: _Output, sites: list[_Site]) -> dict[_Func, list[_Site]]:
    """CL201 (in a loop, or in forward) and CL202 (a fresh lambda/closure). Returns, per function,
    the compile calls not flagged yet: they are hazards if the function runs in a loop."""
    in_functions: dict[_Func, list[_Site]] = {}
    for site in sites:
        if site.guarded:
            continue  # `if self._compiled is None: ...`: compiled once, then reused
        func = site.func
        fresh = _fresh_callable(index, site)
        in_function = func is not None and func.name != "__init__"
        if fresh is not None and (site.loops or in_function):
            _fresh_compile(out, site, fresh)
        elif site.loops and not _compiles_loop_item(index.compile_arg(site), site.loops):
            out.add(site.call, "CL201", "torch.compile() inside a loop compiles again on every "
                    f"iteration: hoist it out of the loop (line {site.loops[-1].node.lineno})",
                    {"kind": "compile-in-loop", "loop_line": site.loops[-1].node.lineno})
        elif func is not None and func.name == "forward" and func.cls in index.module_classes:
            out.add(site.call, "CL201", f"torch.compile() inside `{func.qualname}` compiles again on "
                    "every call of the model: compile once, in `__init__` or where the model is built",
                    {"kind": "compile-in-forward", "function": func.qualname})
        elif func is not None:
            in_functions.setdefault(func, []).append(site)
    for func in index.iter("all_funcs"):
        decorator = _compile_decorator(index, func)
        if decorator is not None and func.parent is not None and func.parent.name != "__init__":
            _fresh_compile(out, _Site(decorator, func.parent, (), False), func)
    return in_functions


def _compile_decorator(index: _Index, func: _Func) -> Optional[ast.expr]:
    for dec in func.node.decorator_list if not isinstance(func.node, ast.Lambda) else []:
        if index.is_torch_compile(_dotted(dec.func if isinstance(dec, ast.Call) else dec)):
            return dec
    return None


def _fresh_callable(index: _Index, site: _Site) -> Optional[_Func]:
    """The lambda or nested def a torch.compile call compiles, when it is created anew each time."""
    arg = index.compile_arg(site)
    if isinstance(arg, ast.Lambda):
        return index.lambdas.get(arg)
    func = index.compiled_function(site)
    return func if func is not None and func.parent is not None and isinstance(arg, ast.Name) else None


def _fresh_compile(out: _Output, site: _Site, fresh: _Func) -> None:
    outer = site.func.qualname if site.func is not None else "the loop"
    runs = "on every iteration of the loop" if site.loops else f"each time `{outer}` runs"
    if fresh.name == "<lambda>":
        what, kind = "torch.compile(lambda ...) compiles a new lambda", "compile-lambda"
    else:
        what, kind = f"torch.compile(`{fresh.name}`) compiles a new closure", "compile-closure"
    out.add(site.call, "CL202", f"{what} {runs}: define the function once (at module level) and "
            "compile it once", {"kind": kind, "function": outer, "closure": fresh.name,
                                "in_loop": bool(site.loops)})


def _compiles_loop_item(arg: Optional[ast.expr], loops: tuple[_Loop, ...]) -> bool:
    """`for m in models: torch.compile(m)` compiles a different object each time: not a hazard."""
    if arg is None:
        return False
    names = {n.id for n in _walk(arg) if isinstance(n, ast.Name)}
    return any(names & loop.targets for loop in loops)


def _compiles_in_repeated_calls(index: _Index, out: _Output, sites: dict[_Func, list[_Site]]) -> None:
    """CL201: a function that calls torch.compile (directly or through helpers) called in a loop."""
    if not sites:
        return
    compiling = _functions_reaching(index, set(sites))
    flagged: set[ast.Call] = set()
    for loop_call in index.iter("loop_calls"):
        callee = _call_target(index, loop_call.call, loop_call.func)
        if callee is None or callee not in compiling:
            continue
        chain = (_frame(index, loop_call.call, loop_call.func),)
        for func, via in _paths_to_sites(index, callee, compiling, sites, chain):
            for site in sites[func]:
                if site.call in flagged:
                    continue
                flagged.add(site.call)
                loop_line = loop_call.loops[-1].node.lineno
                out.add(site.call, "CL201", f"torch.compile() runs each time `{callee.qualname}` "
                        f"runs, and it is called in a loop (line {loop_call.call.lineno}): each call "
                        "compiles again — compile once outside and reuse it",
                        {"kind": "compile-in-repeated-call", "function": callee.qualname,
                         "caller_line": loop_call.call.lineno, "loop_line": loop_line}, via)


def _call_target(index: _Index, call: ast.Call, scope: Optional[_Func]) -> Optional[_Func]:
    callee = call.func
    if isinstance(callee, ast.Name):
        return index.callee(callee.id, scope)
    if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name) and callee.value.id == "self":
        return index.method(_method_class(scope), callee.attr)
    return None


def _calls_of(index: _Index, func: _Func) -> list[tuple[_Func, ast.Call, _Func]]:
    """(callee, call, the def the call is in) for the calls a function makes to this file's defs."""
    out = []
    for inner in _with_nested(func):
        for _, call in inner.name_calls + inner.self_calls:
            target = _call_target(index, call, inner)
            if target is not None:
                out.append((target, call, inner))
    return out


def _is_cached(func: _Func) -> bool:
    return any(d.rsplit(".", 1)[-1] in _CACHE_DECORATORS for d in func.decorators)


def _functions_reaching(index: _Index, targets: set[_Func]) -> set[_Func]:
    """The functions that, when called, run one of `targets` (themselves included); a cached
    function (`@functools.cache`) runs its body once, so it stops the chain."""
    reaching = {f for f in targets if not _is_cached(f)}
    funcs = [f for f in index.iter("all_funcs") if not _is_cached(f)]
    edges = {f: {t for t, _, _ in _calls_of(index, f)} for f in funcs}
    changed = True
    while changed:
        changed = False
        for func in funcs:
            if func not in reaching and edges[func] & reaching:
                reaching.add(func)
                changed = True
    return reaching


def _paths_to_sites(index, start, compiling, sites, chain):
    """(function with compile calls, call chain to it) reachable from `start` through `compiling`."""
    out, seen, queue = [], {start}, [(start, chain)]
    while queue:
        func, via = queue.pop(0)
        if func in sites:
            out.append((func, via))
        for target, call, inner in _calls_of(index, func):
            if target in compiling and target not in seen:
                seen.add(target)
                queue.append((target, via + (_frame(index, call, inner),)))
    return out


def _varying_scalar_args(index: _Index, out: _Output) -> None:
    """CL203: `for lr in ...: step(x, lr)` where `step` is compiled: each new value may recompile."""
    compiled = _compiled_callables(index)
    if not compiled:
        return
    scalars: dict[Optional[_Func], set[str]] = {}
    for site in index.iter("loop_calls"):
        name = _compiled_callee_name(index, site, compiled)
        if name is None:
            continue
        if site.func not in scalars:
            scalars[site.func] = _scalar_names(index, site.func)
        for arg in site.call.args + [k.value for k in site.call.keywords]:
            varying = _varying_scalar(arg, site.loops, scalars[site.func])
            if varying is not None:
                var, loop = varying
                out.add(arg, "CL203", f"each new value of `{var}` may recompile `{name}` (`{var}` "
                        f"changes in the loop at line {loop.node.lineno}): pass it as a tensor or "
                        "mark it dynamic", {"kind": "scalar-arg", "name": var, "callee": name,
                                            "loop_line": loop.node.lineno})


def _compiled_callables(index: _Index) -> dict[str, list[Optional[_Func]]]:
    """Names bound to a compiled callable -> the scopes where the binding is visible (None: all).
    `dynamic=True` ones are left out: they do not recompile for new scalar values."""
    compiled: dict[str, list[Optional[_Func]]] = {}
    for name, call, scope in index.iter("assigned_calls"):
        if index.is_torch_compile(_dotted(call.func)) and not _is_dynamic(call):
            visible = None if scope is None or "." in name else scope
            compiled.setdefault(name, []).append(visible)
    for func in index.iter("all_funcs"):
        decorator = _compile_decorator(index, func)
        if decorator is not None and not (isinstance(decorator, ast.Call) and _is_dynamic(decorator)):
            name = f"self.{func.name}" if func.cls is not None else func.name
            compiled.setdefault(name, []).append(None if func.parent is None else func.parent)
    return compiled


def _is_dynamic(call: ast.Call) -> bool:
    return any(k.arg == "dynamic" and isinstance(k.value, ast.Constant) and k.value.value is True
               for k in call.keywords)


def _compiled_callee_name(index: _Index, site: _Site, compiled) -> Optional[str]:
    callee = site.call.func
    if isinstance(callee, ast.Call):  # torch.compile(f)(x, lr)
        if index.is_torch_compile(_dotted(callee.func)) and not _is_dynamic(callee):
            return "torch.compile(...)"
        return None
    name = _dotted(callee)
    if name is None or name not in compiled:
        return None
    visible = compiled[name]
    scope_chain = set()
    scope = site.func
    while scope is not None:
        scope_chain.add(scope)
        scope = scope.parent
    return name if any(v is None or v in scope_chain for v in visible) else None


def _scalar_names(index: _Index, scope: Optional[_Func]) -> set[str]:
    """Names all of whose bindings in `scope` are Python scalars (module constants count)."""
    module = _scalar_fixed_point(index.bindings, set())
    if scope is None:
        return module
    return _scalar_fixed_point(scope.bindings, module)


def _scalar_fixed_point(bindings: dict[str, list[Kind]], known: set[str]) -> set[str]:
    names = {n for n, kinds in bindings.items() if all(k is not None for k in kinds)}
    changed = True
    while changed:
        changed = False
        allowed = names | (known - set(bindings))
        for name in list(names):
            if any(not kind <= allowed for kind in bindings[name]):  # type: ignore[operator]
                names.discard(name)
                changed = True
    return names | (known - set(bindings))


def _varying_scalar(arg: ast.expr, loops: tuple[_Loop, ...], scalars: set[str]):
    """(name, loop) when `arg` is a scalar expression using a scalar name that the loop changes."""
    if isinstance(arg, ast.Starred):
        return None
    kind = _scalar_kind(arg)
    if not kind:
        return None
    for name in sorted(kind):
        if name not in scalars:
            return None
    for name in sorted(kind):
        for loop in reversed(loops):
            if name in loop.targets or name in loop.assigned:
                return name, loop
    return None


# ===== output ==================================================================================

class _Output:
    """Findings with document positions (1-based; columns in characters), once per place."""

    def __init__(self, path: str, lines: list[str]):
        self.path = path
        self.lines = lines
        self.found: dict[tuple, Finding] = {}

    def add(self, node: ast.AST, code: str, message: str, data: dict, chain=(), predicted=False) -> None:
        line, column, end_line, end_column = self.range_of(node)
        key = (code, line, column, end_line, end_column)
        if key in self.found:
            return
        related = [Frame(self.path, f.line, f.name) for f in chain]
        self.found[key] = Finding(self.path, line, column, end_line, end_column, CODES[code][0], code,
                                  message, related=related, data=data, predicted=predicted)

    def sorted(self) -> list[Finding]:
        return sorted(self.found.values(), key=lambda f: (f.line, f.column, f.code))

    def range_of(self, node: ast.AST) -> tuple[int, int, int, int]:
        line = node.lineno  # type: ignore[attr-defined]
        end_line = node.end_lineno or line  # type: ignore[attr-defined]
        end_col = node.end_col_offset if node.end_col_offset is not None else node.col_offset  # type: ignore[attr-defined]
        return (line, self._chars(line, node.col_offset) + 1,  # type: ignore[attr-defined]
                end_line, self._chars(end_line, end_col) + 1)

    def _chars(self, line: int, byte_offset: int) -> int:
        """ast columns are UTF-8 byte offsets; the contract's are characters."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        if text.isascii():
            return byte_offset
        return len(text.encode("utf-8")[:byte_offset].decode("utf-8", "ignore"))

    def statement_of(self, call: ast.Call) -> Optional[list[int]]:
        """The call's statement range when it is one on its own (a fix can delete or guard it)."""
        line, column, end_line, end_column = self.range_of(call)
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        if text[:column - 1].strip() or (end_line == line and text[end_column - 1:].split("#")[0].strip()):
            return None
        return [line, column, end_line, end_column]

    def text_of(self, node: ast.AST) -> str:
        line, column, end_line, end_column = self.range_of(node)
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return text[column - 1:end_column - 1] if end_line == line else text[column - 1:] + " …"


_CACHE = _ChunkCache()
