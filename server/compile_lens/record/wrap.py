"""The recorder's wrappers: a workspace `nn.Module` class's own `__init__` and `forward` (`adopt`), and
what `torch.compile` returns for a workspace function or a `Module.compile()` (`patched_compile`).
Each records (first arguments, first inputs, shapes of every call) and calls the original; recording
errors are noted, never raised. Stdlib only; runs inside the user's program.
"""

from __future__ import annotations

import functools
import sys
import types
from typing import Any, Optional

from . import compile_calls, store
from .describe import describe_call, describe_init, precision_state
from .hook_state import STATE as S
from .hook_state import Entry, quietly
from .workspace import relative


def adopt(cls: type) -> None:
    """A new nn.Module subclass: when the workspace defines it, wrap its own __init__ and forward."""
    module = sys.modules.get(cls.__module__)
    rel = relative(getattr(module, "__file__", None))
    if rel is None or "<locals>" in cls.__qualname__:
        return
    entry = Entry(f"{rel}:{cls.__qualname__}", "module")
    S.by_class[cls] = entry
    S.entries.append(entry)
    # Its own __init__ and forward, or those it inherits from a library class (`class Head(nn.Linear)`);
    # a workspace base's are wrapped already and record for this class too.
    init = getattr(cls, "__init__", None)
    if isinstance(init, types.FunctionType) and not getattr(init, "_compile_lens_wrapper", False):
        cls.__init__ = wrap_init(init)
    forward = getattr(cls, "forward", None)
    unimplemented = sys.modules["torch"].nn.Module.forward
    if isinstance(forward, types.FunctionType) and forward is not unimplemented \
            and not getattr(forward, "_compile_lens_wrapper", False):
        cls.forward = wrap_forward(forward)


def wrap_init(original: Any) -> Any:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        entry = S.by_class.get(type(self))
        if entry is not None and entry.init is None:
            try:
                entry.init = quietly(describe_init, type(self).__qualname__, original, self, args, kwargs)
            except Exception as exc:  # noqa: BLE001
                entry.init = {"call": None, "cannot_replay": [{"argument": "*", "type": f"recorder error: {exc}",
                                                               "required": True}]}
        original(self, *args, **kwargs)

    functools.update_wrapper(__init__, original)
    __init__._compile_lens_wrapper = True  # type: ignore[attr-defined]
    return __init__


def wrap_forward(original: Any) -> Any:
    # every call of a workspace module: what it does beyond calling the original is `note`'s
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if (S.dynamo and S.compiling()) or S.suppressed:
            return original(self, *args, **kwargs)
        entry = S.by_class.get(type(self))
        if entry is not None:
            try:
                note(entry, original, args, kwargs, "param")
            except Exception as exc:  # noqa: BLE001
                S.problems.append(f"{entry.key}: {type(exc).__name__}: {exc}")
        return original(self, *args, **kwargs)

    functools.update_wrapper(forward, original)
    forward._compile_lens_wrapper = True  # type: ignore[attr-defined]
    return forward


def note(entry: Entry, fn: Any, args: tuple, kwargs: dict, drop: str) -> None:
    """One call: its input specs if it is the first, and its shapes."""
    if entry.call is None:
        entry.call = quietly(describe_call, fn, args, kwargs, drop)
        entry.precision = quietly(precision_state, args, kwargs)
    tensor = S.tensor
    key: tuple = ()
    for value in args:
        if isinstance(value, tensor):
            key += (value.shape,)
    if kwargs:
        for value in kwargs.values():
            if isinstance(value, tensor):
                key += (value.shape,)
    shapes = entry.shapes
    seen = shapes.get(key)
    if seen is not None:
        shapes[key] = seen + 1
    elif len(shapes) < store.MAX_SHAPES:
        shapes[key] = 1
    else:
        entry.more += 1
    entry.calls += 1


def patched_compile(original: Any) -> Any:
    def compile(*args: Any, **kwargs: Any) -> Any:
        compiled = original(*args, **kwargs)
        model = args[0] if args else kwargs.get("model")
        if model is None:  # @torch.compile(...): the decorator it returns calls torch.compile again
            return compiled
        _note_call(model, args[1:], kwargs)
        return recorded_compiled(model, compiled)

    return functools.update_wrapper(compile, original)


def _note_call(model: Any, args: tuple, kwargs: dict) -> None:
    """The call on its target's entry (a workspace module, function or `Module.compile()`), the first one kept."""
    try:
        found = S.by_class.get(type(model)) or (compiled_entry(model) or (None,))[0]
        if found is not None and found.compile is None:
            module_call = isinstance(model, types.MethodType) and model.__name__ == "_call_impl"
            found.compile = compile_calls.call("Module.compile" if module_call else "torch.compile", args, kwargs)
    except Exception as exc:  # noqa: BLE001
        S.problems.append(f"torch.compile call: {type(exc).__name__}: {exc}")


def recorded_compiled(model: Any, compiled: Any) -> Any:
    if getattr(compiled, "_compile_lens_recorded", False):
        return compiled
    try:
        found = compiled_entry(model)
    except Exception as exc:  # noqa: BLE001
        S.problems.append(f"torch.compile({type(model).__name__}): {type(exc).__name__}: {exc}")
        found = None
    if found is None or not callable(compiled):
        return compiled
    entry, signature_of, drop, module_call = found

    def compiled_call(*args: Any, **kwargs: Any) -> Any:
        if S.dynamo and S.compiling():
            return compiled(*args, **kwargs)
        try:
            note(entry, signature_of, args, kwargs, drop)
        except Exception as exc:  # noqa: BLE001
            S.problems.append(f"{entry.key}: {type(exc).__name__}: {exc}")
        if not module_call:
            return compiled(*args, **kwargs)
        S.suppressed += 1  # its forward runs eagerly around graph breaks: counted here already
        try:
            return compiled(*args, **kwargs)
        finally:
            S.suppressed -= 1

    functools.update_wrapper(compiled_call, compiled)
    compiled_call._compile_lens_recorded = True  # type: ignore[attr-defined]
    return compiled_call


def compiled_entry(model: Any) -> Optional[tuple]:
    """(entry, function whose signature describes the call, `drop` of describe_call, is Module.compile)."""
    if isinstance(model, types.MethodType):
        owner, fn = model.__self__, model.__func__
        if getattr(fn, "__name__", "") == "_call_impl" and type(owner) in S.by_class:  # Module.compile()
            return S.by_class[type(owner)], owner.forward, "none", True
        if isinstance(fn, types.FunctionType):
            entry = function_entry(fn)
            return (entry, model, "none", False) if entry else None
        return None
    if isinstance(model, types.FunctionType):
        entry = function_entry(model)
        code = model.__code__
        method = "." in model.__qualname__ and code.co_argcount > 0 and code.co_varnames[0] in ("self", "cls")
        return (entry, model, "both" if method else "none", False) if entry else None
    return None  # modules: their wrapped forward records the calls


def function_entry(fn: types.FunctionType) -> Optional[Entry]:
    rel = relative(fn.__code__.co_filename)
    if rel is None or "<locals>" in fn.__qualname__:
        return None
    key = f"{rel}:{fn.__qualname__}"
    for entry in S.entries:
        if entry.key == key:
            return entry
    entry = Entry(key, "function")
    S.entries.append(entry)
    return entry
