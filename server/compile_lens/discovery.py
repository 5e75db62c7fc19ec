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
    module_classes = _module_classes(tree)
    constants = _module_constants(tree)
    for node in tree.body:
        spec: Optional[TargetSpec] = None
        if isinstance(node, ast.ClassDef) and node.name in module_classes:
            spec = _module_target(node, constants)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            options = _compile_decorator(node)
            if options is not None:
                spec = TargetSpec(node.name, "function", node.lineno, compile_options=options)
                spec.problem = (f"no example inputs for `{node.name}`: add "
                                f"`# compile-lens: inputs=(...)` above it")
        if spec is None:
            continue
        _name_columns(spec, node, lines)
        spec.end_line = getattr(node, "end_lineno", None) or node.lineno
        directive = _read_directive(node, lines, found.errors)
        if directive is not None:
            _apply_directive(spec, directive)
        spec.fingerprint = found.fingerprint
        found.targets.append(spec)
    return found


def fingerprint(tree: ast.AST) -> str:
    """A hash of what the code does: comments and formatting do not change it."""
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()[:16]


# --- which classes are modules ---------------------------------------------------------------

def _is_module_base(base: ast.expr, known: set[str]) -> bool:
    if isinstance(base, ast.Attribute) and base.attr == "Module":
        return True
    return isinstance(base, ast.Name) and (base.id == "Module" or base.id in known)


def _module_classes(tree: ast.Module) -> set[str]:
    known: set[str] = set()
    for node in tree.body:  # in order: a subclass of a subclass defined above it counts
        if isinstance(node, ast.ClassDef) and any(_is_module_base(b, known) for b in node.bases):
            known.add(node.name)
    return known


def _compile_decorator(node: ast.FunctionDef | ast.AsyncFunctionDef) -> Optional[dict]:
    """The literal options of `@torch.compile` / `@torch.compile(...)`, or None if not compiled."""
    for dec in node.decorator_list:
        call = dec if isinstance(dec, ast.Call) else None
        func = call.func if call else dec
        if ast.unparse(func) in ("torch.compile", "compile") and (call or isinstance(func, ast.Attribute)):
            options = {}
            for kw in call.keywords if call else []:
                try:
                    options[kw.arg] = ast.literal_eval(kw.value)
                except ValueError:
                    continue
            return options
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


def _read_directive(node: ast.AST, lines: list[str], errors: list[DirectiveError]) -> Optional[dict]:
    merged: dict = {}
    seen = False
    for row in _directive_lines(node, lines):
        body = directive_at(lines[row - 1])
        if not body:
            continue
        seen = True
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
    elif init is not None:
        spec.problem = f"`{spec.name}` has `init=` but no `inputs=` in its compile-lens directive"


# --- inferred inputs -------------------------------------------------------------------------

def _module_constants(tree: ast.Module) -> dict[str, object]:
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return values


def _method(cls: ast.ClassDef, name: str) -> Optional[ast.FunctionDef]:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _required_params(fn: ast.FunctionDef) -> list[str]:
    positional = fn.args.posonlyargs + fn.args.args
    required = positional[: len(positional) - len(fn.args.defaults)]
    names = [a.arg for a in required[1:]]  # minus self
    names += [a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is None]
    return names


def _param_defaults(fn: ast.FunctionDef) -> dict[str, object]:
    positional = fn.args.posonlyargs + fn.args.args
    values: dict[str, object] = {}
    for arg, default in zip(positional[len(positional) - len(fn.args.defaults):], fn.args.defaults):
        try:
            values[arg.arg] = ast.literal_eval(default)
        except ValueError:
            pass
    for arg, default in zip(fn.args.kwonlyargs, fn.args.kw_defaults):
        if default is not None:
            try:
                values[arg.arg] = ast.literal_eval(default)
            except ValueError:
                pass
    return values


def _module_target(cls: ast.ClassDef, constants: dict[str, object]) -> TargetSpec:
    spec = TargetSpec(cls.name, "module", cls.lineno)
    init, forward = _method(cls, "__init__"), _method(cls, "forward")
    fix = f"add `# compile-lens: inputs=(...)` above `class {cls.name}`"
    if forward is None:
        spec.problem = f"`{cls.name}` defines no `forward` here: {fix}"
        return spec
    needed = _required_params(init) if init else []
    if needed:
        spec.problem = (f"`{cls.name}()` needs constructor arguments ({', '.join(needed)}): add "
                        f"`# compile-lens: init={cls.name}(...) inputs=(...)` above it")
        return spec
    if len(_required_params(forward)) != 1:
        spec.problem = f"cannot guess inputs for `{cls.name}.forward` with these parameters: {fix}"
        return spec
    env = dict(constants)
    if init:
        env.update(_param_defaults(init))
    text = _infer_inputs(init, forward, env) if init else None
    if text is None:
        spec.problem = f"cannot guess inputs for `{cls.name}` from its first layer: {fix}"
        return spec
    spec.inputs = InputRecipe("inferred", text)
    return spec


def _layers(init: ast.FunctionDef) -> dict[str, ast.Call]:
    """`self.name = nn.Layer(...)` assignments in __init__."""
    layers: dict[str, ast.Call] = {}
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            for tgt in node.targets:
                if isinstance(tgt, ast.Attribute) and isinstance(tgt.value, ast.Name) and tgt.value.id == "self":
                    layers[tgt.attr] = node.value
    return layers


def _calls_in_execution_order(node: ast.AST) -> Iterator[ast.Call]:
    """Calls as Python runs them: arguments before the call they are passed to."""
    for child in ast.iter_child_nodes(node):
        yield from _calls_in_execution_order(child)
    if isinstance(node, ast.Call):
        yield node


def _first_layer(init: ast.FunctionDef, forward: ast.FunctionDef) -> Optional[ast.Call]:
    layers = _layers(init)
    for call in _calls_in_execution_order(forward):
        f = call.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" and f.attr in layers:
            layer = layers[f.attr]
            while _layer_kind(layer) in ("Sequential", "ModuleList") and layer.args and isinstance(layer.args[0], ast.Call):
                layer = layer.args[0]
            return layer
    return None


def _layer_kind(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _arg(call: ast.Call, index: int, name: str, env: dict[str, object]) -> object:
    node = next((kw.value for kw in call.keywords if kw.arg == name), None)
    if node is None and index < len(call.args):
        node = call.args[index]
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except ValueError:
        try:
            return eval(compile(ast.Expression(node), "<directive>", "eval"), {"__builtins__": {}}, dict(env))  # noqa: S307 - names → literals only
        except Exception:  # noqa: BLE001
            return None


def _infer_inputs(init: ast.FunctionDef, forward: ast.FunctionDef, env: dict[str, object]) -> Optional[str]:
    layer = _first_layer(init, forward)
    if layer is None:
        return None
    kind = _layer_kind(layer)
    first = _arg(layer, 0, {"Embedding": "num_embeddings", "EmbeddingBag": "num_embeddings",
                            "LayerNorm": "normalized_shape", "TransformerEncoderLayer": "d_model",
                            "MultiheadAttention": "embed_dim", "Linear": "in_features",
                            "LSTM": "input_size", "GRU": "input_size", "RNN": "input_size"}.get(kind, "in_channels"), env)
    if not isinstance(first, int) or isinstance(first, bool) or first <= 0:
        return None
    batch_first = _arg(layer, 99, "batch_first", env) is True
    shapes = {
        "Linear": (BATCH, first),
        "Conv1d": (BATCH, first, 32), "ConvTranspose1d": (BATCH, first, 32),
        "Conv2d": (BATCH, first, 32, 32), "ConvTranspose2d": (BATCH, first, 32, 32),
        "Conv3d": (2, first, 8, 16, 16), "ConvTranspose3d": (2, first, 8, 16, 16),
        "BatchNorm1d": (BATCH, first), "BatchNorm2d": (BATCH, first, 16, 16),
        "BatchNorm3d": (2, first, 8, 8, 8), "LayerNorm": (BATCH, 16, first),
    }
    if kind in ("Embedding", "EmbeddingBag"):
        return f"(torch.randint(0, {first}, ({BATCH}, 16)),)"
    if kind in ("LSTM", "GRU", "RNN", "TransformerEncoderLayer", "MultiheadAttention"):
        shape = (BATCH, 16, first) if batch_first else (16, BATCH, first)
        if kind == "TransformerEncoderLayer":
            shape = (BATCH, 16, first) if batch_first else (16, BATCH, first)
        return f"(torch.randn{shape},)"
    if kind in shapes:
        return f"(torch.randn{shapes[kind]},)"
    return None


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
                                      (node.end_col_offset or 0) + 1))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in targets:
            for dec in node.decorator_list:
                func = dec.func if isinstance(dec, ast.Call) else dec
                if _is_torch_compile(func):
                    sites.append(CallSite(node.name, dec.lineno, dec.col_offset + 1, dec.end_lineno or dec.lineno,
                                          (dec.end_col_offset or 0) + 1))
    return sorted(sites, key=lambda s: (s.line, s.column))
