"""What the source tells of a value, evaluated without `eval`: literals, arithmetic, config classes.

Discovery reads files it has no reason to trust, so this is a small interpreter of literals and
arithmetic over module-level names, config classes (dataclasses or plain attribute holders) and
constructor defaults; anything it cannot tell is `_UNKNOWN`.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Iterator, Optional

CLASSES = "<classes>"  # where _module_constants keeps the file's classes (not a Python name)
_ASSIGNED = "<assigned>"  # and the calls module-level names are bound to (`config = GPT2Config(...)`)

_UNKNOWN = object()


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
    """Module-level names whose values the source tells, config classes, and (under CLASSES) every class."""
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
    values[CLASSES], values[_ASSIGNED] = classes, assigned
    return values


def _method(cls: ast.ClassDef, name: str) -> Optional[ast.FunctionDef]:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def ancestry(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> Iterator[ast.ClassDef]:
    """The class, then its bases among `classes` (the workspace's), breadth first, each once."""
    seen: set[str] = set()
    queue = [cls]
    while queue:
        node = queue.pop(0)
        if node.name not in seen:
            seen.add(node.name)
            yield node
            queue += [classes[b.id] for b in node.bases if isinstance(b, ast.Name) and b.id in classes]


def inherited(cls: ast.ClassDef, name: str, classes: dict[str, ast.ClassDef]) -> Optional[ast.FunctionDef]:
    """`name` defined by the class or by a base class of this file."""
    return next((m for m in (_method(node, name) for node in ancestry(cls, classes)) if m is not None), None)


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


def _evaluate(node: Optional[ast.expr], env: dict[str, object]) -> object:
    """The value of a plain expression in `env`, or _UNKNOWN: one case per node type (`_CASES`)."""
    if node is None:
        return _UNKNOWN
    case = _CASES.get(type(node))
    return case(node, env) if case else _UNKNOWN


def _constant(node: ast.Constant, env: dict[str, object]) -> object:
    return node.value if isinstance(node.value, (int, float, str, bool, type(None))) else _UNKNOWN


def _name(node: ast.Name, env: dict[str, object]) -> object:
    return env.get(node.id, _UNKNOWN)


def _attribute(node: ast.Attribute, env: dict[str, object]) -> object:
    base = _evaluate(node.value, env)
    return base.attrs.get(node.attr, _UNKNOWN) if isinstance(base, _Obj) else _UNKNOWN


def _sequence(node: ast.Tuple | ast.List, env: dict[str, object]) -> object:
    items = [_evaluate(e, env) for e in node.elts]
    if any(i is _UNKNOWN for i in items):
        return _UNKNOWN
    return tuple(items) if isinstance(node, ast.Tuple) else items


def _dict(node: ast.Dict, env: dict[str, object]) -> object:
    keys = [_evaluate(k, env) for k in node.keys]
    values = [_evaluate(v, env) for v in node.values]
    if any(x is _UNKNOWN for x in keys + values):
        return _UNKNOWN
    return dict(zip(keys, values))


def _binop(node: ast.BinOp, env: dict[str, object]) -> object:
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


def _unaryop(node: ast.UnaryOp, env: dict[str, object]) -> object:
    operand = _evaluate(node.operand, env)
    if operand is _UNKNOWN:
        return _UNKNOWN
    if isinstance(node.op, ast.Not):
        return not operand
    if isinstance(operand, (int, float)):
        return -operand if isinstance(node.op, ast.USub) else operand if isinstance(node.op, ast.UAdd) else _UNKNOWN
    return _UNKNOWN


def _boolop(node: ast.BoolOp, env: dict[str, object]) -> object:
    result: object = _UNKNOWN
    for item in node.values:
        result = _evaluate(item, env)
        if result is _UNKNOWN:
            return _UNKNOWN
        if bool(result) == isinstance(node.op, ast.Or):
            return result
    return result


def _compare(node: ast.Compare, env: dict[str, object]) -> object:
    if len(node.ops) != 1:
        return _UNKNOWN
    left, right = _evaluate(node.left, env), _evaluate(node.comparators[0], env)
    op = _COMPARE.get(type(node.ops[0]))
    if left is _UNKNOWN or right is _UNKNOWN or op is None:
        return _UNKNOWN
    return op(left, right)


def _ifexp(node: ast.IfExp, env: dict[str, object]) -> object:
    test = _evaluate(node.test, env)
    return _UNKNOWN if test is _UNKNOWN else _evaluate(node.body if test else node.orelse, env)


def _subscript(node: ast.Subscript, env: dict[str, object]) -> object:
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


def _call(node: ast.Call, env: dict[str, object]) -> object:
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


_CASES: dict[type, Callable[[Any, dict[str, object]], object]] = {
    ast.Constant: _constant, ast.Name: _name, ast.Attribute: _attribute, ast.Tuple: _sequence, ast.List: _sequence,
    ast.Dict: _dict, ast.BinOp: _binop, ast.UnaryOp: _unaryop, ast.BoolOp: _boolop, ast.Compare: _compare,
    ast.IfExp: _ifexp, ast.Subscript: _subscript, ast.Call: _call,
}


def _arg(call: ast.Call, index: int, name: str, env: dict[str, object]) -> object:
    """A constructor argument of a layer call, by keyword or position; None when not told."""
    node = next((kw.value for kw in call.keywords if kw.arg == name), None)
    if node is None and 0 <= index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
        node = call.args[index]
    if node is None:
        return None
    value = _value(node, env)
    return None if value is _UNKNOWN else value
