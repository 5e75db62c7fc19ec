"""Find the targets in a file and the recipe to call each one. Pure `ast`: no torch, no imports.

A target is an `nn.Module` subclass or a `@torch.compile` function at module level. Its inputs
come from a `# compile-lens:` directive, else are inferred from the first layer `forward` uses.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from typing import Iterator, Optional

from .protocol import InputRecipe, TargetSpec

DIRECTIVE = re.compile(r"#\s*compile-lens:\s*(?P<body>.*)$")
IGNORE = re.compile(r"^ignore\b")
_DIRECTIVE_START = re.compile(r"#\s*compile-lens:")

BATCH = 8  # a small default batch for inferred inputs


@dataclass
class DirectiveError:
    line: int
    message: str


@dataclass
class Discovery:
    targets: list[TargetSpec] = field(default_factory=list)
    errors: list[DirectiveError] = field(default_factory=list)
    fingerprint: str = ""


def discover(source: str) -> Optional[Discovery]:
    """Targets of one file, or None when it does not parse (mid-typing)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    lines = source.splitlines()
    found = Discovery(fingerprint=fingerprint(tree))
    module_classes, maybe_modules = _module_classes(tree)
    constants = _module_constants(tree)
    # `compiled = torch.compile(fn)`: a plain function compiled at a call site is a target too
    functions = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    compiled_at = {site.target: site.options for site in compile_call_sites(tree, functions)}
    used: set[int] = set()  # directive lines that belong to a target
    for node in tree.body:
        spec: Optional[TargetSpec] = None
        if isinstance(node, ast.ClassDef) and (node.name in module_classes or node.name in maybe_modules):
            spec = _module_target(node, constants)
            spec.maybe_module = node.name in maybe_modules
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            options = _compile_decorator(node)
            if options is None and node.name in compiled_at:
                options = dict(compiled_at[node.name])
            if options is None and _has_directive(node, lines):
                options = {}  # the user said how to call it: a plain function is a target too
            if options is not None:
                spec = TargetSpec(node.name, "function", node.lineno, compile_options=options)
                spec.problem = (f"no example inputs for `{node.name}`: add "
                                f"`# compile-lens: inputs=(...)` above it")
        if spec is None:
            continue
        _name_columns(spec, node, lines)
        spec.end_line = getattr(node, "end_lineno", None) or node.lineno
        directive = _read_directive(node, lines, found.errors, used)
        if directive is not None:
            _apply_directive(spec, directive)
        if spec.kind == "module" and spec.inputs is None and (spec.maybe_module or _library_may_tell(spec)):
            # the source alone cannot tell: the worker guesses after import from what a library
            # publishes, and says `problem` if it cannot either (or drops a class that is no module)
            spec.inputs = InputRecipe("inferred", "", None, after_import=True, note=spec.problem or "")
            spec.problem = None
        spec.fingerprint = found.fingerprint
        found.targets.append(spec)
    found.errors += _stray_directives(tree, lines, used, module_classes | maybe_modules)
    # `model = torch.compile(Net(), dynamic=True)`: the module is compiled with those options
    by_name = {t.name: t for t in found.targets}
    for site in compile_call_sites(tree, set(by_name)):
        if by_name[site.target].kind == "module" and site.options:
            by_name[site.target].compile_options = {**site.options, **by_name[site.target].compile_options}
    return found


def fingerprint(tree: ast.AST) -> str:
    """A hash of what the code does: comments and formatting do not change it."""
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()[:16]


# --- which classes are modules ---------------------------------------------------------------

# Bases that are surely not modules: a class with only these is no target. Any other base the
# source cannot place (a library's `GradientCheckpointingLayer`, a class imported from another
# file) makes the class a *possible* module, which the worker settles with `issubclass` after import.
_NOT_MODULE_BASES = {
    "object", "Exception", "BaseException", "Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "NamedTuple",
    "TypedDict", "Protocol", "Generic", "ABC", "dict", "list", "tuple", "set", "frozenset", "str", "int",
    "float", "bytes", "type", "ABCMeta", "Dataset", "IterableDataset", "DataLoader", "Sampler",
    "Function", "PretrainedConfig", "PreTrainedConfig", "BaseModel", "Namespace", "OrderedDict",
    "defaultdict", "Thread", "Process", "TestCase", "Callback", "Optimizer", "LRScheduler",
}
_NOT_MODULE_SUFFIXES = ("Error", "Exception", "Warning", "Config", "Dataset", "Enum", "Mixin")


def _base_name(base: ast.expr) -> str:
    return base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else ""


def _module_base(base: ast.expr, known: set[str], maybe: set[str], others: set[str], aliases: set[str]) -> Optional[bool]:
    """True: surely an nn.Module (`nn.Module`, `nn.Sequential`, `pl.LightningModule`, a module of
    this file or an alias of one); None: cannot tell from the source; False: surely not."""
    if isinstance(base, ast.Subscript):  # Generic[T], nn.Module has no subscripted form
        return False
    name = _base_name(base)
    if not name:
        return None  # a call (`declarative_base()`): the worker decides
    if isinstance(base, ast.Attribute) and ast.unparse(base.value) in ("nn", "torch.nn") and name[:1].isupper():
        return True  # nn.Module, nn.Sequential, nn.ModuleList, ...
    if name in ("Module", "LightningModule") or name in known or name in aliases:
        return True
    if name in maybe:
        return None
    if name in others or name in _NOT_MODULE_BASES or name.endswith(_NOT_MODULE_SUFFIXES):
        return False
    return None


def _module_aliases(tree: ast.Module) -> set[str]:
    """`Base = nn.Module` (or `= torch.nn.Module`, `= Module`) at module level."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if (isinstance(value, ast.Attribute) and value.attr == "Module") or \
                    (isinstance(value, ast.Name) and (value.id == "Module" or value.id in found)):
                found.add(node.targets[0].id)
    return found


def _module_classes(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(classes that are surely modules, classes that may be: the worker checks those after import)."""
    known: set[str] = set()
    maybe: set[str] = set()
    others: set[str] = set()
    aliases = _module_aliases(tree)
    for node in tree.body:  # in order: a subclass of a subclass defined above it counts
        if not isinstance(node, ast.ClassDef):
            continue
        verdicts = [_module_base(b, known, maybe, others, aliases) for b in node.bases]
        if any(v is True for v in verdicts):
            known.add(node.name)
        elif any(v is None for v in verdicts) and not _is_dataclass(node):
            maybe.add(node.name)
        else:
            others.add(node.name)
    return known, maybe


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any(_base_name(d.func if isinstance(d, ast.Call) else d) == "dataclass" for d in node.decorator_list)


def _compile_decorator(node: ast.FunctionDef | ast.AsyncFunctionDef) -> Optional[dict]:
    """The literal options of `@torch.compile` / `@torch.compile(...)`, or None if not compiled."""
    for dec in node.decorator_list:
        call = dec if isinstance(dec, ast.Call) else None
        func = call.func if call else dec
        if ast.unparse(func) in ("torch.compile", "compile") and (call or isinstance(func, ast.Attribute)):
            return _literal_keywords(call) if call else {}
    return None


def _name_columns(spec: TargetSpec, node: ast.AST, lines: list[str]) -> None:
    row = lines[spec.line - 1] if spec.line <= len(lines) else ""
    match = re.search(rf"\b(class|def)\s+({re.escape(spec.name)})\b", row)
    if match:
        spec.column, spec.end_column = match.start(2) + 1, match.end(2) + 1
    else:
        spec.column, spec.end_column = 1, len(row) + 1


# --- directives --------------------------------------------------------------------------------

def _directive_lines(node: ast.AST, lines: list[str]) -> list[int]:
    """1-based lines that may hold this target's directive: above (and its decorators), on, first in body."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    above = []
    row = first - 1
    while row >= 1 and lines[row - 1].lstrip().startswith("#"):
        above.insert(0, row)
        row -= 1
    candidates = above + [node.lineno]
    body = getattr(node, "body", [])
    if body:
        for row in range(node.lineno + 1, body[0].lineno):
            if lines[row - 1].strip().startswith("#"):
                candidates.append(row)
    return candidates


def directive_at(line_text: str) -> Optional[str]:
    match = DIRECTIVE.search(line_text)
    if not match:
        return None
    body = match["body"].strip()
    return None if IGNORE.match(body) else body


def _has_directive(node: ast.AST, lines: list[str]) -> bool:
    return any(directive_at(lines[row - 1]) for row in _directive_lines(node, lines))


def _read_directive(node: ast.AST, lines: list[str], errors: list[DirectiveError],
                    used: Optional[set[int]] = None) -> Optional[dict]:
    merged: dict = {}
    seen = False
    for row in _directive_lines(node, lines):
        body = directive_at(lines[row - 1])
        if not body:
            continue
        seen = True
        if used is not None:
            used.add(row)
        try:
            call = ast.parse(f"_({body})", mode="eval").body
            assert isinstance(call, ast.Call)
            if call.args:
                raise SyntaxError("use keyword arguments: inputs=(...), init=..., variants=[...]")
            for kw in call.keywords:
                if kw.arg not in ("inputs", "init", "variants"):
                    raise SyntaxError(f"unknown key `{kw.arg}` (expected inputs, init, variants)")
                merged[kw.arg] = kw.value
            merged.setdefault("_line", row)
        except SyntaxError as exc:
            detail = exc.msg if getattr(exc, "msg", None) else str(exc)
            errors.append(DirectiveError(row, f"cannot read this compile-lens directive ({detail}); write "
                                              "keyword arguments separated by commas: inputs=(...), init=Net(...)"))
    return merged if seen and merged else None


def _stray_directives(tree: ast.Module, lines: list[str], used: set[int], modules: set[str]) -> list[DirectiveError]:
    """A `# compile-lens:` directive that belongs to no target: said at the directive, with why."""
    rows = [i + 1 for i, text in enumerate(lines) if i + 1 not in used and directive_at(text)]
    if not rows:
        return []
    strings: dict[int, list[tuple[int, int]]] = {}  # row -> byte spans of string literals on it
    statements: list[ast.stmt] = []
    wanted = set(rows)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Constant, ast.JoinedStr)) and (isinstance(node, ast.JoinedStr) or isinstance(node.value, str)):
            first, last = node.lineno, node.end_lineno or node.lineno
            for row in wanted.intersection(range(first, last + 1)):
                start = node.col_offset if row == first else 0
                end = (node.end_col_offset or 0) if row == last else 1 << 30
                strings.setdefault(row, []).append((start, end))
        elif isinstance(node, ast.stmt):
            statements.append(node)
    errors = []
    for row in rows:
        text = lines[row - 1]
        starts = [len(text[: m.start()].encode()) for m in _DIRECTIVE_START.finditer(text)]
        if all(any(a <= at < b for a, b in strings.get(row, [])) for at in starts):
            continue  # text inside a string, not a comment
        # the statement it is above (or ends the first line of)
        after = [n for n in statements if min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])]) >= row]
        node = min(after, key=lambda n: (n.lineno, -(n.end_lineno or n.lineno)), default=None)
        errors.append(DirectiveError(row, "this compile-lens directive attaches to nothing: " + _why_stray(node, tree, modules)))
    return errors


def _why_stray(node: Optional[ast.stmt], tree: ast.Module, modules: set[str]) -> str:
    fix = "put it on the line above a module-level `class` (an nn.Module) or `def`"
    if node is None:
        return f"no `class` or `def` follows it; {fix}"
    if isinstance(node, ast.ClassDef) and node in tree.body and node.name not in modules:
        return f"`{node.name}` is not an nn.Module subclass (its bases say so); {fix}"
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node in tree.body:
        return f"a blank line or code separates it from `{node.name}`; put it directly above the `{_keyword(node)}` line"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node not in tree.body:
        return (f"`{node.name}` is a method or nested function, which is not analysed on its own; "
                "put the directive above its class (inputs for `forward`)")
    return f"it is at `{ast.unparse(node).splitlines()[0][:60]}`, not a `class` or `def`; {fix}"


def _keyword(node: ast.stmt) -> str:
    return "class" if isinstance(node, ast.ClassDef) else "def"


def _library_may_tell(spec: TargetSpec) -> bool:
    """The guess stopped at something only known after import: a layer that is not torch.nn's (a
    library model), or a `forward` inherited from a base of another file; and it builds with no
    arguments."""
    problem = spec.problem or ""
    return "constructor arguments" not in problem and ("first reaches" in problem or "no `forward` here" in problem)


def _apply_directive(spec: TargetSpec, directive: dict) -> None:
    line = directive.get("_line")
    init = ast.unparse(directive["init"]) if "init" in directive else None
    variants: list[str] = []
    if "variants" in directive:
        value = directive["variants"]
        items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
        variants = [ast.unparse(item) for item in items]
    if "inputs" in directive:
        spec.inputs = InputRecipe("directive", ast.unparse(directive["inputs"]), init, variants, line)
        spec.problem = None
    elif spec.inputs is not None:
        spec.inputs.init = init or spec.inputs.init
        spec.inputs.variants = variants
    elif init is not None and spec.kind == "module":
        # `init=` alone: the worker builds it so and guesses inputs from the library it wraps
        spec.inputs = InputRecipe("inferred", "", init, variants, after_import=True,
                                  note=f"`{spec.name}` has `init=` but no `inputs=` in its compile-lens directive")
        spec.problem = None
    elif init is not None:
        spec.problem = f"`{spec.name}` has `init=` but no `inputs=` in its compile-lens directive"


# --- inferred inputs -------------------------------------------------------------------------
#
# A guess from the source alone. The class is built with its defaults (or with a default config
# object the file defines); each required parameter of `forward` is followed through the body
# (helper methods, loops over `nn.ModuleList`, `nn.Sequential`, modules of this file) to the
# first layer it reaches, and a tensor is shaped for that layer. Values written in the source
# are computed by `_value`, a small interpreter of literals and arithmetic: discovery reads
# files it has no reason to trust, so nothing here calls `eval`.

SEQ = 16  # sequence length of inferred token and time-series inputs
SIDE = 32  # side of inferred images
_BAG = 4  # indices per bag of an inferred EmbeddingBag input with offsets
_CLASSES = "<classes>"  # where _module_constants keeps the file's classes (not a Python name)
_ASSIGNED = "<assigned>"  # and the calls module-level names are bound to (`config = GPT2Config(...)`)
_TOKEN_PARAMS = {"input_ids", "token_ids", "tokens", "idx", "ids"}  # names that mean token indices
_MAX_DEPTH = 6  # nested modules and helper methods followed

_UNKNOWN = object()

# Layers that take any shape and keep the next layer's view of it: looked through.
_SHAPELESS = {
    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
    "Identity", "Flatten", "ReLU", "ReLU6", "GELU", "SiLU", "Mish", "Tanh", "Sigmoid", "Softplus",
    "LeakyReLU", "ELU", "CELU", "SELU", "GLU", "Hardswish", "Hardsigmoid", "Hardtanh", "PReLU",
    "Softmax", "LogSoftmax", "Softsign", "Tanhshrink", "Threshold", "Upsample",
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
}
_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict"}
# The constructor argument that sizes a layer's input: (position, keyword).
_SIZE_ARG = {
    "Linear": (0, "in_features"), "Bilinear": (0, "in1_features"),
    "Embedding": (0, "num_embeddings"), "EmbeddingBag": (0, "num_embeddings"),
    "LayerNorm": (0, "normalized_shape"), "RMSNorm": (0, "normalized_shape"),
    "GroupNorm": (1, "num_channels"),
    "LSTM": (0, "input_size"), "GRU": (0, "input_size"), "RNN": (0, "input_size"),
    "TransformerEncoderLayer": (0, "d_model"), "TransformerDecoderLayer": (0, "d_model"),
    "Transformer": (0, "d_model"), "MultiheadAttention": (0, "embed_dim"),
}
for _dims in ("1d", "2d", "3d"):
    for _norm in ("BatchNorm", "InstanceNorm", "LazyBatchNorm", "LazyInstanceNorm"):
        _SIZE_ARG[_norm + _dims] = (0, "num_features")
_SPATIAL = {"1d": (SIDE,), "2d": (SIDE, SIDE), "3d": (8, 16, 16)}
_NORM_SPATIAL = {"1d": (), "2d": (16, 16), "3d": (8, 8, 8)}
_INTEGER_ANNOTATIONS = {"LongTensor", "IntTensor", "ShortTensor", "ByteTensor", "CharTensor"}
_JAXTYPING_INTS = {"Int", "Int8", "Int16", "Int32", "Int64", "Long", "UInt8", "Integer", "Bool"}
_JAXTYPING_FLOATS = {"Float", "Float16", "Float32", "Float64", "BFloat16", "Shaped", "Real", "Num", "Inexact"}


class _Obj:
    """An object of a config class of this file, as far as its source says."""

    __slots__ = ("attrs",)

    def __init__(self, attrs: dict[str, object]):
        self.attrs = attrs


class _ConfigClass:
    """A config class of this file (a dataclass or a class of plain attributes), callable by `_value`."""

    def __init__(self, node: ast.ClassDef, env: dict[str, object]):
        self.name = node.name
        self.fields: list[tuple[str, object]] = []
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                value = _value(stmt.value, env) if stmt.value is not None else _UNKNOWN
                self.fields.append((stmt.target.id, value))
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                self.fields.append((stmt.targets[0].id, _value(stmt.value, env)))

    @property
    def complete(self) -> bool:
        """`Name()` builds it: every field has a default."""
        return bool(self.fields) and all(v is not _UNKNOWN for _, v in self.fields)

    def __call__(self, *args: object, **kwargs: object) -> object:
        attrs = dict(self.fields)
        for (name, _), value in zip(self.fields, args):
            attrs[name] = value
        attrs.update(kwargs)
        return _Obj({k: v for k, v in attrs.items() if v is not _UNKNOWN})


def _is_config_class(node: ast.ClassDef, known: dict[str, object]) -> bool:
    """A dataclass or a holder of settings: fields, no `__init__`/`forward`, no base but object or another."""
    if any(not (isinstance(b, ast.Name) and (b.id == "object" or isinstance(known.get(b.id), _ConfigClass))) for b in node.bases):
        return False
    fields = 0
    for stmt in node.body:
        if isinstance(stmt, (ast.AnnAssign, ast.Assign)):
            fields += 1
        elif isinstance(stmt, ast.FunctionDef) and stmt.name in ("__init__", "forward"):
            return False
    return fields > 0


def _module_constants(tree: ast.Module) -> dict[str, object]:
    """Module-level names whose values the source tells, config classes, and (under _CLASSES) every class."""
    values: dict[str, object] = {}
    classes: dict[str, ast.ClassDef] = {}
    assigned: dict[str, ast.expr] = {}
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = node
            if _is_config_class(node, values):
                values[node.name] = _ConfigClass(node, values)
        if target is not None:
            known = _value(value, values)
            if known is not _UNKNOWN:
                values[target] = known
            elif isinstance(value, ast.Call):
                assigned[target] = value
    values[_CLASSES], values[_ASSIGNED] = classes, assigned
    return values


def _method(cls: ast.ClassDef, name: str) -> Optional[ast.FunctionDef]:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _inherited(cls: ast.ClassDef, name: str, classes: dict[str, ast.ClassDef]) -> Optional[ast.FunctionDef]:
    """`name` defined by the class or by a base class of this file."""
    seen: set[str] = set()
    queue = [cls]
    while queue:
        node = queue.pop(0)
        if node.name in seen:
            continue
        seen.add(node.name)
        found = _method(node, name)
        if found is not None:
            return found
        queue += [classes[b.id] for b in node.bases if isinstance(b, ast.Name) and b.id in classes]
    return None


def _required_params(fn: ast.FunctionDef) -> list[str]:
    positional = fn.args.posonlyargs + fn.args.args
    required = positional[: len(positional) - len(fn.args.defaults)]
    names = [a.arg for a in required[1:]]  # minus self
    names += [a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is None]
    return names


def _param_defaults(fn: ast.FunctionDef, env: Optional[dict[str, object]] = None) -> dict[str, object]:
    """Parameters whose defaults the source tells (literals, module constants, `Config()`)."""
    env = env or {}
    positional = fn.args.posonlyargs + fn.args.args
    pairs = list(zip(positional[len(positional) - len(fn.args.defaults):], fn.args.defaults))
    pairs += [(a, d) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None]
    values: dict[str, object] = {}
    for arg, default in pairs:
        value = _value(default, env)
        if value is not _UNKNOWN:
            values[arg.arg] = value
    return values


def _module_target(cls: ast.ClassDef, constants: dict[str, object]) -> TargetSpec:
    spec = TargetSpec(cls.name, "module", cls.lineno)
    classes: dict[str, ast.ClassDef] = constants.get(_CLASSES, {})  # type: ignore[assignment]
    init, forward = _inherited(cls, "__init__", classes), _inherited(cls, "forward", classes)
    fix = f"add `# compile-lens: inputs=(...)` above `class {cls.name}`"
    if forward is None:
        spec.problem = f"`{cls.name}` defines no `forward` here: {fix}"
        return spec
    needed = _required_params(init) if init else []
    init_text, bound = _default_config_init(cls.name, init, constants) if needed else (None, {})
    if needed and init_text is None:
        spec.problem = (f"`{cls.name}()` needs constructor arguments ({', '.join(needed)}): add "
                        f"`# compile-lens: init={cls.name}(...) inputs=(...)` above it")
        return spec
    module_env = {k: v for k, v in constants.items() if not k.startswith("<")}
    module_env[_ASSIGNED] = constants.get(_ASSIGNED, {})
    ctx = _Class(cls, init, forward, _class_env(init, module_env, bound), classes, module_env, 0)
    text, why = _guess_inputs(ctx)
    if text is None:
        spec.problem = f"cannot guess inputs for `{cls.name}` ({why}): {fix}"
        return spec
    spec.inputs = InputRecipe("inferred", text, init_text)
    return spec


def _default_config_init(name: str, init: ast.FunctionDef, env: dict[str, object]) -> tuple[Optional[str], dict]:
    """`Net(NetConfig())` when every required argument is a config object this file can build."""
    configs = {k: v for k, v in env.items() if isinstance(v, _ConfigClass) and v.complete}
    args = {a.arg: a for a in init.args.posonlyargs + init.args.args + init.args.kwonlyargs}
    texts, bound = [], {}
    for param in _required_params(init):
        note = args[param].annotation
        hinted = ast.unparse(note).strip("'\"") if note is not None else ""
        config = configs.get(hinted)
        if config is None and param in ("config", "cfg", "conf", "hparams", "params", "args", "opt") and len(configs) == 1:
            config = next(iter(configs.values()))
        if config is None:
            return None, {}
        texts.append(f"{config.name}()")
        bound[param] = config()
    keyword_only = {a.arg for a in init.args.kwonlyargs}
    parts = [f"{p}={t}" if p in keyword_only else t for p, t in zip(bound, texts)]
    return f"{name}({', '.join(parts)})", bound


def _class_env(init: Optional[ast.FunctionDef], constants: dict[str, object], bound: dict[str, object]) -> dict[str, object]:
    env = {k: v for k, v in constants.items() if k != _CLASSES}  # _ASSIGNED stays: not a Python name
    if init is not None:
        env.update(_param_defaults(init, env))
    env.update(bound)
    env["self"] = _Obj({})
    return env


# What the source tells, evaluated without eval.

_BINOPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
}
_COMPARE = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
    ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
}
_FUNCTIONS = {"int": int, "float": float, "bool": bool, "max": max, "min": min, "abs": abs, "round": round,
              "len": len, "tuple": tuple, "list": list, "dict": dict}
_PLAIN = (int, float, bool, str, type(None), tuple, list, dict, _Obj, _ConfigClass)


def _small(value: object) -> bool:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return abs(value) <= 10**12
    if isinstance(value, (tuple, list, str, dict)):
        return len(value) <= 4096
    return True


def _value(node: Optional[ast.expr], env: dict[str, object]) -> object:
    """The value of a literal-ish expression, or _UNKNOWN. Names come from `env` only."""
    try:
        value = _evaluate(node, env)
    except (ArithmeticError, TypeError, ValueError, IndexError, KeyError, AttributeError, RecursionError):
        return _UNKNOWN
    return value if value is _UNKNOWN or (isinstance(value, _PLAIN) and _small(value)) else _UNKNOWN


def _evaluate(node: Optional[ast.expr], env: dict[str, object]) -> object:  # noqa: C901 - one case per node type
    if node is None:
        return _UNKNOWN
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, (int, float, str, bool, type(None))) else _UNKNOWN
    if isinstance(node, ast.Name):
        return env.get(node.id, _UNKNOWN)
    if isinstance(node, ast.Attribute):
        base = _evaluate(node.value, env)
        return base.attrs.get(node.attr, _UNKNOWN) if isinstance(base, _Obj) else _UNKNOWN
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_evaluate(e, env) for e in node.elts]
        if any(i is _UNKNOWN for i in items):
            return _UNKNOWN
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.Dict):
        keys = [_evaluate(k, env) for k in node.keys]
        values = [_evaluate(v, env) for v in node.values]
        if any(x is _UNKNOWN for x in keys + values):
            return _UNKNOWN
        return dict(zip(keys, values))
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, env), _evaluate(node.right, env)
        if left is _UNKNOWN or right is _UNKNOWN:
            return _UNKNOWN
        if isinstance(node.op, ast.Pow):
            if not (isinstance(left, (int, float)) and isinstance(right, int) and 0 <= right <= 64 and abs(left) <= 2**20):
                return _UNKNOWN
            return left**right
        if isinstance(node.op, ast.Mult) and isinstance(left, (tuple, list, str)) != isinstance(right, (tuple, list, str)):
            times = right if isinstance(left, (tuple, list, str)) else left
            if not isinstance(times, int) or times > 4096:
                return _UNKNOWN
        op = _BINOPS.get(type(node.op))
        return op(left, right) if op else _UNKNOWN
    if isinstance(node, ast.UnaryOp):
        operand = _evaluate(node.operand, env)
        if operand is _UNKNOWN:
            return _UNKNOWN
        if isinstance(node.op, ast.Not):
            return not operand
        if isinstance(operand, (int, float)):
            return -operand if isinstance(node.op, ast.USub) else operand if isinstance(node.op, ast.UAdd) else _UNKNOWN
        return _UNKNOWN
    if isinstance(node, ast.BoolOp):
        result: object = _UNKNOWN
        for item in node.values:
            result = _evaluate(item, env)
            if result is _UNKNOWN:
                return _UNKNOWN
            if bool(result) == isinstance(node.op, ast.Or):
                return result
        return result
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = _evaluate(node.left, env), _evaluate(node.comparators[0], env)
        op = _COMPARE.get(type(node.ops[0]))
        if left is _UNKNOWN or right is _UNKNOWN or op is None:
            return _UNKNOWN
        return op(left, right)
    if isinstance(node, ast.IfExp):
        test = _evaluate(node.test, env)
        return _UNKNOWN if test is _UNKNOWN else _evaluate(node.body if test else node.orelse, env)
    if isinstance(node, ast.Subscript):
        base = _evaluate(node.value, env)
        if not isinstance(base, (tuple, list, dict, str)):
            return _UNKNOWN
        index = node.slice
        if isinstance(index, ast.Slice):
            parts = [_evaluate(p, env) if p is not None else None for p in (index.lower, index.upper, index.step)]
            if any(p is _UNKNOWN for p in parts) or isinstance(base, dict):
                return _UNKNOWN
            return base[slice(*parts)]
        key = _evaluate(index, env)
        return _UNKNOWN if key is _UNKNOWN else base[key]  # type: ignore[index]
    if isinstance(node, ast.Call):
        args = [_evaluate(a, env) for a in node.args]
        kwargs = {kw.arg: _evaluate(kw.value, env) for kw in node.keywords}
        if any(a is _UNKNOWN for a in args) or any(v is _UNKNOWN for v in kwargs.values()) or None in kwargs:
            return _UNKNOWN
        func = _FUNCTIONS.get(node.func.id) if isinstance(node.func, ast.Name) and node.func.id not in env else None
        if func is None and isinstance(node.func, ast.Name) and isinstance(env.get(node.func.id), _ConfigClass):
            func = env[node.func.id]  # type: ignore[assignment]
        if func is None or (func in (tuple, list, dict, len) and not all(isinstance(a, (tuple, list, dict, str)) for a in args)):
            return _UNKNOWN
        return func(*args, **kwargs)  # type: ignore[operator]
    return _UNKNOWN


def _arg(call: ast.Call, index: int, name: str, env: dict[str, object]) -> object:
    """A constructor argument of a layer call, by keyword or position; None when not told."""
    node = next((kw.value for kw in call.keywords if kw.arg == name), None)
    if node is None and 0 <= index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
        node = call.args[index]
    if node is None:
        return None
    value = _value(node, env)
    return None if value is _UNKNOWN else value


def _layer_kind(call: ast.AST) -> str:
    f = call.func if isinstance(call, ast.Call) else call
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


# Layers as __init__ builds them.

@dataclass
class _Ref:
    """A module expression in __init__ (a call, a list of them), and the names it is evaluated with."""

    node: ast.expr
    env: dict[str, object]
    owner: Optional[_Class] = None  # the class whose __init__ wrote it


class _Class:
    """One module class: the values and layers its __init__ sets up, and its helper methods."""

    def __init__(self, cls: ast.ClassDef, init: Optional[ast.FunctionDef], forward: ast.FunctionDef,
                 env: dict[str, object], classes: dict[str, ast.ClassDef], constants: dict[str, object], depth: int):
        self.cls, self.forward, self.env, self.depth = cls, forward, env, depth
        self.classes, self.constants = classes, constants  # the file's classes and module-level values
        self.layers: dict[str, _Ref] = {}
        self.locals: dict[str, _Ref] = {}
        self.methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
        if init is not None:
            self._run(init.body, env)

    @property
    def me(self) -> _Obj:
        return self.env["self"]  # type: ignore[return-value]

    def _run(self, body: list[ast.stmt], env: dict[str, object]) -> None:  # noqa: C901
        for stmt in body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    self._assign(target, stmt.value, env)
            elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                self._append(stmt.target.id, stmt.value, env, extend=True)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                self._statement_call(stmt.value, env)
            elif isinstance(stmt, ast.For):
                first = _first_item(stmt.iter, env)
                if first is not _UNKNOWN:
                    self._bind(stmt.target, first, env)
                self._run(stmt.body, env)
            elif isinstance(stmt, (ast.If, ast.While)):
                test = _value(stmt.test, env)
                if test is _UNKNOWN or isinstance(stmt, ast.While):
                    self._run(stmt.body + stmt.orelse, env)
                else:
                    self._run(stmt.body if test else stmt.orelse, env)
            elif isinstance(stmt, ast.With):
                self._run(stmt.body, env)
            elif isinstance(stmt, ast.Try):
                self._run(stmt.body + stmt.orelse + stmt.finalbody, env)

    def _assign(self, target: ast.expr, value: ast.expr, env: dict[str, object]) -> None:
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts):
                self._assign(t, v, env)
            return
        ref = self.locals.get(value.id) if isinstance(value, ast.Name) else None
        known = _value(value, env) if ref is None else _UNKNOWN
        if known is not _UNKNOWN:
            self._bind(target, known, env)
            return
        if ref is None and isinstance(value, (ast.Call, ast.List, ast.Tuple, ast.ListComp, ast.BinOp)):
            ref = _Ref(value, dict(env), self)
        if ref is None:
            return
        if isinstance(target, ast.Name):
            self.locals[target.id] = ref
        elif _self_attr(target):
            self.layers.setdefault(target.attr, ref)  # type: ignore[union-attr]

    def _bind(self, target: ast.expr, value: object, env: dict[str, object]) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif _self_attr(target):
            self.me.attrs[target.attr] = value  # type: ignore[union-attr]
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (tuple, list)) and len(value) == len(target.elts):
            for t, v in zip(target.elts, value):
                self._bind(t, v, env)

    def _append(self, name: str, value: ast.expr, env: dict[str, object], extend: bool) -> None:
        """`layers.append(nn.Linear(...))`, `layers += [...]`: a list of modules; its first one counts."""
        if name in self.locals or (name in env and env[name] != []):
            return
        if extend:
            if not isinstance(value, (ast.List, ast.Tuple)) or not value.elts:
                return
            value = value.elts[0]
        self.locals[name] = _Ref(ast.List(elts=[value], ctx=ast.Load()), dict(env), self)

    def _statement_call(self, call: ast.Call, env: dict[str, object]) -> None:
        f = call.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr in ("append", "extend") and call.args:
            self._append(f.value.id, call.args[0], env, extend=f.attr == "extend")
        elif isinstance(f, ast.Attribute) and _is_self(f.value) and f.attr in ("add_module", "register_module") and len(call.args) == 2:
            name = _value(call.args[0], env)
            if isinstance(name, str):
                self._assign(ast.Attribute(value=ast.Name(id="self", ctx=ast.Load()), attr=name, ctx=ast.Store()), call.args[1], env)
        elif isinstance(f, ast.Name) and f.id == "setattr" and len(call.args) == 3 and _is_self(call.args[0]):
            name = _value(call.args[1], env)
            if isinstance(name, str):
                self._assign(ast.Attribute(value=ast.Name(id="self", ctx=ast.Load()), attr=name, ctx=ast.Store()), call.args[2], env)

    # -- from an expression in forward to the module it names --

    def resolve(self, node: ast.expr, loops: dict[str, object]) -> object:
        """What `node` (a callee in forward) is: a _Ref, a list of _Ref, a dict of _Ref, or None."""
        if isinstance(node, ast.Name):
            return loops.get(node.id)
        if _self_attr(node):
            ref = self.layers.get(node.attr)  # type: ignore[union-attr]
            return self.expand(ref) if ref is not None else None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value, loops)
            if isinstance(base, dict):
                return base.get(node.attr)
            if isinstance(base, _Ref) and _layer_kind(base.node) in self.classes and self.depth < _MAX_DEPTH:
                sub = self.sub(base)
                return sub.resolve(ast.Attribute(value=ast.Name(id="self", ctx=ast.Load()), attr=node.attr, ctx=ast.Load()), {}) if sub else None
            return None
        if isinstance(node, ast.Subscript):
            base = self.resolve(node.value, loops)
            key = _value(node.slice, self.env)
            if isinstance(base, list) and isinstance(key, int) and -len(base) <= key < len(base):
                return base[key]
            if isinstance(base, dict) and isinstance(key, str):
                return base.get(key)
        return None

    def expand(self, ref: _Ref) -> object:
        """A container as a list (Sequential, ModuleList, lists) or dict (ModuleDict) of refs; else the ref."""
        node, env = ref.node, ref.env
        if isinstance(node, ast.Name) and node.id in self.locals:
            return self.expand(self.locals[node.id])
        if isinstance(node, (ast.List, ast.Tuple)):
            out: list = []
            for elt in node.elts:
                inner = self.expand(_Ref(elt.value if isinstance(elt, ast.Starred) else elt, env, self))
                out += inner if isinstance(inner, list) else list(inner.values()) if isinstance(inner, dict) else [inner]
            return out
        if isinstance(node, ast.ListComp) and len(node.generators) == 1:
            scope = dict(env)
            first = _first_item(node.generators[0].iter, env)
            if first is not _UNKNOWN:
                _bind_names(node.generators[0].target, first, scope)
            return [self.expand(_Ref(node.elt, scope, self))]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            return self.expand(_Ref(node.left if isinstance(node.left, (ast.List, ast.ListComp)) else node.right, env, self))
        if isinstance(node, ast.Dict):
            return {k.value: self.expand(_Ref(v, env, self)) for k, v in zip(node.keys, node.values)
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        if isinstance(node, ast.Call):
            kind = _layer_kind(node)
            if kind in ("Sequential", "ModuleList"):
                if len(node.args) == 1 and not isinstance(node.args[0], ast.Starred) and _layer_kind(node.args[0]) in ("OrderedDict", "dict"):
                    named = self.expand(_Ref(node.args[0], env, self))
                    return list(named.values()) if isinstance(named, dict) else named
                items = node.args if kind == "Sequential" else node.args[:1]
                if kind == "ModuleList" and len(items) == 1 and not isinstance(items[0], ast.Starred):
                    inner = self.expand(_Ref(items[0], env, self))
                    return inner if isinstance(inner, list) else [inner]
                return self.expand(_Ref(ast.List(elts=list(items), ctx=ast.Load()), env, self))
            if kind in ("ModuleDict", "OrderedDict", "dict"):
                if node.keywords:
                    return {kw.arg: self.expand(_Ref(kw.value, env, self)) for kw in node.keywords if kw.arg}
                if node.args and isinstance(node.args[0], ast.Dict):
                    return self.expand(_Ref(node.args[0], env, self))
                if node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
                    return {p.elts[0].value: self.expand(_Ref(p.elts[1], env, self)) for p in node.args[0].elts
                            if isinstance(p, ast.Tuple) and len(p.elts) == 2 and isinstance(p.elts[0], ast.Constant)}
                if node.args and _layer_kind(node.args[0]) in ("OrderedDict", "dict"):
                    return self.expand(_Ref(node.args[0], env, self))
                return {}
        return ref

    def sub(self, ref: _Ref) -> Optional[_Class]:
        """The module of this file that `ref` builds (`Block(config)`), with its arguments bound."""
        cls = self.classes.get(_layer_kind(ref.node))
        if cls is None or not isinstance(ref.node, ast.Call):
            return None
        init, forward = _inherited(cls, "__init__", self.classes), _inherited(cls, "forward", self.classes)
        if forward is None:
            return None
        bound: dict[str, object] = {}
        if init is not None:
            params = [a.arg for a in init.args.posonlyargs + init.args.args][1:]
            for name, arg in zip(params, ref.node.args):
                if isinstance(arg, ast.Starred):
                    break
                bound[name] = _value(arg, ref.env)
            for kw in ref.node.keywords:
                if kw.arg:
                    bound[kw.arg] = _value(kw.value, ref.env)
            bound = {k: v for k, v in bound.items() if v is not _UNKNOWN}
        env = _class_env(init, self.constants, bound)
        return _Class(cls, init, forward, env, self.classes, self.constants, self.depth + 1)


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _self_attr(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and _is_self(node.value)


def _bind_names(target: ast.expr, value: object, env: dict[str, object]) -> None:
    if isinstance(target, ast.Name):
        env[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (tuple, list)) and len(value) == len(target.elts):
        for t, v in zip(target.elts, value):
            _bind_names(t, v, env)


def _first_item(node: ast.expr, env: dict[str, object]) -> object:
    """The first value a `for` over `node` binds: range(), a sequence, zip(), enumerate()."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in env:
        args = [_value(a, env) for a in node.args]
        if any(a is _UNKNOWN for a in args):
            return _UNKNOWN
        if node.func.id == "range" and args and all(isinstance(a, int) for a in args):
            return args[0] if len(args) > 1 else 0
        if node.func.id == "zip" and args and all(isinstance(a, (tuple, list)) and a for a in args):
            return tuple(a[0] for a in args)
        if node.func.id == "enumerate" and args and isinstance(args[0], (tuple, list)) and args[0]:
            return (0, args[0][0])
        return _UNKNOWN
    value = _value(node, env)
    return value[0] if isinstance(value, (tuple, list)) and value else _UNKNOWN


def _calls_in_execution_order(node: ast.AST) -> Iterator[ast.Call]:
    """Calls as Python runs them: arguments before the call they are passed to."""
    for child in ast.iter_child_nodes(node):
        yield from _calls_in_execution_order(child)
    if isinstance(node, ast.Call):
        yield node


# From a forward parameter to the first layer it reaches.

@dataclass
class _Use:
    """A forward parameter reaches layer `ref`, as its argument `position` at call `site`."""

    ref: _Ref
    position: object  # int, or the keyword
    site: ast.Call
    owner: _Class


_META_ATTRS = {"shape", "device", "dtype", "ndim", "is_cuda", "requires_grad"}
_META_CALLS = {"size", "dim", "numel", "type", "stride"}


def _names(node: ast.AST) -> set[str]:
    """Names whose data flows into `node`: not those only asked for their shape, device or dtype."""
    if isinstance(node, ast.Attribute) and node.attr in _META_ATTRS:
        return set()
    if isinstance(node, ast.Call):
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr in _META_CALLS) or (isinstance(f, ast.Name) and f.id in ("len", "isinstance")):
            return set()
    if isinstance(node, ast.Name):
        return {node.id}
    found: set[str] = set()
    for child in ast.iter_child_nodes(node):
        found |= _names(child)
    return found


class _Follow:
    """Walks a function's statements in order, tracking the names derived from one parameter."""

    def __init__(self, owner: _Class, tainted: set[str], depth: int):
        self.owner, self.tainted, self.depth = owner, set(tainted), depth
        self.loops: dict[str, object] = {}
        self.blocked: Optional[str] = None  # the parameter reached something whose input we cannot tell
        self.blocker: Optional[_Ref] = None  # ... and that something

    def body(self, stmts: list[ast.stmt]) -> Optional[_Use]:  # noqa: C901
        for stmt in stmts:
            found: Optional[_Use] = None
            if isinstance(stmt, ast.For):
                found = self.exprs([stmt.iter])
                container = self.owner.resolve(_enumerated(stmt.iter), self.loops)
                if found is None and isinstance(container, list) and container:
                    name = stmt.target.elts[-1] if isinstance(stmt.target, ast.Tuple) else stmt.target
                    if isinstance(name, ast.Name):
                        self.loops[name.id] = container[0]
                found = found or self.body(stmt.body + stmt.orelse)
            elif isinstance(stmt, (ast.If, ast.While)):
                found = self.exprs([stmt.test]) or self.body(stmt.body) or self.body(stmt.orelse)
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                found = self.exprs([i.context_expr for i in stmt.items]) or self.body(stmt.body)
            elif isinstance(stmt, ast.Try):
                found = self.body(stmt.body + stmt.orelse + stmt.finalbody)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return)):
                value = getattr(stmt, "value", None)
                found = self.exprs([value]) if value is not None else None
                if value is not None and _names(value) & self.tainted:
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
                    for target in targets:
                        if target is not None:
                            self.tainted |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name) and n.id != "self"}
                elif isinstance(stmt, ast.Assign):  # `x = something else` ends x's link to the parameter
                    for target in stmt.targets:
                        if isinstance(target, ast.Name):
                            self.tainted.discard(target.id)
            if found is not None or self.blocked:
                return found
        return None

    def exprs(self, nodes: list) -> Optional[_Use]:
        for node in nodes:
            for call in _calls_in_execution_order(node):
                found = self.call(call)
                if found is not None or self.blocked:
                    return found
        return None

    def call(self, call: ast.Call) -> Optional[_Use]:
        position = _tainted_position(call, self.tainted)
        if position is None:
            return None
        f = call.func
        owner = self.owner
        if _self_attr(f) and f.attr in owner.methods and f.attr not in owner.layers:  # a helper method
            if self.depth >= _MAX_DEPTH:
                return None
            method = owner.methods[f.attr]
            params = [a.arg for a in method.args.posonlyargs + method.args.args][1:]
            name = params[position] if isinstance(position, int) and position < len(params) else position
            if not isinstance(name, str):
                return None
            inner = _Follow(owner, {name}, self.depth + 1)
            found = inner.body(method.body)
            self.blocked, self.blocker = inner.blocked, inner.blocker
            return found
        target = owner.resolve(f, self.loops)
        return self.reach(target, position, call, owner)

    def reach(self, target: object, position: object, site: ast.Call, owner: _Class) -> Optional[_Use]:
        """The parameter is passed to `target` (a layer, a container, a module of this file)."""
        if isinstance(target, list):  # calling a Sequential: its first layer that cares
            for item in target:
                found = self.reach(item, position, site, owner)
                if found is not None or self.blocked:
                    return found
            return None
        if not isinstance(target, _Ref) or not isinstance(target.node, ast.Call):
            return None
        kind = _layer_kind(target.node)
        if kind in _SHAPELESS:
            return None
        sub = owner.sub(target) if kind in owner.classes and owner.depth < _MAX_DEPTH else None
        if sub is not None:
            params = [a.arg for a in sub.forward.args.posonlyargs + sub.forward.args.args][1:]
            name = params[position] if isinstance(position, int) and position < len(params) else position
            if not isinstance(name, str):
                self.blocked = f"`{kind}.forward` parameters"
                return None
            inner = _Follow(sub, {name}, self.depth + 1)
            found = inner.body(sub.forward.body)
            if found is None and not inner.blocked:
                inner.blocked = f"`{kind}`, whose input no layer of it sizes"
            self.blocked, self.blocker = inner.blocked, inner.blocker
            return found
        if kind in _SIZE_ARG or kind.rstrip("123d").endswith(("Conv", "ConvTranspose", "BatchNorm", "InstanceNorm")) \
                or kind.startswith("Lazy") or kind in ("TransformerEncoder", "TransformerDecoder"):
            return _Use(target, position, site, owner)
        self.blocked = f"`{ast.unparse(target.node.func)}(...)`, whose input Compile Lens cannot size"
        self.blocker = target
        return None


def _enumerated(node: ast.expr) -> ast.expr:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "enumerate" and node.args:
        return node.args[0]
    return node


def _tainted_position(call: ast.Call, tainted: set[str]) -> object:
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return None
        if _names(arg) & tainted:
            return i
    for kw in call.keywords:
        if kw.arg and _names(kw.value) & tainted:
            return kw.arg
    return None


# Shaping a tensor for the layer a parameter reaches.

def _shape_text(shape: tuple) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _randn(shape: tuple) -> str:
    return f"torch.randn{_shape_text(shape)}" if len(shape) > 1 else f"torch.randn({shape[0]})"


def _positive(value: object) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _tensor_for(use: _Use) -> tuple[Optional[str], str]:  # noqa: C901 - one case per layer kind
    """A tensor expression for the parameter, or None and why."""
    layer, env = use.ref.node, use.ref.env
    assert isinstance(layer, ast.Call)
    kind = _layer_kind(layer)
    where = f"`{ast.unparse(layer)}`"
    if kind in ("TransformerEncoder", "TransformerDecoder"):
        inner_node = next((kw.value for kw in layer.keywords if kw.arg in ("encoder_layer", "decoder_layer")), None)
        if inner_node is None and layer.args:
            inner_node = layer.args[0]
        ref = _inner_layer(inner_node, use.ref.owner or use.owner, env)
        if ref is None:
            return None, f"cannot tell the layer {where} repeats"
        return _tensor_for(_Use(ref, use.position, use.site, use.owner))
    position = use.position
    roles = {"input": 0, "src": 0, "tgt": 0 if kind.startswith("TransformerDecoder") else 1,
             "query": 0, "key": 1, "value": 2, "memory": 1, "offsets": 1}
    if isinstance(position, str):
        position = roles.get(position, position)
    index, keyword = _SIZE_ARG.get(kind, (0, "in_channels"))
    if kind.startswith("Lazy"):
        size: object = 3 if "Conv" in kind else 16
    elif kind == "Transformer":
        size = _arg(layer, index, keyword, env) or 512
    else:
        size = _arg(layer, index, keyword, env)
    batch_first = _arg(layer, 99, "batch_first", env) is True
    if kind in ("LayerNorm", "RMSNorm") and isinstance(size, (tuple, list)) and size and all(_positive(s) for s in size):
        return _randn((BATCH, *size)) if position == 0 else None, where
    size = _positive(size)
    if size is None:
        return None, f"cannot read the size of {where}"
    if kind in ("Embedding", "EmbeddingBag"):
        bags = kind == "EmbeddingBag" and (len(use.site.args) > 1 or any(k.arg == "offsets" for k in use.site.keywords))
        if position == 0:
            shape = (BATCH * _BAG,) if bags else (BATCH, SEQ)
            return f"torch.randint(0, {size}, {_shape_text(shape)})", where
        if position == 1 and bags:
            return f"torch.arange(0, {BATCH * _BAG}, {_BAG})", where
        return None, f"cannot tell argument {use.position} of {where}"
    if kind in ("LSTM", "GRU", "RNN", "TransformerEncoderLayer", "TransformerDecoderLayer", "Transformer",
                "MultiheadAttention"):
        limit = 3 if kind == "MultiheadAttention" else 2 if kind in ("TransformerDecoderLayer", "Transformer") else 1
        if not isinstance(position, int) or position >= limit:
            return None, f"cannot tell argument {use.position} of {where}"
        if kind == "MultiheadAttention" and position > 0:
            size = _positive(_arg(layer, 99, "kdim" if position == 1 else "vdim", env)) or size
        shape = (BATCH, SEQ, size) if batch_first else (SEQ, BATCH, size)
        return _randn(shape), where
    if position != 0:
        return None, f"cannot tell argument {use.position} of {where}"
    dims = kind[-2:] if kind[-2:] in _SPATIAL else ""
    if kind in ("Linear", "Bilinear", "LazyLinear", "BatchNorm1d", "LazyBatchNorm1d"):
        return _randn((BATCH, size)), where
    if kind in ("LayerNorm", "RMSNorm"):
        return _randn((BATCH, SEQ, size)), where
    if kind == "GroupNorm":
        return _randn((BATCH, size, 16, 16)), where
    if dims and ("Conv" in kind):
        return _randn(((2 if dims == "3d" else BATCH), size, *_SPATIAL[dims])), where
    if dims and ("BatchNorm" in kind or "InstanceNorm" in kind):
        rest = _NORM_SPATIAL[dims] if "BatchNorm" in kind or dims != "1d" else (SIDE,)
        return _randn(((2 if dims == "3d" else BATCH), size, *rest)), where
    return None, f"cannot shape an input for {where}"


def _inner_layer(node: Optional[ast.expr], owner: _Class, env: dict[str, object]) -> Optional[_Ref]:
    """The `encoder_layer` of a TransformerEncoder: inline, a local of __init__, or `self.layer`."""
    if isinstance(node, ast.Call):
        return _Ref(node, env, owner)
    if isinstance(node, ast.Name) and node.id in owner.locals:
        return owner.locals[node.id]
    if node is not None and _self_attr(node):
        return owner.layers.get(node.attr)  # type: ignore[union-attr]
    return None


def _from_annotation(note: Optional[ast.expr], owner: _Class) -> Optional[str]:
    """`x: Float[Tensor, "batch 16"]` (jaxtyping) gives a shape; `idx: torch.LongTensor` the embedding's indices."""
    if note is None:
        return None
    if isinstance(note, ast.Subscript) and isinstance(note.slice, ast.Tuple) and len(note.slice.elts) == 2:
        dtype = _layer_kind(note.value) if isinstance(note.value, (ast.Name, ast.Attribute)) else ""
        dims = note.slice.elts[1]
        if (dtype in _JAXTYPING_INTS or dtype in _JAXTYPING_FLOATS) and isinstance(dims, ast.Constant) and isinstance(dims.value, str):
            shape = []
            for i, word in enumerate(dims.value.split()):
                word = word.lstrip("*#").split("=")[-1]
                value = int(word) if word.isdigit() else owner.env.get(word) if isinstance(owner.env.get(word), int) else None
                if word in ("...", "") or word.startswith("_"):
                    continue
                shape.append(value if value else BATCH if i == 0 else SEQ)
            if not shape:
                return None
            if dtype == "Bool":
                return f"torch.randint(0, 2, {_shape_text(tuple(shape))}).bool()"
            if dtype in _JAXTYPING_INTS:
                return f"torch.randint(0, 2, {_shape_text(tuple(shape))})"
            return _randn(tuple(shape))
    name = _layer_kind(note) if isinstance(note, (ast.Name, ast.Attribute)) else ""
    if name in _INTEGER_ANNOTATIONS:
        for ref in owner.layers.values():
            if isinstance(ref.node, ast.Call) and _layer_kind(ref.node) == "Embedding":
                size = _positive(_arg(ref.node, 0, "num_embeddings", ref.env))
                if size:
                    return f"torch.randint(0, {size}, {_shape_text((BATCH, SEQ))})"
    return None


def _vocab_size(ref: _Ref, depth: int = 0) -> Optional[int]:
    """`vocab_size=N` in the arguments of a model from a library (`GPT2LMHeadModel(GPT2Config(...))`),
    or of the config object it is given (a local of __init__, or a module-level name)."""
    assigned: dict[str, ast.expr] = ref.env.get(_ASSIGNED, {})  # type: ignore[assignment]
    local = ref.owner.locals if ref.owner is not None else {}
    for node in ast.walk(ref.node):
        if isinstance(node, ast.keyword) and node.arg == "vocab_size":
            return _positive(_value(node.value, ref.env))
        if isinstance(node, ast.Name) and depth < 3 and node is not getattr(ref.node, "func", None):
            bound = local.get(node.id) or (_Ref(assigned[node.id], ref.env, ref.owner) if node.id in assigned else None)
            if bound is not None and bound.node is not ref.node:
                found = _vocab_size(bound, depth + 1)
                if found:
                    return found
    return None


def _guess_inputs(ctx: _Class) -> tuple[Optional[str], str]:
    """The inputs text for `ctx.forward`, or None and why not (for the user)."""
    fn = ctx.forward
    params = _required_params(fn)
    if not params:
        return "()", ""
    notes = {a.arg: a.annotation for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    keyword_only = {a.arg for a in fn.args.kwonlyargs}
    if keyword_only & set(params):
        return None, f"`forward` has keyword-only parameters ({', '.join(sorted(keyword_only & set(params)))})"
    texts = []
    for param in params:
        follow = _Follow(ctx, {param}, 0)
        use = follow.body(fn.body)
        text, why = _tensor_for(use) if use is not None else (None, "")
        if text is None:
            text = _from_annotation(notes.get(param), ctx)
        if text is None and use is None and follow.blocker is not None and param in _TOKEN_PARAMS:
            vocab = _vocab_size(follow.blocker)
            text = f"torch.randint(0, {vocab}, {_shape_text((BATCH, SEQ))})" if vocab else None
        if text is None:
            if use is None:
                why = (f"`{param}` first reaches {follow.blocked}" if follow.blocked
                       else f"`{param}` reaches no layer whose input size is known")
                if param in _TOKEN_PARAMS and follow.blocked:
                    why += f"; token ids want e.g. `torch.randint(0, <vocab size>, {_shape_text((BATCH, SEQ))})`"
            return None, why
        texts.append(text)
    return "(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")", ""


# --- workspace imports -------------------------------------------------------------------------

def workspace_imports(path: str, source: str, root: str) -> list[str]:
    """Workspace files this file imports (directly), resolved like the worker's sys.path does."""
    import os

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = os.path.dirname(path)
            for _ in range(node.level - 1):
                base = os.path.dirname(base)
            rel = os.path.relpath(base, root).replace(os.sep, ".")
            prefix = "" if rel == "." else rel + "."
            mod = prefix + (node.module or "")
            names += [mod] + [f"{mod}.{a.name}".strip(".") for a in node.names]
    found: list[str] = []
    for name in names:
        for base in (root, os.path.dirname(path)):
            stem = os.path.join(base, *name.strip(".").split("."))
            for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
                if os.path.isfile(candidate) and os.path.realpath(candidate) != os.path.realpath(path):
                    real = os.path.realpath(candidate)
                    if real not in found:
                        found.append(real)
    return found


def dependency_fingerprint(path: str, source: str, root: str) -> tuple[str, list[str]]:
    """A hash of the ASTs of every workspace file this one imports, transitively; and those files."""
    seen: list[str] = []
    queue = workspace_imports(path, source, root)
    digest = hashlib.sha256()
    while queue:
        dep = queue.pop(0)
        if dep in seen:
            continue
        seen.append(dep)
        try:
            with open(dep, encoding="utf-8") as f:
                text = f.read()
            digest.update(dep.encode() + fingerprint(ast.parse(text)).encode())
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
            digest.update(dep.encode() + b"?")
            continue
        queue += workspace_imports(dep, text, root)
    return digest.hexdigest()[:16], seen


# --- torch.compile call sites ----------------------------------------------------------------

@dataclass
class CallSite:
    """`torch.compile(X)` (or `@torch.compile`) whose X is a target of this file."""

    target: str
    line: int  # 1-based
    column: int  # 1-based start of `torch.compile`
    end_line: int
    end_column: int  # just after the closing parenthesis (where an inlay hint goes)
    options: dict = field(default_factory=dict)  # literal keyword arguments (dynamic=True, ...)


def _literal_keywords(call: ast.Call) -> dict:
    options = {}
    for kw in call.keywords:
        try:
            options[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            continue
    return options


def _is_torch_compile(func: ast.expr) -> bool:
    return ast.unparse(func) in ("torch.compile", "torch.compiler.compile")


def compile_call_sites(tree: ast.Module, targets: set[str]) -> list[CallSite]:
    sites: list[CallSite] = []
    built: dict[str, str] = {}  # variable -> target it was constructed from (model = Net(...))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name):
            if node.value.func.id in targets:
                for tgt in node.targets:
                    if isinstance(tgt, ast.Name):
                        built[tgt.id] = node.value.func.id
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_torch_compile(node.func) and node.args:
            arg = node.args[0]
            name = None
            if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id in targets:
                name = arg.func.id
            elif isinstance(arg, ast.Name):
                name = arg.id if arg.id in targets else built.get(arg.id)
            if name:
                sites.append(CallSite(name, node.lineno, node.col_offset + 1, node.end_lineno or node.lineno,
                                      (node.end_col_offset or 0) + 1, _literal_keywords(node)))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in targets:
            for dec in node.decorator_list:
                func = dec.func if isinstance(dec, ast.Call) else dec
                if _is_torch_compile(func):
                    sites.append(CallSite(node.name, dec.lineno, dec.col_offset + 1, dec.end_lineno or dec.lineno,
                                          (dec.end_col_offset or 0) + 1))
    return sorted(sites, key=lambda s: (s.line, s.column))
