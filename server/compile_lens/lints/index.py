"""The chunks' facts resolved against each other: which functions are compiled or traced, what
calls what, which classes are modules.
"""

from __future__ import annotations

import ast
from typing import Optional

from ..protocol import Frame
from .facts import Facts, Func, Kind, Site, _Class, dotted_name

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


class Index:
    """Names across the whole file: imports, classes, functions, compile calls."""

    def __init__(self, all_facts: list[Facts]):
        self.aliases: dict[str, str] = {}
        self.functions: dict[str, Func] = {}  # module level, by name (the last def wins)
        self.classes: dict[str, _Class] = {}
        self.lambdas: dict[ast.Lambda, Func] = {}
        self.bindings: dict[str, list[Kind]] = {}  # module scope
        self.all_funcs: list[Func] = []
        self.compile_decorated: list[Func] = []
        self.loop_calls: list[Site] = []
        self.compiled_assigns: list[tuple[str, ast.Call, Optional[Func]]] = []
        candidates: list[Site] = []
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

    def _module_classes(self, all_facts: list[Facts]) -> set[_Class]:
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

    def method(self, cls: Optional[_Class], name: str) -> Optional[Func]:
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

    def callee(self, name: str, scope: Optional[Func]) -> Optional[Func]:
        """What a call `name(...)` made in `scope` runs: a nested def visible there, else a
        module-level function."""
        while scope is not None:
            if name in scope.nested:
                return scope.nested[name]
            scope = scope.parent
        return self.functions.get(name)

    def call_target(self, call: ast.Call, scope: Optional[Func]) -> Optional[Func]:
        """The def in this file a call runs: `f(...)` or `self.f(...)`."""
        callee = call.func
        if isinstance(callee, ast.Name):
            return self.callee(callee.id, scope)
        if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name) and callee.value.id == "self":
            return self.method(_method_class(scope), callee.attr)
        return None

    def compiled_function(self, site: Site) -> Optional[Func]:
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

    def compile_decorator(self, func: Func) -> Optional[ast.expr]:
        """Its `@torch.compile` / `@torch.compile(...)` decorator, if it has one."""
        if func not in self.compile_decorated or isinstance(func.node, ast.Lambda):
            return None
        for dec in func.node.decorator_list:
            if self.is_torch_compile(dotted_name(dec.func if isinstance(dec, ast.Call) else dec)):
                return dec
        return None

    def is_dynamo_disabled(self, func: Func) -> bool:
        return any(self.resolve(d) in _DYNAMO_DISABLE for d in func.decorators)

    def is_static_torch_call(self, resolved: str) -> bool:
        parts = resolved.split(".")
        if len(parts) > 2 and parts[1] in _STATIC_TORCH_MODULES:
            return True
        last = parts[-1]
        return last != "is_nonzero" and (last.startswith(_STATIC_TORCH_PREFIXES)
                                         or last in _STATIC_TORCH_NAMES)


def _compile_arg(site: Site) -> Optional[ast.expr]:
    """What a torch.compile call compiles (None: `torch.compile(mode=...)`, a decorator)."""
    call = site.call
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "model"), None)


def _method_class(func: Optional[Func]) -> Optional[_Class]:
    """The class whose `self` a function sees (a method, or a def/lambda nested in one)."""
    while func is not None:
        if func.cls is not None:
            return func.cls
        func = func.parent
    return None


def with_nested(func: Func) -> list[Func]:
    """A function and every def/lambda nested in it: all run when it is traced."""
    out, stack = [], [func]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(current.children)
    return out


def _frame(call: ast.AST, func: Optional[Func], facts: Facts) -> Frame:
    """A caller's frame, for `related` (the path is filled in by _Output)."""
    return Frame("", call.lineno + facts.delta, func.qualname if func else "<module>")
