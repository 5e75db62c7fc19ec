"""One module class as its `__init__` builds it: the values and layers it sets up, its helpers."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator, Optional

from .bases import HOMES, IMPORTS, library_base, qualified, super_init, torch_layer
from .values import _UNKNOWN, CLASSES, _Obj, _param_defaults, _value, inherited

_MAX_DEPTH = 6  # nested modules and helper methods followed

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

# The constructor argument that sizes a layer's input: (position, keyword).
SIZE_ARG = {
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
        SIZE_ARG[_norm + _dims] = (0, "num_features")


def home(constants: dict[str, object], cls: ast.ClassDef) -> dict[str, object]:
    """The module-level names `cls` sees: those of the workspace file that defines it."""
    homes: dict[ast.ClassDef, dict[str, object]] = constants.get(HOMES, {})  # type: ignore[assignment]
    return homes.get(cls, constants)


def _class_env(init: Optional[ast.FunctionDef], constants: dict[str, object], bound: dict[str, object]) -> dict[str, object]:
    env = {k: v for k, v in constants.items() if k != CLASSES}  # _ASSIGNED stays: not a Python name
    if init is not None:
        env.update(_param_defaults(init, env))
    env.update(bound)
    env["self"] = _Obj({})
    return env


def layer_kind(call: ast.AST) -> str:
    f = call.func if isinstance(call, ast.Call) else call
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


@dataclass
class Ref:
    """A module expression in __init__ (a call, a list of them), and the names it is evaluated with."""

    node: ast.expr
    env: dict[str, object]
    owner: Optional[Class] = None  # the class whose __init__ wrote it


class Class:
    """One module class: the values and layers its __init__ sets up, and its helper methods."""

    def __init__(self, cls: ast.ClassDef, init: Optional[ast.FunctionDef], forward: Optional[ast.FunctionDef],
                 env: dict[str, object], classes: dict[str, ast.ClassDef], constants: dict[str, object], depth: int):
        self.cls, self.forward, self.env, self.depth = cls, forward, env, depth
        self.classes, self.constants = classes, constants  # the file's classes and module-level values
        self.layers: dict[str, Ref] = {}
        self.locals: dict[str, Ref] = {}
        # the torch.nn layer this module is, as `super().__init__(4, 8, 3)` builds it (`class
        # MyConv(nn.Conv1d)`): an inherited `forward` is that layer's
        self.itself: Optional[Ref] = None
        self.methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
        self._running = cls  # whose `__init__` runs: `super()` there means its base
        self._inits = 0  # base `__init__`s run through `super()`: a cycle of bases ends
        if init is not None:
            self._running = next((c for c in [cls, *classes.values()] if init in c.body), cls)
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
            ref = Ref(value, dict(env), self)
        if ref is None:
            return
        if isinstance(target, ast.Name):
            self.locals[target.id] = ref
        elif self_attr(target):
            self.layers.setdefault(target.attr, ref)  # type: ignore[union-attr]

    def _bind(self, target: ast.expr, value: object, env: dict[str, object]) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif self_attr(target):
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
        self.locals[name] = Ref(ast.List(elts=[value], ctx=ast.Load()), dict(env), self)

    def _statement_call(self, call: ast.Call, env: dict[str, object]) -> None:
        f = call.func
        called = super_init(call, self._running)
        if called is not None:
            self._super_init(called[0], called[1], call.keywords, env)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr in ("append", "extend") and call.args:
            self._append(f.value.id, call.args[0], env, extend=f.attr == "extend")
        elif isinstance(f, ast.Attribute) and _is_self(f.value) and f.attr in ("add_module", "register_module") and len(call.args) == 2:
            name = _value(call.args[0], env)
            if isinstance(name, str):
                self._assign(ast.Attribute(value=ast.Name(id="self", ctx=ast.Load()), attr=name, ctx=ast.Store()), call.args[1], env)
        elif isinstance(f, ast.Name) and f.id == "setattr" and len(call.args) == 3 and _is_self(call.args[0]):
            name = _value(call.args[1], env)
            if isinstance(name, str):
                self._assign(ast.Attribute(value=ast.Name(id="self", ctx=ast.Load()), attr=name, ctx=ast.Store()), call.args[2], env)

    def _super_init(self, base: Optional[ast.expr], args: list[ast.expr], keywords: list[ast.keyword],
                    env: dict[str, object]) -> None:
        """`super().__init__(16)`: a workspace base's `__init__` runs with those arguments (the
        `nn.Linear(d, d)` it builds is this module's); a torch.nn layer base is what this module is."""
        if base is None:
            return
        base_cls = self.classes.get(base.id) if isinstance(base, ast.Name) else None
        if base_cls is None:
            if torch_layer(_qualified(base, home(self.constants, self._running))):
                self.itself = Ref(ast.Call(func=base, args=args, keywords=keywords), dict(env), self)
            return
        init = inherited(base_cls, "__init__", self.classes)
        if init is None:  # the workspace base takes its own base's constructor
            past = layer_base(base_cls, self.classes, self.constants)
            if past is not None:
                self.itself = Ref(ast.Call(func=past, args=args, keywords=keywords), dict(env), self)
            return
        if self._inits >= _MAX_DEPTH:
            return
        self._inits += 1
        bound = _bind_call(init, args, keywords, env)
        owner = next((c for c in [base_cls, *self.classes.values()] if init in c.body), base_cls)
        base_env = _class_env(init, home(self.constants, owner), bound)
        base_env["self"] = self.me  # one object: what the base sets is this module's
        running, self._running = self._running, owner
        self._run(init.body, base_env)
        self._running = running

    # -- from an expression in forward to the module it names --

    def resolve(self, node: ast.expr, loops: dict[str, object]) -> object:
        """What `node` (a callee in forward) is: a Ref, a list of Ref, a dict of Ref, or None."""
        if isinstance(node, ast.Name):
            return loops.get(node.id)
        if self_attr(node):
            ref = self.layers.get(node.attr)  # type: ignore[union-attr]
            return self.expand(ref) if ref is not None else None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value, loops)
            if isinstance(base, dict):
                return base.get(node.attr)
            if isinstance(base, Ref) and layer_kind(base.node) in self.classes and self.depth < _MAX_DEPTH:
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

    def expand(self, ref: Ref) -> object:
        """A container as a list (Sequential, ModuleList, lists) or dict (ModuleDict) of refs; else the ref."""
        node, env = ref.node, ref.env
        if isinstance(node, ast.Name) and node.id in self.locals:
            return self.expand(self.locals[node.id])
        if isinstance(node, (ast.List, ast.Tuple)):
            out: list = []
            for elt in node.elts:
                inner = self.expand(Ref(elt.value if isinstance(elt, ast.Starred) else elt, env, self))
                out += inner if isinstance(inner, list) else list(inner.values()) if isinstance(inner, dict) else [inner]
            return out
        if isinstance(node, ast.ListComp) and len(node.generators) == 1:
            scope = dict(env)
            first = _first_item(node.generators[0].iter, env)
            if first is not _UNKNOWN:
                _bind_names(node.generators[0].target, first, scope)
            return [self.expand(Ref(node.elt, scope, self))]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            return self.expand(Ref(node.left if isinstance(node.left, (ast.List, ast.ListComp)) else node.right, env, self))
        if isinstance(node, ast.Dict):
            return {k.value: self.expand(Ref(v, env, self)) for k, v in zip(node.keys, node.values)
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        if isinstance(node, ast.Call):
            kind = layer_kind(node)
            if kind in ("Sequential", "ModuleList"):
                if len(node.args) == 1 and not isinstance(node.args[0], ast.Starred) and layer_kind(node.args[0]) in ("OrderedDict", "dict"):
                    named = self.expand(Ref(node.args[0], env, self))
                    return list(named.values()) if isinstance(named, dict) else named
                items = node.args if kind == "Sequential" else node.args[:1]
                if kind == "ModuleList" and len(items) == 1 and not isinstance(items[0], ast.Starred):
                    inner = self.expand(Ref(items[0], env, self))
                    return inner if isinstance(inner, list) else [inner]
                return self.expand(Ref(ast.List(elts=list(items), ctx=ast.Load()), env, self))
            if kind in ("ModuleDict", "OrderedDict", "dict"):
                if node.keywords:
                    return {kw.arg: self.expand(Ref(kw.value, env, self)) for kw in node.keywords if kw.arg}
                if node.args and isinstance(node.args[0], ast.Dict):
                    return self.expand(Ref(node.args[0], env, self))
                if node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
                    return {p.elts[0].value: self.expand(Ref(p.elts[1], env, self)) for p in node.args[0].elts
                            if isinstance(p, ast.Tuple) and len(p.elts) == 2 and isinstance(p.elts[0], ast.Constant)}
                if node.args and layer_kind(node.args[0]) in ("OrderedDict", "dict"):
                    return self.expand(Ref(node.args[0], env, self))
                return {}
        return ref

    def sub(self, ref: Ref) -> Optional[Class]:
        """The module of this file that `ref` builds (`Block(config)`), with its arguments bound."""
        if not isinstance(ref.node, ast.Call) or not isinstance(ref.node.func, ast.Name):
            return None  # `nn.Linear(...)` is torch's, even beside a `class Linear(nn.Linear)` of this file
        cls = self.classes.get(ref.node.func.id)
        if cls is None:
            return None
        init, forward = inherited(cls, "__init__", self.classes), inherited(cls, "forward", self.classes)
        layer = layer_base(cls, self.classes, self.constants) if forward is None or init is None else None
        if forward is None and layer is None:
            return None
        bound = _bind_call(init, ref.node.args, ref.node.keywords, ref.env) if init is not None else {}
        env = _class_env(init, home(self.constants, cls), bound)
        built = Class(cls, init, forward, env, self.classes, self.constants, self.depth + 1)
        if init is None and layer is not None:  # `class Conv1d(nn.Conv1d)`: built as the layer is
            built.itself = Ref(ast.Call(func=layer, args=ref.node.args, keywords=ref.node.keywords), ref.env, built)
        return built if forward is not None or built.itself is not None else None


def _bind_call(fn: ast.FunctionDef, args: list[ast.expr], keywords: list[ast.keyword],
               env: dict[str, object]) -> dict[str, object]:
    """The values the source tells of `fn`'s parameters in a call to it (`self` aside)."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args][1:]
    bound: dict[str, object] = {}
    for name, arg in zip(params, args):
        if isinstance(arg, ast.Starred):
            break
        bound[name] = _value(arg, env)
    for kw in keywords:
        if kw.arg:
            bound[kw.arg] = _value(kw.value, env)
    return {k: v for k, v in bound.items() if v is not _UNKNOWN}


def _qualified(base: ast.expr, constants: dict[str, object]) -> str:
    """The base as the file's imports name it (`nn.Conv1d` -> torch.nn.Conv1d)."""
    imports: dict[str, str] = constants.get(IMPORTS, {})  # type: ignore[assignment]
    return qualified(base, imports)


def inherited_from(cls: ast.ClassDef, classes: dict[str, ast.ClassDef], constants: dict[str, object]) -> str:
    """The library class `cls` inherits `forward` from, qualified (`torch.nn.Conv1d`), or ""."""
    found = library_base(cls, classes)
    return _qualified(found[1], home(constants, found[0])) if found is not None else ""


def layer_base(cls: ast.ClassDef, classes: dict[str, ast.ClassDef], constants: dict[str, object]) -> Optional[ast.expr]:
    """The torch.nn layer base (`nn.Conv1d`) whose `forward` `cls` inherits, when the guess can shape it."""
    found = library_base(cls, classes)
    return found[1] if found is not None and torch_layer(_qualified(found[1], home(constants, found[0]))) else None


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def self_attr(node: ast.expr) -> bool:
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
