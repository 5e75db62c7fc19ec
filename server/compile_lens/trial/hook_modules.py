"""The trial hook's outermost workspace modules, inside the user's program: which modules it tracks
(built outside any other workspace module's constructor, or found at the end of step 0 as the
modules holding the optimizer's parameters), their calls timed, and in the compiled run compiled
as `Module.compile()` (or `torch.compile(module)`) would. Stdlib only at import."""

from __future__ import annotations

import gc
import sys
import time
import types
import weakref
from typing import Any

from ..record.workspace import relative
from . import hook_settings, step_memory
from .hook_state import STATE, compiling, on_cuda
from .hook_steps import end_step, stop_if_done


def is_tracked(module: Any) -> bool:
    entry = STATE.tracked.get(id(module))
    return entry is not None and entry[0]() is module


def set_tracked(module: Any, compiled: Any) -> None:
    key = id(module)
    tracked = STATE.tracked
    tracked[key] = (weakref.ref(module, lambda _ref: tracked.pop(key, None)), compiled)


def adopt(cls: type) -> None:
    """A workspace nn.Module class (the recorder adopted it): its instances built outside any other's
    constructor are outermost."""
    init = cls.__dict__.get("__init__")
    if isinstance(init, types.FunctionType) and not getattr(init, "_compile_lens_trial", False):
        cls.__init__ = _wrap_init(init)


def _wrap_init(original: Any) -> Any:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        STATE.init_depth += 1
        try:
            original(self, *args, **kwargs)
        finally:
            STATE.init_depth -= 1
        if STATE.init_depth == 0 and not is_tracked(self):
            try:
                track(self)
            except Exception as exc:  # noqa: BLE001
                STATE.problems.append(f"{type(self).__qualname__}: {type(exc).__name__}: {exc}")

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    for name in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(__init__, name, getattr(original, name, None))
    __init__._compile_lens_trial = True  # type: ignore[attr-defined]
    return __init__


def track(module: Any, whole: bool = False) -> None:
    """Time `module`'s calls and, in the compiled run, compile it: its `_call_impl` as `Module.compile()`
    does, or with `whole` as `torch.compile(module)` does (a module whose forward is torch's own, as
    `nn.Sequential`'s, is never compiled through `_call_impl`: Dynamo skips torch's frames)."""
    compiled = None
    own = type(module).__name__ == "OptimizedModule"  # the program's `torch.compile(model)`: its options
    if STATE.mode == "compiled" and module._compiled_call_impl is None and not own:
        compiled = STATE.compile_below(module if whole else module._call_impl, **STATE.options)
    set_tracked(module, compiled)
    rel = relative(getattr(sys.modules.get(type(module).__module__), "__file__", None))
    if compiled is not None:  # the trial's own call, with the options it was given
        hook_settings.note_call("trial", (), STATE.options, f"{rel}:{type(module).__qualname__}" if rel else
                                type(module).__qualname__)
    STATE.compiled_by_program = STATE.compiled_by_program or own
    shown = type(getattr(module, "_orig_mod", None) if own else module).__qualname__  # the model, not torch's wrapper
    STATE.tracked_names.append(shown)
    if rel:
        STATE.tracked_targets.append(f"{rel}:{type(module).__qualname__}")
    cls = type(module)
    if cls.__dict__.get("__call__") is None or not getattr(cls.__dict__["__call__"], "_compile_lens_trial", False):
        cls.__call__ = _timed_call(cls.__call__)
    dropout = sys.modules["torch"].nn.modules.dropout._DropoutNd
    if any(isinstance(m, dropout) and m.p > 0 for m in module.modules()):
        STATE.with_dropout.add(shown)


def _timed_call(original: Any) -> Any:
    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if compiling() or not is_tracked(self):
            return original(self, *args, **kwargs)
        compiled = STATE.tracked[id(self)][1]
        cur = STATE.cur
        if STATE.call_depth == 0:
            stop_if_done()
        if STATE.call_depth == 0 and cur["start"] is None:
            cur["shapes"] = [list(a.shape) for a in list(args) + list(kwargs.values()) if hasattr(a, "shape")][:8]
            if not on_cuda():
                step_memory.start(len(STATE.steps), STATE.steps_limit)
            cur["start"] = time.perf_counter()
        STATE.call_depth += 1
        try:
            # only the outermost call: a whole-module compile calls this again from inside
            if compiled is not None and self._compiled_call_impl is None and STATE.call_depth == 1:
                return compiled(*args, **kwargs)
            return original(self, *args, **kwargs)
        finally:
            STATE.call_depth -= 1
            if STATE.call_depth == 0 and STATE.step_on == "forward":
                end_step()

    __call__._compile_lens_trial = True  # type: ignore[attr-defined]
    return __call__


def track_library_model(optimizer: Any) -> None:
    """At the end of step 0, when no workspace module was built: the modules inside no other module
    that hold the optimizer's parameters are the model (one scan of the live objects, once)."""
    if STATE.tracked_names:
        return
    try:
        params = {id(p) for group in optimizer.param_groups for p in group["params"]}
        # type(), not isinstance(): that reads `__class__`, which some module proxies answer with a warning
        modules = [o for o in gc.get_objects() if issubclass(type(o), STATE.torch.nn.Module)]
        inner = {id(child) for m in modules for child in m.children()}
        for module in modules:
            if id(module) not in inner and not is_tracked(module) and any(id(p) in params for p in module.parameters()):
                track(module, whole=True)
                STATE.found_late = True
    except Exception as exc:  # noqa: BLE001 - never change what the program does
        STATE.problems.append(f"finding the model: {type(exc).__name__}: {exc}")
