"""The recorder `compile-lens record` installs in the user's program (through `_boot/sitecustomize.py`).

Over 500 lines: it is the one module loaded into the user's process, patched in before their code
runs; keeping it whole keeps that footprint to one import that needs nothing else of the package.

It records, for `nn.Module` subclasses and `torch.compile`d functions defined in the workspace,
the first construction's arguments, the first call's inputs and the shapes of every call, and
writes them to recorded.json when the program exits. It must not change what the program does:

- Nothing is imported before the program imports torch; then two things are patched:
  `nn.Module.__init_subclass__` (so each workspace class has its own `__init__` and `forward`
  wrapped when it is defined, no per-call hook on every module) and `torch.compile` (compiled
  functions, and `Module.compile()`).
- A wrapper records and calls the original; recording errors are swallowed.
- Under torch.compile the wrappers stay out of the graph: when Dynamo inlines one it sees
  `torch.compiler.is_compiling()` as True and only the original is traced; as a top frame, all
  code of this module is marked for Dynamo to skip (but not what it calls), so the user's own
  `forward` is the frame that gets compiled, exactly as without the recorder.
- Forked children (DataLoader workers) record nothing to the file; only the process that
  installed the recorder writes it, at exit.

Stdlib only at import; Python 3.9+.
"""

from __future__ import annotations

import atexit
import functools
import math
import os
import sys
import time
import types
from typing import Any, Optional

from . import store

MAX_ITEMS = 64  # items of a list/tuple/dict argument described

_root = ""
_out = ""
_command = ""
_run_id = ""
_pid = -1
_by_class: dict = {}  # workspace class -> _Entry
_entries: list = []  # every _Entry, in the order they were made
_problems: list = []
_workspace_files: dict = {}  # path -> relative path, or None when not in the workspace
_tensor: Any = None  # torch.Tensor, once torch is imported
_compiling: Any = None  # torch.compiler.is_compiling
_set_eval_frame: Any = None  # Dynamo's frame hook switch, once Dynamo is imported
_dynamo = False  # Dynamo is imported: something may be compiling (until then, no need to ask)
_suppressed = 0  # > 0 while a compiled call already records (Module.compile): forward does not


def _not_compiling() -> bool:
    return False


_compiling = _not_compiling


class _Entry:
    __slots__ = ("key", "kind", "init", "call", "calls", "shapes", "more")

    def __init__(self, key: str, kind: str):
        self.key, self.kind = key, kind
        self.init: Optional[dict] = None
        self.call: Optional[dict] = None
        self.calls = 0
        self.shapes: dict = {}  # tuple of torch.Size (one per tensor argument) -> count
        self.more = 0

    def as_json(self) -> dict:
        return {
            "kind": self.kind,
            "init": self.init,
            "call": self.call,
            "calls": self.calls,
            "shapes": [{"shapes": [list(s) for s in key], "count": n} for key, n in self.shapes.items()],
            "more_shapes": self.more,
            "run": {"id": _run_id, "command": _command,
                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        }


def install() -> None:
    """Set up from the environment `compile-lens record` prepared; idempotent."""
    global _root, _out, _command, _run_id, _pid
    if _pid == os.getpid():
        return
    _root = os.path.realpath(os.environ.get("COMPILE_LENS_RECORD_ROOT") or os.getcwd())
    _out = os.environ.get("COMPILE_LENS_RECORD_OUT") or store.default_path(_root)
    _command = os.environ.get("COMPILE_LENS_RECORD_COMMAND", "")
    _run_id = os.environ.get("COMPILE_LENS_RECORD_RUN", "")
    _pid = os.getpid()
    if "torch" in sys.modules and hasattr(sys.modules["torch"], "nn"):
        _patch_torch(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _Watcher())
    if "torch._dynamo.eval_frame" in sys.modules:
        _skip_in_dynamo(sys.modules["torch._dynamo.eval_frame"])
    atexit.register(_write)


class _Watcher:
    """A meta-path finder that only notices two imports: torch, and Dynamo's eval_frame."""

    def __init__(self) -> None:
        self.names = {"torch": "_patch_torch", "torch._dynamo.eval_frame": "_skip_in_dynamo"}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.names:
            return None
        after = globals()[self.names.pop(name)]
        if not self.names:
            sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec

        def exec_module(module: types.ModuleType) -> None:
            run(module)
            try:
                after(module)
            except Exception as exc:  # noqa: BLE001 - never break the user's import
                _problems.append(f"patching {name}: {type(exc).__name__}: {exc}")

        loader.exec_module = exec_module  # this module's own loader object only
        return spec


def _patch_torch(torch: Any) -> None:
    global _tensor, _compiling
    if getattr(torch, "_compile_lens_recording", False):
        return
    torch._compile_lens_recording = True
    _tensor = torch.Tensor
    compiler = getattr(torch, "compiler", None)
    _compiling = getattr(compiler, "is_compiling", None) or _not_compiling
    module = torch.nn.Module
    previous = module.__dict__.get("__init_subclass__")

    def __init_subclass__(cls: type, **kwargs: Any) -> None:
        if previous is not None:
            previous.__get__(None, cls)(**kwargs)
        else:
            super(module, cls).__init_subclass__(**kwargs)
        try:
            _adopt(cls)
        except Exception as exc:  # noqa: BLE001
            _problems.append(f"{cls.__qualname__}: {type(exc).__name__}: {exc}")

    module.__init_subclass__ = classmethod(__init_subclass__)
    if hasattr(torch, "compile"):
        torch.compile = _patched_compile(torch.compile)


def _skip_in_dynamo(eval_frame: Any) -> None:
    """Dynamo must never compile a frame of this module (it still compiles what they call)."""
    global _set_eval_frame, _dynamo
    _set_eval_frame = getattr(eval_frame, "set_eval_frame", None)
    _dynamo = True
    skip = getattr(eval_frame, "skip_code", None)
    if skip is None:
        return
    for code in _own_code():
        skip(code)


def _quietly(fn: Any, *args: Any) -> Any:
    """Run our own describing code (inspect, ...) with Dynamo's frame hook off: it must compile none of it."""
    if _set_eval_frame is None:
        return fn(*args)
    prior = _set_eval_frame(None)
    try:
        return fn(*args)
    finally:
        _set_eval_frame(prior)


def _own_code() -> list:
    codes: list = []
    pending: list = []
    for value in list(globals().values()):
        if isinstance(value, types.FunctionType) and value.__module__ == __name__:
            pending.append(value.__code__)
        elif isinstance(value, type) and value.__module__ == __name__:
            pending += [v.__code__ for v in vars(value).values() if isinstance(v, types.FunctionType)]
    while pending:
        code = pending.pop()
        if code in codes:
            continue
        codes.append(code)
        pending += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return codes


# --- what belongs to the workspace ------------------------------------------------------------

def _relative(path: Optional[str]) -> Optional[str]:
    """The workspace-relative path of a source file; None for files outside it (libraries too)."""
    if not path:
        return None
    if path in _workspace_files:
        return _workspace_files[path]
    real = os.path.realpath(path)
    rel: Optional[str] = None
    if real.startswith(_root + os.sep) and real.endswith(".py"):
        parts = real.split(os.sep)
        prefixes = {os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
        here = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep
        if not ({"site-packages", "dist-packages"} & set(parts)) and not any(real.startswith(p) for p in prefixes) \
                and not real.startswith(here):
            rel = os.path.relpath(real, _root).replace(os.sep, "/")
    _workspace_files[path] = rel
    return rel


def _adopt(cls: type) -> None:
    """A new nn.Module subclass: when the workspace defines it, wrap its own __init__ and forward."""
    module = sys.modules.get(cls.__module__)
    rel = _relative(getattr(module, "__file__", None))
    if rel is None or "<locals>" in cls.__qualname__:
        return
    entry = _Entry(f"{rel}:{cls.__qualname__}", "module")
    _by_class[cls] = entry
    _entries.append(entry)
    # Its own __init__ and forward, or those it inherits from a library class (`class Head(nn.Linear)`);
    # a workspace base's are wrapped already and record for this class too.
    init = getattr(cls, "__init__", None)
    if isinstance(init, types.FunctionType) and not getattr(init, "_compile_lens_wrapper", False):
        cls.__init__ = _wrap_init(init)
    forward = getattr(cls, "forward", None)
    unimplemented = sys.modules["torch"].nn.Module.forward
    if isinstance(forward, types.FunctionType) and forward is not unimplemented \
            and not getattr(forward, "_compile_lens_wrapper", False):
        cls.forward = _wrap_forward(forward)


def _wrap_init(original: Any) -> Any:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        entry = _by_class.get(type(self))
        if entry is not None and entry.init is None:
            try:
                entry.init = _quietly(_describe_init, type(self).__qualname__, original, self, args, kwargs)
            except Exception as exc:  # noqa: BLE001
                entry.init = {"call": None, "cannot_replay": [{"argument": "*", "type": f"recorder error: {exc}",
                                                               "required": True}]}
        original(self, *args, **kwargs)

    functools.update_wrapper(__init__, original)
    __init__._compile_lens_wrapper = True  # type: ignore[attr-defined]
    return __init__


def _wrap_forward(original: Any) -> Any:
    # The hot path: every call of a workspace module. `_note`'s shape bookkeeping is inlined.
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if (_dynamo and _compiling()) or _suppressed:
            return original(self, *args, **kwargs)
        entry = _by_class.get(type(self))
        if entry is not None:
            try:
                if entry.call is None or kwargs:
                    _note(entry, original, args, kwargs, "param")
                else:
                    key: tuple = ()
                    for value in args:
                        if isinstance(value, _tensor):
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
            except Exception as exc:  # noqa: BLE001
                _problems.append(f"{entry.key}: {type(exc).__name__}: {exc}")
        return original(self, *args, **kwargs)

    functools.update_wrapper(forward, original)
    forward._compile_lens_wrapper = True  # type: ignore[attr-defined]
    return forward


def _note(entry: _Entry, fn: Any, args: tuple, kwargs: dict, drop: str) -> None:
    """One call: its input specs if it is the first, and its shapes."""
    if entry.call is None:
        entry.call = _quietly(_describe_call, fn, args, kwargs, drop)
    tensor = _tensor
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


# --- torch.compile -----------------------------------------------------------------------------

def _patched_compile(original: Any) -> Any:
    def compile(*args: Any, **kwargs: Any) -> Any:
        compiled = original(*args, **kwargs)
        model = args[0] if args else kwargs.get("model")
        if model is None:  # @torch.compile(...): the decorator it returns calls torch.compile again
            return compiled
        return _recorded_compiled(model, compiled)

    return functools.update_wrapper(compile, original)


def _recorded_compiled(model: Any, compiled: Any) -> Any:
    if getattr(compiled, "_compile_lens_recorded", False):
        return compiled
    try:
        found = _compiled_entry(model)
    except Exception as exc:  # noqa: BLE001
        _problems.append(f"torch.compile({type(model).__name__}): {type(exc).__name__}: {exc}")
        found = None
    if found is None or not callable(compiled):
        return compiled
    entry, signature_of, drop, module_call = found

    def compiled_call(*args: Any, **kwargs: Any) -> Any:
        global _suppressed
        if _dynamo and _compiling():
            return compiled(*args, **kwargs)
        try:
            _note(entry, signature_of, args, kwargs, drop)
        except Exception as exc:  # noqa: BLE001
            _problems.append(f"{entry.key}: {type(exc).__name__}: {exc}")
        if not module_call:
            return compiled(*args, **kwargs)
        _suppressed += 1  # its forward runs eagerly around graph breaks: counted here already
        try:
            return compiled(*args, **kwargs)
        finally:
            _suppressed -= 1

    functools.update_wrapper(compiled_call, compiled)
    compiled_call._compile_lens_recorded = True  # type: ignore[attr-defined]
    return compiled_call


def _compiled_entry(model: Any) -> Optional[tuple]:
    """(entry, function whose signature describes the call, `drop` of _describe_call, is Module.compile)."""
    if isinstance(model, types.MethodType):
        owner, fn = model.__self__, model.__func__
        if getattr(fn, "__name__", "") == "_call_impl" and type(owner) in _by_class:  # Module.compile()
            return _by_class[type(owner)], owner.forward, "none", True
        if isinstance(fn, types.FunctionType):
            entry = _function_entry(fn)
            return (entry, model, "none", False) if entry else None
        return None
    if isinstance(model, types.FunctionType):
        entry = _function_entry(model)
        code = model.__code__
        method = "." in model.__qualname__ and code.co_argcount > 0 and code.co_varnames[0] in ("self", "cls")
        return (entry, model, "both" if method else "none", False) if entry else None
    return None  # modules: their wrapped forward records the calls


def _function_entry(fn: types.FunctionType) -> Optional[_Entry]:
    rel = _relative(fn.__code__.co_filename)
    if rel is None or "<locals>" in fn.__qualname__:
        return None
    key = f"{rel}:{fn.__qualname__}"
    for entry in _entries:
        if entry.key == key:
            return entry
    entry = _Entry(key, "function")
    _entries.append(entry)
    return entry


# --- describing values ---------------------------------------------------------------------

def _text(value: Any, depth: int = 0) -> Optional[str]:
    """Python source that rebuilds a plain value, or None."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float('{value}')"
    if depth > 4:
        return None
    if isinstance(value, (tuple, list)) and len(value) <= MAX_ITEMS:
        items = [_text(v, depth + 1) for v in value]
        if any(i is None for i in items):
            return None
        if isinstance(value, list):
            return "[" + ", ".join(items) + "]"  # type: ignore[arg-type]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"  # type: ignore[arg-type]
    if isinstance(value, dict) and len(value) <= MAX_ITEMS:
        pairs = [(_text(k, depth + 1), _text(v, depth + 1)) for k, v in value.items()]
        if any(k is None or v is None for k, v in pairs):
            return None
        return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.dtype):
        return str(value)
    if type(value).__name__ == "Namespace" and type(value).__module__ in ("argparse", "types"):
        fields = vars(value)
        parts = [(k, _text(v, depth + 1)) for k, v in fields.items()]
        if len(parts) > MAX_ITEMS or any(v is None or not k.isidentifier() for k, v in parts):
            return None
        where = "argparse" if type(value).__module__ == "argparse" else "types"
        name = "Namespace" if where == "argparse" else "SimpleNamespace"
        return f"__import__('{where}').{name}(" + ", ".join(f"{k}={v}" for k, v in parts) + ")"
    fields = getattr(type(value), "__dataclass_fields__", None)
    if fields is not None and _relative(getattr(sys.modules.get(type(value).__module__), "__file__", None)):
        parts = []
        for name, field in fields.items():
            if not getattr(field, "init", True):
                continue
            text = _text(getattr(value, name, None), depth + 1)
            if text is None:
                return None
            parts.append(f"{name}={text}")
        return f"{type(value).__qualname__}({', '.join(parts)})"
    return None


def _type_name(value: Any) -> str:
    kind = type(value)
    return kind.__qualname__ if kind.__module__ in ("builtins", "__main__") else f"{kind.__module__}.{kind.__qualname__}"


def _describe_init(name: str, fn: Any, self: Any, args: tuple, kwargs: dict) -> dict:
    import inspect

    try:
        signature = inspect.signature(fn)
        bound = signature.bind(self, *args, **kwargs)
    except (TypeError, ValueError):
        return {"call": None, "cannot_replay": [{"argument": "*", "type": "arguments that do not fit the signature",
                                                 "required": True}]}
    params = list(signature.parameters.values())[1:]
    varargs = any(p.kind is p.VAR_POSITIONAL and bound.arguments.get(p.name) for p in params)
    parts: list = []
    missing: list = []
    for param in params:
        if param.name not in bound.arguments:
            continue
        value = bound.arguments[param.name]
        positional = param.kind is param.POSITIONAL_ONLY or (varargs and param.kind is param.POSITIONAL_OR_KEYWORD)
        required = param.default is param.empty or positional
        if param.kind is param.VAR_POSITIONAL:
            for i, item in enumerate(value):
                text = _text(item)
                if text is None:
                    missing.append({"argument": f"*{param.name}[{i}]", "type": _type_name(item), "required": True})
                parts.append(text)
            continue
        if param.kind is param.VAR_KEYWORD:
            for key, item in value.items():
                text = _text(item)
                if text is None or not key.isidentifier():
                    missing.append({"argument": key, "type": _type_name(item), "required": False})
                else:
                    parts.append(f"{key}={text}")
            continue
        text = _text(value)
        if text is None:
            missing.append({"argument": param.name, "type": _type_name(value), "required": required})
            if required:
                parts.append(None)
            continue
        parts.append(text if positional else f"{param.name}={text}")
    replayable = all(p is not None for p in parts) and not any(m["required"] for m in missing)
    return {"call": f"{name}({', '.join(parts)})" if replayable else None, "cannot_replay": missing}


def _spec(value: Any, depth: int = 0) -> dict:
    tensor = _tensor
    if tensor is not None and isinstance(value, tensor):
        info: dict = {"shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", ""),
                      "device": str(value.device), "requires_grad": bool(value.requires_grad)}
        if not value.is_floating_point() and not value.is_complex() and 0 < value.numel() <= 10**8:
            try:
                info["min"], info["max"] = int(value.min()), int(value.max())
            except Exception:  # noqa: BLE001 - meta tensors, quantized...
                pass
        return {"tensor": info}
    text = _text(value)
    if text is not None:
        return {"value": text}
    if depth < 3 and isinstance(value, (tuple, list)) and len(value) <= MAX_ITEMS:
        return {type(value).__name__: [_spec(v, depth + 1) for v in value]}
    if depth < 3 and isinstance(value, dict) and len(value) <= MAX_ITEMS and all(isinstance(k, str) for k in value):
        return {"dict": {k: _spec(v, depth + 1) for k, v in value.items()}}
    return {"unknown": _type_name(value)}


def _describe_call(fn: Any, args: tuple, kwargs: dict, drop: str) -> dict:
    """The call as a tuple of positional arguments (what a recipe is), or why it is not one.

    `drop`: "param" (fn's first parameter is self, not in args), "both" (self is args[0] too),
    "none" (a bound method: neither).
    """
    import inspect

    try:
        params: Optional[list] = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = None
    if params and drop in ("param", "both"):
        params = params[1:]
    if drop == "both":
        args = args[1:]
    if params is None:
        return {"args": [{"name": f"args[{i}]", "spec": _spec(v)} for i, v in enumerate(args)],
                "cannot_replay": "keyword arguments" if kwargs else None}
    try:
        bound = inspect.Signature(params).bind(*args, **kwargs).arguments
    except TypeError as exc:
        return {"args": [], "cannot_replay": f"arguments that do not fit the signature ({exc})"}
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    last = max((i for i, p in enumerate(positional) if p.name in bound), default=-1)
    out: list = []
    why = None
    for param in positional[: last + 1]:
        if param.name in bound:
            out.append({"name": param.name, "spec": _spec(bound[param.name])})
            continue
        default = _text(param.default) if param.default is not param.empty else None
        if default is None:
            why = f"argument `{param.name}` is left to a default that cannot be written out"
        out.append({"name": param.name, "spec": {"value": default or "None"}})
    for param in params:
        if param.kind is param.VAR_POSITIONAL and param.name in bound:
            out += [{"name": f"*{param.name}", "spec": _spec(v)} for v in bound[param.name]]
        elif param.kind in (param.KEYWORD_ONLY, param.VAR_KEYWORD) and bound.get(param.name, {}) != {}:
            why = why or f"keyword-only argument `{param.name}`"
    return {"args": out, "cannot_replay": why}


# --- at exit -------------------------------------------------------------------------------

def _write() -> None:
    if os.getpid() != _pid:
        return
    try:
        targets = {e.key: e.as_json() for e in _entries if e.init is not None or e.call is not None}
        if targets:
            store.merge_write(_out, targets)
    except Exception as exc:  # noqa: BLE001 - the program's exit status must stay its own
        _problems.append(f"writing {_out}: {type(exc).__name__}: {exc}")
    if _problems:
        store.log(_out, _problems)
