"""Static lints: the usual graph-break patterns and recompile hazards, from `ast` alone.

CL1xx predict graph breaks inside code that `torch.compile` will trace: the `forward` of
`nn.Module` subclasses, `@torch.compile` functions, functions passed to `torch.compile(...)`, and
the helpers in this file that they call. CL2xx flag recompile hazards anywhere in the file.

No torch and no pygls: this runs in the language server on every keystroke. `ast.parse` alone takes
longer than the budget on a 5,000-line file, so parsing is incremental: each top-level statement is
parsed on its own and cached by its text, and so are the facts read from it; a keystroke re-parses
one statement and re-runs only the cheap cross-statement resolution. A cached statement that moved
(lines added above it) keeps its tree: its facts carry the line offset, added on output.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import re
import threading
import warnings
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
    with _LOCK, _gc_paused():  # cached chunks' offsets change per call; one lint at a time
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


@contextlib.contextmanager
def _gc_paused():
    """Parsing a large file makes ~10^5 objects, and the collector, triggered over and over by
    them, doubles the time of a first lint; nothing here needs it while it runs."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _normalise_newlines(source: str) -> str:
    # The parser treats \r\n and \r as \n; doing the same keeps our line numbers equal to its.
    if "\r" in source:
        source = source.replace("\r\n", "\n").replace("\r", "\n")
    # A byte-order mark is an error in a str for the parser (line 1 then counts columns after it).
    return source[1:] if source.startswith("\ufeff") else source


# ===== incremental parsing =====================================================================

_LOCK = threading.Lock()
_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)
_TRIPLE_QUOTE = re.compile(r"\"\"\"|'''")
_CONTINUATION = re.compile(r"(?:else|elif|except|finally)\b")  # these lines continue a statement


@dataclass(eq=False)
class _Chunk:
    """One or more consecutive top-level statements, parsed, with the facts read from them."""

    text: str
    start: int  # 0-based line index of its first line in the document
    facts: _Facts

    @classmethod
    def parse(cls, text: str, start: int) -> Optional[_Chunk]:
        try:
            with warnings.catch_warnings():  # SyntaxWarnings of half-typed code: not ours to log
                warnings.simplefilter("ignore")
                # Leading newlines make the parser number lines as in the document.
                tree = ast.parse("\n" * start + text)
        except _PARSE_ERRORS:
            return None
        return cls(text, start, _extract(tree))

    def move_to(self, start: int) -> None:
        """Lines above were added or removed: the tree keeps its numbers, the facts an offset."""
        self.facts.delta += start - self.start
        self.start = start


class _ChunkCache:
    """Per document: chunk text -> the parsed chunks with that text (a text can occur twice).

    Only the documents linted last are kept (a 5,000-line file's trees take ~15 MB)."""

    def __init__(self, max_files: int = 8, max_lines: int = 20_000):
        self._files: OrderedDict[str, dict[str, list[_Chunk]]] = OrderedDict()
        self._lines: dict[str, int] = {}
        self._max_files = max_files
        self._max_lines = max_lines

    def forget(self, path: str) -> None:
        self._files.pop(path, None)
        self._lines.pop(path, None)

    def chunks(self, path: str, source: str) -> Optional[list[_Chunk]]:
        lines = source.split("\n")
        starts = _top_level_starts(lines, source)
        spans = list(zip(starts, starts[1:] + [len(lines)]))
        old = self._files.pop(path, {})
        result: list[_Chunk] = []
        i = 0
        while i < len(spans):
            chunk, used = self._chunk_at(spans, i, lines, old)
            if chunk is None and result:
                # The statement may begin in the previous chunk, which parsed alone (an `if`
                # before a continuation we did not recognise): join it with all that follows.
                previous = result.pop()
                chunk = _Chunk.parse("\n".join(lines[previous.start:]), previous.start)
                used = len(spans) - i
            if chunk is None:  # a syntax error: keep the cache as it was, the user is mid-edit
                self._remember(path, _by_text(result, old), len(lines))
                return None
            result.append(chunk)
            i += used
        self._remember(path, _by_text(result, {}), len(lines))
        return result

    def _chunk_at(self, spans, i, lines, old) -> tuple[Optional[_Chunk], int]:
        """The chunk starting at span i, and how many spans it took: when span i does not parse
        alone (a line at column 0 inside brackets, say), it is joined with the next 1, 3, 7, ...
        spans (a parse that fails early is cheap: no tree is built). A guessed boundary that is
        wrong always leaves the chunk before it unfinished (an open bracket or string), so joining
        forward finds the whole statement; failing to the end of the file is a syntax error."""
        start, used = spans[i][0], 1
        while True:
            end = min(i + used, len(spans))
            text = "\n".join(lines[start:spans[end - 1][1]])
            chunk = _take(old, text, start) or _Chunk.parse(text, start)
            if chunk is not None:
                return chunk, end - i
            if end == len(spans):
                return None, 0
            used *= 2

    def _remember(self, path: str, chunks: dict[str, list[_Chunk]], n_lines: int) -> None:
        self._files[path] = chunks  # (re)inserted last: the most recently used
        self._lines[path] = n_lines
        while len(self._files) > 1 and (len(self._files) > self._max_files
                                        or sum(self._lines.values()) > self._max_lines):
            evicted, _ = self._files.popitem(last=False)
            self._lines.pop(evicted, None)


def _by_text(chunks: list[_Chunk], into: dict[str, list[_Chunk]]) -> dict[str, list[_Chunk]]:
    for chunk in chunks:
        into.setdefault(chunk.text, []).append(chunk)
    return into


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
        if line[0] in "ef" and _CONTINUATION.match(line):
            continue
        boundary = not after_decorator
        after_decorator = line[0] == "@"
        if boundary and i:
            starts.append(i)
    return starts


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
    facts: _Facts  # of the chunk it is in (for its line offset)
    decorators: list[str] = field(default_factory=list)  # dotted (a call's callee for `@f(...)`)
    children: list[_Func] = field(default_factory=list)  # nested defs and lambdas
    nested: dict[str, _Func] = field(default_factory=dict)  # nested defs by name
    name_calls: list[tuple[str, ast.Call]] = field(default_factory=list)  # f(...)
    self_calls: list[tuple[str, ast.Call]] = field(default_factory=list)  # self.f(...)
    candidates: list[tuple] = field(default_factory=list)  # raw CL1xx material, see _on_call
    bindings: dict[str, list[Kind]] = field(default_factory=dict)


class _Site(NamedTuple):
    """A call somewhere in the file, with where it sits."""

    call: ast.Call
    callee: Optional[str]  # the called name, dotted ("torch.compile"), when it is one
    func: Optional[_Func]  # innermost enclosing function (None: module or class level)
    loops: tuple[_Loop, ...]  # enclosing loops inside that function, innermost last
    guarded: bool  # under an `if` inside that loop/function: likely a one-time or cached compile
    facts: _Facts


class _Ctx(NamedTuple):
    func: Optional[_Func]
    cls: Optional[_Class]  # set only directly in a class body
    loops: tuple[_Loop, ...]
    guarded: bool


_TOP = _Ctx(None, None, (), False)


@dataclass(eq=False)
class _Facts:
    delta: int = 0  # add to the tree's line numbers: the chunk moved since it was parsed
    imports: list[tuple[str, str]] = field(default_factory=list)  # (local name, qualified name)
    module_calls: list[tuple[str, str]] = field(default_factory=list)  # `name = f(...)` at top level
    classes: list[_Class] = field(default_factory=list)
    functions: list[_Func] = field(default_factory=list)  # module-level defs
    all_funcs: list[_Func] = field(default_factory=list)  # every def, any depth
    compile_decorated: list[_Func] = field(default_factory=list)  # `@<...>compile` defs
    lambdas: dict[ast.Lambda, _Func] = field(default_factory=dict)
    compile_calls: list[_Site] = field(default_factory=list)  # calls of a `*compile` callee
    loop_calls: list[_Site] = field(default_factory=list)  # every call inside a loop
    compiled_assigns: list[tuple[str, ast.Call, Optional[_Func]]] = field(default_factory=list)
    bindings: dict[str, list[Kind]] = field(default_factory=dict)  # module scope


def _extract(tree: ast.Module) -> _Facts:
    """Everything the lints need from one chunk's tree; the tree itself is not kept."""
    return _Extractor(tree).facts


class _Extractor:
    """One iterative pass over a chunk: each node is handled with the context it sits in."""

    def __init__(self, tree: ast.Module):
        self.facts = _Facts()
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
        qualname = f"{owner}.{node.name}" if owner else node.name
        func = _Func(node, node.name, qualname, ctx.cls, ctx.func, self.facts)
        for dec in node.decorator_list:
            callee = dec.func if isinstance(dec, ast.Call) else dec
            func.decorators.append(_dotted(callee) or "")
        self.facts.all_funcs.append(func)
        if any(d.endswith("compile") for d in func.decorators):
            self.facts.compile_decorated.append(func)
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
        qualname = f"{owner}.<lambda>" if owner else "<lambda>"
        func = _Func(node, "<lambda>", qualname, None, ctx.func, self.facts)
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
                    head, _, rest = dotted.partition(".")
                    func.candidates.append(("call", node, (dotted, head, rest.rpartition(".")[2])))
                elif isinstance(value, ast.Call) and callee.attr in _LOG_METHODS:
                    func.candidates.append(("logcall", node, _dotted(value.func)))
                if callee.attr in _TENSOR_TO_PYTHON:
                    func.candidates.append((callee.attr, node, None))
        if dotted is not None and dotted.endswith("compile"):
            self.facts.compile_calls.append(_Site(node, dotted, func, ctx.loops, ctx.guarded, self.facts))
        if ctx.loops:
            self.facts.loop_calls.append(_Site(node, dotted, func, ctx.loops, ctx.guarded, self.facts))
        self._push(_children(node), ctx)

    def _on_assign(self, node, ctx: _Ctx) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        for target in targets:
            for name, kind in _assigned_kinds(target, value):
                self._bind(ctx, name, kind)
            if isinstance(value, ast.Call):
                name = _dotted(target)
                callee = _dotted(value.func) or ""
                if name is not None and callee.endswith("compile"):  # `fast = torch.compile(...)`
                    self.facts.compiled_assigns.append((name, value, ctx.func))
                if name is not None and ctx.func is None and ctx.cls is None:
                    self.facts.module_calls.append((name, callee))
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
    if default is not None and _scalar_kind(default) == SCALAR:
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


_SCALAR_ITERATORS = frozenset({"range", "count"})  # not torch.arange: it yields 0-d tensors


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
_DYNAMO_DISABLE = frozenset({"torch.compiler.disable", "torch._dynamo.disable"})
# torch.* calls in a condition that are static to Dynamo (configuration and shape queries).
_STATIC_TORCH_PREFIXES = ("is_", "are_", "get_", "has_")
_STATIC_TORCH_NAMES = frozenset({"numel", "typename", "finfo", "iinfo", "result_type",
                                 "promote_types", "can_cast", "broadcast_shapes", "Size", "device",
                                 "dtype"})
_STATIC_TORCH_MODULES = frozenset({"cuda", "backends", "distributed", "jit", "compiler", "_dynamo",
                                   "fx", "onnx", "_C", "version", "mps", "xpu", "cpu", "overrides",
                                   "_guards", "_utils", "utils", "testing", "hub"})


class _Index:
    """Names across the whole file: imports, classes, functions, compile calls."""

    def __init__(self, all_facts: list[_Facts]):
        self.aliases: dict[str, str] = {}
        self.functions: dict[str, _Func] = {}  # module level, by name (the last def wins)
        self.classes: dict[str, _Class] = {}
        self.lambdas: dict[ast.Lambda, _Func] = {}
        self.bindings: dict[str, list[Kind]] = {}  # module scope
        self.all_funcs: list[_Func] = []
        self.compile_decorated: list[_Func] = []
        self.loop_calls: list[_Site] = []
        self.compiled_assigns: list[tuple[str, ast.Call, Optional[_Func]]] = []
        candidates: list[_Site] = []
        module_calls: list[tuple[str, str]] = []
        for facts in all_facts:
            self.aliases.update(facts.imports)
            self.functions.update((f.name, f) for f in facts.functions)
            self.classes.update((c.name, c) for c in facts.classes)
            self.lambdas.update(facts.lambdas)
            for name, kinds in facts.bindings.items():
                self.bindings.setdefault(name, []).extend(kinds)
            self.all_funcs += facts.all_funcs
            self.compile_decorated += facts.compile_decorated
            self.loop_calls += facts.loop_calls
            self.compiled_assigns += facts.compiled_assigns
            candidates += facts.compile_calls
            module_calls += facts.module_calls
        self.compile_calls = [s for s in candidates if self.is_torch_compile(s.callee)]
        self.numpy_names = {local for local, name in self.aliases.items()
                            if name == "numpy" or name.startswith("numpy.")}
        self.loggers = {name for name, callee in module_calls
                        if self.resolve(callee) == "logging.getLogger"}
        self.module_classes = self._module_classes(all_facts)

    def resolve(self, dotted: Optional[str]) -> str:
        """Through the file's imports: `np.mean` -> `numpy.mean`, `nn.Module` -> `torch.nn.Module`."""
        if not dotted:
            return ""
        head, dot, rest = dotted.partition(".")
        return self.aliases.get(head, head) + dot + rest

    def is_torch_compile(self, dotted: Optional[str]) -> bool:
        return bool(dotted) and self.resolve(dotted) == "torch.compile"

    def _module_classes(self, all_facts: list[_Facts]) -> set[_Class]:
        """nn.Module subclasses, directly or through other classes of this file."""
        found: set[_Class] = set()
        names: set[str] = set()
        pending = [c for facts in all_facts for c in facts.classes]
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

    def call_target(self, call: ast.Call, scope: Optional[_Func]) -> Optional[_Func]:
        """The def in this file a call runs: `f(...)` or `self.f(...)`."""
        callee = call.func
        if isinstance(callee, ast.Name):
            return self.callee(callee.id, scope)
        if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name) and callee.value.id == "self":
            return self.method(_method_class(scope), callee.attr)
        return None

    def compiled_function(self, site: _Site) -> Optional[_Func]:
        """The function a `torch.compile(f)` call compiles, when it is defined in this file."""
        arg = _compile_arg(site)
        if isinstance(arg, ast.Lambda):
            return self.lambdas.get(arg)
        if isinstance(arg, ast.Name):
            return self.callee(arg.id, site.func)
        if (isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name)
                and arg.value.id == "self" and site.func is not None):
            return self.method(_method_class(site.func), arg.attr)
        return None

    def compile_decorator(self, func: _Func) -> Optional[ast.expr]:
        """Its `@torch.compile` / `@torch.compile(...)` decorator, if it has one."""
        if func not in self.compile_decorated or isinstance(func.node, ast.Lambda):
            return None
        for dec in func.node.decorator_list:
            if self.is_torch_compile(_dotted(dec.func if isinstance(dec, ast.Call) else dec)):
                return dec
        return None

    def is_dynamo_disabled(self, func: _Func) -> bool:
        return any(self.resolve(d) in _DYNAMO_DISABLE for d in func.decorators)

    def is_static_torch_call(self, resolved: str) -> bool:
        parts = resolved.split(".")
        if len(parts) > 2 and parts[1] in _STATIC_TORCH_MODULES:
            return True
        last = parts[-1]
        return last != "is_nonzero" and (last.startswith(_STATIC_TORCH_PREFIXES)
                                         or last in _STATIC_TORCH_NAMES)


def _compile_arg(site: _Site) -> Optional[ast.expr]:
    """What a torch.compile call compiles (None: `torch.compile(mode=...)`, a decorator)."""
    call = site.call
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "model"), None)


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


def _frame(call: ast.AST, func: Optional[_Func], facts: _Facts) -> Frame:
    """A caller's frame, for `related` (the path is filled in by _Output)."""
    return Frame("", call.lineno + facts.delta, func.qualname if func else "<module>")


# ===== CL1xx: graph breaks predicted inside compiled code ======================================

def _compiled_roots(index: _Index) -> list[_Func]:
    """Where tracing starts: forward of modules, @torch.compile defs, torch.compile(f) arguments."""
    roots: list[_Func] = []
    for cls in index.module_classes:
        forward = cls.methods.get("forward")
        if forward is not None:
            roots.append(forward)
    roots += [f for f in index.compile_decorated if index.compile_decorator(f) is not None]
    for site in index.compile_calls:
        func = index.compiled_function(site)
        if func is not None:
            roots.append(func)
    roots.sort(key=lambda f: (f.node.lineno + f.facts.delta, f.node.col_offset))
    return roots


def _traced_functions(index: _Index) -> list[tuple[_Func, _Func, tuple[Frame, ...]]]:
    """(function, the root it is traced from, the call chain to it) for the roots and every helper
    in this file they call, directly or through other helpers; each once, by its shortest chain."""
    out = []
    seen: set[_Func] = set()
    queue = [(root, root, ()) for root in _compiled_roots(index)]
    while queue:
        func, root, chain = queue.pop(0)
        if func in seen or index.is_dynamo_disabled(func):
            continue
        seen.add(func)
        out.append((func, root, chain))
        for inner in _with_nested(func):
            for name, call in inner.name_calls:
                target = index.callee(name, inner)
                if target is not None and target not in seen:
                    queue.append((target, root, chain + (_frame(call, inner, inner.facts),)))
            for name, call in inner.self_calls:
                target = index.method(_method_class(inner), name)
                if target is not None and target not in seen:
                    queue.append((target, root, chain + (_frame(call, inner, inner.facts),)))
    return out


def _predicted_breaks(index: _Index, out: _Output) -> None:
    for func, root, chain in _traced_functions(index):
        lint = _Lint(index, out, func, root, chain)
        for inner in _with_nested(func):
            lint.facts = inner.facts
            for kind, node, info in inner.candidates:
                lint.candidate(kind, node, info)
            for name, call in inner.name_calls:
                if name in index.numpy_names:  # `from numpy import mean`
                    lint.numpy_call(call, name)


class _Lint:
    """The CL1xx findings of one traced function (and the defs nested in it)."""

    def __init__(self, index: _Index, out: _Output, func: _Func, root: _Func, chain: tuple):
        self.index, self.out, self.chain = index, out, chain
        self.facts = func.facts
        self.context = {"function": func.qualname, "root": root.qualname}
        if func is root:
            self.where = "inside compiled code"
        else:
            self.where = f"in `{func.qualname}` (called from compiled `{root.qualname}`)"

    def add(self, node: ast.AST, code: str, message: str, **data) -> None:
        self.out.add(node, self.facts, code, message + PREDICTED, dict(self.context, **data),
                     self.chain, predicted=True)

    def candidate(self, kind: str, node: ast.AST, info) -> None:
        if kind == "print":
            self.add(node, "CL101", f"print() {self.where} will likely break the graph", kind="print",
                     statement=self.out.statement_of(node, self.facts))
        elif kind in _TENSOR_TO_PYTHON:
            why = {"item": "it copies a tensor value into Python",
                   "tolist": "it copies tensor values into a Python list",
                   "numpy": "it turns the tensor into a NumPy array"}[kind]
            self.add(node, _TENSOR_TO_PYTHON[kind],
                     f"`.{kind}()` {self.where} will likely break the graph: {why}", kind=kind)
        elif kind == "branch":
            self.branch(node, *info)
        elif kind == "call":
            self.dotted_call(node, *info)
        elif kind == "logcall" and self.index.resolve(info) == "logging.getLogger":
            self.logging_call(node, "logging.getLogger(...)." + node.func.attr)

    def branch(self, test: ast.expr, keyword: str, reducers: list, calls: list) -> None:
        index = self.index
        reduces = any(index.resolve(_dotted(r.func.value)).split(".")[0] not in ("numpy", "math")
                      for r in reducers)
        torch_call = any(index.resolve(d).startswith("torch.")
                         and not index.is_static_torch_call(index.resolve(d)) for d, _ in calls)
        if not (reduces or torch_call):
            return
        what = {"if": "`if` on a tensor value", "while": "`while` on a tensor value",
                "ifexp": "a conditional expression on a tensor value"}[keyword]
        self.add(test, "CL105", f"{what} {self.where} will likely break the graph: the branch depends "
                 "on the data", kind="branch", condition=self.out.text_of(test, self.facts))

    def dotted_call(self, call: ast.Call, dotted: str, head: str, method: str) -> None:
        if head in self.index.numpy_names:
            self.numpy_call(call, dotted)
        elif method in _LOG_METHODS:
            receiver = dotted.rpartition(".")[0]
            if self.index.resolve(receiver) == "logging" or receiver in self.index.loggers:
                self.logging_call(call, dotted)

    def numpy_call(self, call: ast.Call, dotted: str) -> None:
        self.add(call, "CL106", f"NumPy call `{dotted}()` {self.where} may break the graph (Dynamo "
                 "traces many NumPy functions, not all)", kind="numpy-call", call=dotted)

    def logging_call(self, call: ast.Call, dotted: str) -> None:
        self.add(call, "CL107", f"logging call `{dotted}()` {self.where} will likely break the graph",
                 kind="logging", call=dotted, statement=self.out.statement_of(call, self.facts))


# ===== CL2xx: recompile hazards ================================================================

def _recompile_hazards(index: _Index, out: _Output) -> None:
    in_functions = _repeated_compiles(index, out)
    _compiles_in_repeated_calls(index, out, in_functions)
    _varying_scalar_args(index, out)


def _repeated_compiles(index: _Index, out: _Output) -> dict[_Func, list[_Site]]:
    """CL201 (in a loop, or in forward) and CL202 (a fresh lambda/closure). Returns, per function,
    the compile calls not flagged yet: they are hazards if the function runs in a loop."""
    in_functions: dict[_Func, list[_Site]] = {}
    for site in index.compile_calls:
        if site.guarded or _compile_arg(site) is None:
            continue  # guarded: `if self._compiled is None: ...`, compiled once; no argument: a decorator
        func = site.func
        fresh = _fresh_callable(index, site)
        if fresh is not None and (site.loops or (func is not None and func.name != "__init__")):
            _fresh_compile(out, site, fresh)
        elif site.loops and not _compiles_loop_item(_compile_arg(site), site.loops):
            loop_line = site.loops[-1].node.lineno + site.facts.delta
            out.add(site.call, site.facts, "CL201", "torch.compile() inside a loop compiles again on "
                    f"every iteration: hoist it out of the loop (line {loop_line})",
                    {"kind": "compile-in-loop", "loop_line": loop_line})
        elif func is not None and func.name == "forward" and func.cls in index.module_classes:
            out.add(site.call, site.facts, "CL201", f"torch.compile() inside `{func.qualname}` compiles "
                    "again on every call of the model: compile once, in `__init__` or where the model "
                    "is built", {"kind": "compile-in-forward", "function": func.qualname})
        elif func is not None:
            in_functions.setdefault(func, []).append(site)
    for func in index.compile_decorated:
        decorator = index.compile_decorator(func)
        outer = func.parent
        if decorator is not None and func.cls is None and outer is not None and outer.name != "__init__":
            _fresh_compile(out, _Site(decorator, None, outer, (), False, func.facts), func)
    return in_functions


def _fresh_callable(index: _Index, site: _Site) -> Optional[_Func]:
    """The lambda or nested def a torch.compile call compiles, when it is created anew each time."""
    arg = _compile_arg(site)
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
    out.add(site.call, site.facts, "CL202", f"{what} {runs}: define the function once (at module "
            "level) and compile it once", {"kind": kind, "function": outer, "closure": fresh.name,
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
    names = {f.name for f in compiling}
    flagged: set[ast.Call] = set()
    for loop_call in index.loop_calls:
        if (loop_call.callee or "").rpartition(".")[2] not in names:
            continue  # cheap test first: most calls in loops are not to these functions
        callee = index.call_target(loop_call.call, loop_call.func)
        if callee is None or callee not in compiling:
            continue
        caller_line = loop_call.call.lineno + loop_call.facts.delta
        chain = (_frame(loop_call.call, loop_call.func, loop_call.facts),)
        for func, via in _paths_to_sites(index, callee, compiling, sites, chain):
            for site in sites[func]:
                if site.call in flagged:
                    continue
                flagged.add(site.call)
                out.add(site.call, site.facts, "CL201", f"torch.compile() runs on every call of "
                        f"`{callee.qualname}`, which is called in a loop (line {caller_line}): each "
                        "call compiles again — compile once, outside the loop, and reuse it",
                        {"kind": "compile-in-repeated-call", "function": callee.qualname,
                         "caller_line": caller_line}, via)


def _calls_of(index: _Index, func: _Func) -> list[tuple[_Func, ast.Call, _Func]]:
    """(callee, call, the def the call is in) for the calls a function makes to this file's defs."""
    out = []
    for inner in _with_nested(func):
        for _, call in inner.name_calls + inner.self_calls:
            target = index.call_target(call, inner)
            if target is not None:
                out.append((target, call, inner))
    return out


def _is_cached(func: _Func) -> bool:
    return any(d.rsplit(".", 1)[-1] in _CACHE_DECORATORS for d in func.decorators)


def _functions_reaching(index: _Index, targets: set[_Func]) -> set[_Func]:
    """The functions that, when called, run one of `targets` (themselves included); a cached
    function (`@functools.cache`) runs its body once, so it stops the chain."""
    reaching = {f for f in targets if not _is_cached(f)}
    callers: dict[str, list[tuple[_Func, ast.Call]]] = {}  # called name -> (caller, call)
    for func in index.all_funcs:
        for name, call in func.name_calls + func.self_calls:
            callers.setdefault(name, []).append((func, call))
    pending = list(reaching)
    while pending:
        target = pending.pop()
        for inner, call in callers.get(target.name, ()):
            if index.call_target(call, inner) is not target:
                continue
            caller = inner
            while caller.parent is not None and caller.cls is None:  # a nested def runs in its parent
                caller = caller.parent
            if caller not in reaching and not _is_cached(caller):
                reaching.add(caller)
                pending.append(caller)
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
                queue.append((target, via + (_frame(call, inner, inner.facts),)))
    return out


def _varying_scalar_args(index: _Index, out: _Output) -> None:
    """CL203: `for lr in ...: step(x, lr)` where `step` is compiled: each new value may recompile."""
    compiled = _compiled_callables(index)
    module_scalars: Optional[set[str]] = None
    scalars: dict[_Func, set[str]] = {}
    for site in index.loop_calls:
        name = _compiled_callee_name(index, site, compiled)
        if name is None:
            continue
        args = [a for a in site.call.args + [k.value for k in site.call.keywords] if _scalar_kind(a)]
        if not args:
            continue
        if module_scalars is None:
            module_scalars = _scalar_fixed_point(index.bindings, set())
        if site.func is None:
            known = module_scalars
        else:
            if site.func not in scalars:
                scalars[site.func] = _scalar_fixed_point(site.func.bindings, module_scalars)
            known = scalars[site.func]
        for arg in args:
            varying = _varying_scalar(arg, site.loops, known)
            if varying is not None:
                var, loop = varying
                loop_line = loop.node.lineno + site.facts.delta
                out.add(arg, site.facts, "CL203", f"each new value of `{var}` may recompile `{name}` "
                        f"(`{var}` changes in the loop at line {loop_line}): pass it as a tensor or "
                        "mark it dynamic", {"kind": "scalar-arg", "name": var, "callee": name,
                                            "loop_line": loop_line})


def _compiled_callables(index: _Index) -> dict[str, list[Optional[_Func]]]:
    """Names bound to a compiled callable -> the scopes where the binding is visible (None: all).
    `dynamic=True` ones are left out: they do not recompile for new scalar values."""
    compiled: dict[str, list[Optional[_Func]]] = {}
    for name, call, scope in index.compiled_assigns:
        if index.is_torch_compile(_dotted(call.func)) and not _is_dynamic(call):
            visible = None if scope is None or "." in name else scope
            compiled.setdefault(name, []).append(visible)
    for func in index.compile_decorated:
        decorator = index.compile_decorator(func)
        if decorator is not None and not (isinstance(decorator, ast.Call) and _is_dynamic(decorator)):
            name = f"self.{func.name}" if func.cls is not None else func.name
            compiled.setdefault(name, []).append(None if func.parent is None else func.parent)
    return compiled


def _is_dynamic(call: ast.Call) -> bool:
    return any(k.arg == "dynamic" and isinstance(k.value, ast.Constant) and k.value.value is True
               for k in call.keywords)


def _compiled_callee_name(index: _Index, site: _Site, compiled) -> Optional[str]:
    """The name a call in a loop calls, when that is a compiled callable visible there."""
    callee = site.call.func
    if isinstance(callee, ast.Call):  # torch.compile(f)(x, lr)
        if index.is_torch_compile(_dotted(callee.func)) and not _is_dynamic(callee):
            return "torch.compile(...)"
        return None
    visible = compiled.get(site.callee or "")
    if not visible:
        return None
    scopes = set()
    scope = site.func
    while scope is not None:
        scopes.add(scope)
        scope = scope.parent
    return site.callee if any(v is None or v in scopes for v in visible) else None


def _scalar_fixed_point(bindings: dict[str, list[Kind]], known: set[str]) -> set[str]:
    """Names all of whose bindings in a scope are Python scalars; `known`: the enclosing (module)
    scope's, which count where the scope does not rebind them."""
    inherited = known - set(bindings)
    names = {n for n, kinds in bindings.items() if all(k is not None for k in kinds)}
    changed = True
    while changed:
        changed = False
        allowed = names | inherited
        for name in list(names):
            if any(not kind <= allowed for kind in bindings[name]):  # type: ignore[operator]
                names.discard(name)
                changed = True
    return names | inherited


def _varying_scalar(arg: ast.expr, loops: tuple[_Loop, ...], scalars: set[str]):
    """(name, loop) when `arg` is a scalar expression using a scalar name that the loop changes."""
    kind = _scalar_kind(arg)
    if not kind or not kind <= scalars:
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

    def add(self, node: ast.AST, facts: _Facts, code: str, message: str, data: dict, chain=(),
            predicted=False) -> None:
        line, column, end_line, end_column = self.range_of(node, facts)
        key = (code, line, column, end_line, end_column)
        if key in self.found:
            return
        related = [Frame(self.path, f.line, f.name) for f in chain]
        self.found[key] = Finding(self.path, line, column, end_line, end_column, CODES[code][0], code,
                                  message, related=related, data=data, predicted=predicted)

    def sorted(self) -> list[Finding]:
        return sorted(self.found.values(), key=lambda f: (f.line, f.column, f.code))

    def range_of(self, node: ast.AST, facts: _Facts) -> tuple[int, int, int, int]:
        line = node.lineno + facts.delta  # type: ignore[attr-defined]
        end_line = (node.end_lineno or node.lineno) + facts.delta  # type: ignore[attr-defined]
        end_col = node.end_col_offset  # type: ignore[attr-defined]
        if end_col is None:
            end_col = node.col_offset  # type: ignore[attr-defined]
        return (line, self._chars(line, node.col_offset) + 1,  # type: ignore[attr-defined]
                end_line, self._chars(end_line, end_col) + 1)

    def _chars(self, line: int, byte_offset: int) -> int:
        """ast columns are UTF-8 byte offsets; the contract's are characters."""
        text = self.line(line)
        if text.isascii():
            return byte_offset
        return len(text.encode("utf-8")[:byte_offset].decode("utf-8", "ignore"))

    def line(self, number: int) -> str:
        return self.lines[number - 1] if 0 < number <= len(self.lines) else ""

    def statement_of(self, call: ast.Call, facts: _Facts) -> Optional[list[int]]:
        """The call's range when it is a statement on its own line (a fix can delete or guard it)."""
        line, column, end_line, end_column = self.range_of(call, facts)
        before = self.line(line)[:column - 1]
        after = self.line(end_line)[end_column - 1:].split("#", 1)[0]
        if before.strip() or after.strip():
            return None
        return [line, column, end_line, end_column]

    def text_of(self, node: ast.AST, facts: _Facts) -> str:
        line, column, end_line, end_column = self.range_of(node, facts)
        text = self.line(line)
        return text[column - 1:end_column - 1] if end_line == line else text[column - 1:] + " …"


_CACHE = _ChunkCache()
