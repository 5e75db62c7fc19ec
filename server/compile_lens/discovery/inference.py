"""Inputs guessed from the source alone, for a module target without a directive.

The class is built with its defaults (or with a default config object the file defines); each
required parameter of `forward` is followed (`follow`) to the first layer it reaches, and a
tensor is shaped for that layer (`shapes`). Values written in the source are computed by
`values`, a small interpreter: nothing here calls `eval`.
"""

from __future__ import annotations

import ast
from typing import Optional

from ..protocol import InputRecipe, TargetSpec
from .bases import HOMES, IMPORTS, TORCH_LAYERS
from .follow import _Follow, norm_use
from .layers import Class, Ref, _class_env, home, inherited_from, layer_base, layer_kind
from .shapes import (
    _INTEGER_ANNOTATIONS,
    _JAXTYPING_FLOATS,
    _JAXTYPING_INTS,
    BATCH,
    SEQ,
    _positive,
    _randn,
    _shape_text,
    _tensor_for,
)
from .values import (
    _ASSIGNED,
    _UNKNOWN,
    CLASSES,
    _arg,
    _ConfigClass,
    _required_params,
    _value,
    inherited,
)

_TOKEN_PARAMS = {"input_ids", "token_ids", "tokens", "idx", "ids"}  # names that mean token indices


def _module_target(cls: ast.ClassDef, constants: dict[str, object]) -> TargetSpec:
    spec = TargetSpec(cls.name, "module", cls.lineno)
    classes: dict[str, ast.ClassDef] = constants.get(CLASSES, {})  # type: ignore[assignment]
    init, forward = inherited(cls, "__init__", classes), inherited(cls, "forward", classes)
    fix = f"add `# compile-lens: inputs=(...)` above `class {cls.name}`"
    module_env = _module_env(constants)
    # a torch.nn layer base: its `forward` when the class has none, its constructor when it has no `__init__`
    layer = layer_base(cls, classes, module_env) if forward is None or init is None else None
    if forward is None and layer is None:
        base = inherited_from(cls, classes, module_env)
        spec.problem = (f"`{cls.name}` inherits `forward` from `{base}`: its inputs cannot be read statically; {fix}"
                        if base else f"`{cls.name}` defines no `forward` here: {fix}")
        return spec
    if init is not None:
        params, needed = [a.arg for a in init.args.posonlyargs + init.args.args][1:], _required_params(init)
    else:  # built as its torch.nn layer base is (`class Conv1d(nn.Conv1d)` of whisper)
        names, count = TORCH_LAYERS.get(layer_kind(layer), ((), 0)) if layer is not None else ((), 0)
        params, needed = list(names), list(names[:count])
    init_text, bound = _default_config_init(cls.name, init, constants) if needed and init else (None, {})
    if needed and init_text is None:
        init_text, bound = _call_site_init(cls.name, params, needed, constants)
    if needed and init_text is None:
        spec.problem = (f"`{cls.name}()` needs constructor arguments ({', '.join(needed)}): add "
                        f"`# compile-lens: init={cls.name}(...) inputs=(...)` above it")
        return spec
    owner = next((c for c in [cls, *classes.values()] if init is not None and init in c.body), cls)
    ctx = Class(cls, init, forward, _class_env(init, home(module_env, owner), bound), classes, module_env, 0)
    if init is None and layer is not None:
        keywords = [ast.keyword(arg=p, value=ast.Name(id=p, ctx=ast.Load())) for p in bound]
        ctx.itself = Ref(ast.Call(func=layer, args=[], keywords=keywords), ctx.env, ctx)
    text, why = _guess_inputs(ctx) if forward is not None else (None, "")
    if text is None and ctx.itself is not None and (forward is None or len(_required_params(forward)) == 1):
        # its own `forward` told nothing (whisper's `F.linear(x, self.weight.to(x.dtype))`): it
        # still takes the input of the layer it is
        text, layer_why = _layer_inputs(ctx, inherited_from(cls, classes, module_env))
        why = why or layer_why
    elif forward is None:
        text, why = _layer_inputs(ctx, inherited_from(cls, classes, module_env))
    if text is None:
        spec.problem = f"cannot guess inputs for `{cls.name}` ({why}): {fix}"
        return spec
    spec.inputs = InputRecipe("inferred", text, init_text)
    return spec


def _module_env(constants: dict[str, object]) -> dict[str, object]:
    """The module-level names a class sees, with what discovery keeps beside them (not Python names)."""
    env = {k: v for k, v in constants.items() if not k.startswith("<")}
    for key in (_ASSIGNED, IMPORTS, HOMES):
        env[key] = constants.get(key, {})
    return env


# torch.nn layers whose `forward` needs more than one tensor: how many, in order
_LAYER_INPUTS = {"MultiheadAttention": 3, "TransformerDecoderLayer": 2, "Bilinear": 2}


def _layer_inputs(ctx: Class, base: str) -> tuple[Optional[str], str]:
    """Inputs for a module whose `forward` is a torch.nn layer's (`ctx.itself`, the layer as its
    `super().__init__(...)` or its own call builds it), shaped as for that layer first in a model."""
    if ctx.itself is None:
        return None, f"it inherits `forward` from `{base}`, built with arguments the source does not tell"
    site = ast.Call(func=ast.Name(id="self", ctx=ast.Load()), args=[ast.Name(id="input", ctx=ast.Load())], keywords=[])
    texts = []
    for position in range(_LAYER_INPUTS.get(layer_kind(ctx.itself.node), 1)):
        follow = _Follow(ctx, set(), 0)
        use = follow.reach(ctx.expand(ctx.itself), position, site, ctx)
        if use is None:
            return None, (f"its `{base}` input first reaches {follow.blocked}" if follow.blocked
                          else f"its `{base}` input reaches no layer whose input size is known")
        text, why = _tensor_for(use)
        if text is None:
            return None, why
        texts.append(text)
    return "(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")", ""


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


def _call_site_init(name: str, params: list[str], required: list[str],
                    constants: dict[str, object]) -> tuple[Optional[str], dict]:
    """`LayerNorm(768, bias=True)`: the first call of the class in another module's `__init__` in
    this file (`LayerNorm(config.n_embd, bias=config.bias)` in `Block`), its arguments computed
    there (that module built with its defaults or its default config) and written as literals.
    `params`: its constructor's positional parameters, `required` those without a default."""
    classes: dict[str, ast.ClassDef] = constants.get(CLASSES, {})  # type: ignore[assignment]
    homes: dict = constants.get(HOMES, {})  # type: ignore[assignment]
    module_env = _module_env(constants)
    needed = set(required)
    for other in classes.values():
        other_init, other_forward = inherited(other, "__init__", classes), inherited(other, "forward", classes)
        if other is classes.get(name) or other in homes or other_init is None or other_forward is None:
            continue  # (a class of another file calls it with that file's names)
        bound: dict = {}
        if _required_params(other_init):
            text, bound = _default_config_init(other.name, other_init, constants)
            if text is None:
                continue
        built = Class(other, other_init, other_forward, _class_env(other_init, module_env, bound), classes, module_env, 0)
        for ref in [*built.layers.values(), *built.locals.values()]:
            for call in (n for n in ast.walk(ref.node) if isinstance(n, ast.Call) and layer_kind(n) == name):
                found = _literal_call(name, call, params, needed, ref.env)
                if found is not None:
                    return found
    return None, {}


def _literal_call(name: str, call: ast.Call, params: list[str], needed: set[str],
                  env: dict[str, object]) -> Optional[tuple[str, dict]]:
    """The call with each argument's value written as a literal, and the values by parameter; None
    when an argument is not a plain value the source tells, or a required one is missing."""
    parts, bound = [], {}
    for param, arg in zip(params, call.args):
        value = _value(arg, env) if not isinstance(arg, ast.Starred) else _UNKNOWN
        if not _literal(value):
            return None
        parts.append(repr(value))
        bound[param] = value
    for kw in call.keywords:
        value = _value(kw.value, env) if kw.arg else _UNKNOWN
        if not _literal(value):
            return None
        parts.append(f"{kw.arg}={value!r}")
        bound[str(kw.arg)] = value
    if len(call.args) > len(params) or not needed <= set(bound):
        return None
    return f"{name}({', '.join(parts)})", bound


def _literal(value: object) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_literal(v) for v in value)
    return isinstance(value, (int, float, bool, str, type(None)))


def _from_annotation(note: Optional[ast.expr], owner: Class) -> Optional[str]:
    """`x: Float[Tensor, "batch 16"]` (jaxtyping) gives a shape; `idx: torch.LongTensor` the embedding's indices."""
    if note is None:
        return None
    if isinstance(note, ast.Subscript) and isinstance(note.slice, ast.Tuple) and len(note.slice.elts) == 2:
        dtype = layer_kind(note.value) if isinstance(note.value, (ast.Name, ast.Attribute)) else ""
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
    name = layer_kind(note) if isinstance(note, (ast.Name, ast.Attribute)) else ""
    if name in _INTEGER_ANNOTATIONS:
        for ref in owner.layers.values():
            if isinstance(ref.node, ast.Call) and layer_kind(ref.node) == "Embedding":
                size = _positive(_arg(ref.node, 0, "num_embeddings", ref.env))
                if size:
                    return f"torch.randint(0, {size}, {_shape_text((BATCH, SEQ))})"
    return None


def _vocab_size(ref: Ref, depth: int = 0) -> Optional[int]:
    """`vocab_size=N` in the arguments of a model from a library (`GPT2LMHeadModel(GPT2Config(...))`),
    or of the config object it is given (a local of __init__, or a module-level name)."""
    assigned: dict[str, ast.expr] = ref.env.get(_ASSIGNED, {})  # type: ignore[assignment]
    local = ref.owner.locals if ref.owner is not None else {}
    for node in ast.walk(ref.node):
        if isinstance(node, ast.keyword) and node.arg == "vocab_size":
            return _positive(_value(node.value, ref.env))
        if isinstance(node, ast.Name) and depth < 3 and node is not getattr(ref.node, "func", None):
            bound = local.get(node.id) or (Ref(assigned[node.id], ref.env, ref.owner) if node.id in assigned else None)
            if bound is not None and bound.node is not ref.node:
                found = _vocab_size(bound, depth + 1)
                if found:
                    return found
    return None


def _guess_inputs(ctx: Class) -> tuple[Optional[str], str]:
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
        if text is None and use is None and not follow.blocked and params == [param]:
            use = norm_use(ctx, 0, None, follow.rank)  # a hand-written norm: sized by its weight
            text, why = _tensor_for(use) if use is not None else (None, "")
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
