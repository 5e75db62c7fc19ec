"""The recorder `compile-lens record` installs in the user's program (through `_boot/sitecustomize.py`).

It records, for `nn.Module` subclasses and `torch.compile`d functions defined in the workspace,
the first construction's arguments, the first call's inputs and the shapes of every call, and
writes them to recorded.json when the program exits. It must not change what the program does:

- Nothing is imported before the program imports torch; then two things are patched:
  `nn.Module.__init_subclass__` (so each workspace class has its own `__init__` and `forward`
  wrapped when it is defined, no per-call hook on every module) and `torch.compile` (compiled
  functions, and `Module.compile()`); the wrappers are `wrap`'s, the descriptions `describe`'s.
- A wrapper records and calls the original; recording errors are swallowed.
- Under torch.compile the wrappers stay out of the graph: when Dynamo inlines one it sees
  `torch.compiler.is_compiling()` as True and only the original is traced; as a top frame, all
  code of the recorder's modules (`OWN_MODULES`) is marked for Dynamo to skip (but not what it
  calls), so the user's own `forward` is the frame that gets compiled, exactly as without it.
- Forked children (DataLoader workers) record nothing to the file; only the process that
  installed the recorder writes it, at exit.

Its state is one object, `hook_state.STATE`. Stdlib only at import; Python 3.9+.
"""

from __future__ import annotations

import atexit
import os
import sys
import types
from typing import Any

from . import compile_calls, describe, hook_state, store, workspace, wrap
from .hook_state import STATE

OWN_MODULES = (hook_state, workspace, describe, wrap, compile_calls)  # and this one: Dynamo skips their frames


def install() -> None:
    """Set up from the environment `compile-lens record` prepared; idempotent."""
    if STATE.pid == os.getpid():
        return
    STATE.root = os.path.realpath(os.environ.get("COMPILE_LENS_RECORD_ROOT") or os.getcwd())
    STATE.out = os.environ.get("COMPILE_LENS_RECORD_OUT") or store.default_path(STATE.root)
    STATE.command = os.environ.get("COMPILE_LENS_RECORD_COMMAND", "")
    STATE.run_id = os.environ.get("COMPILE_LENS_RECORD_RUN", "")
    STATE.pid = os.getpid()
    if "torch" in sys.modules and hasattr(sys.modules["torch"], "nn"):
        patch_torch(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _Watcher())
    if "torch._dynamo.eval_frame" in sys.modules:
        skip_in_dynamo(sys.modules["torch._dynamo.eval_frame"])
    atexit.register(_write)


class _Watcher:
    """A meta-path finder that only notices two imports: torch, and Dynamo's eval_frame."""

    def __init__(self) -> None:
        self.after = {"torch": patch_torch, "torch._dynamo.eval_frame": skip_in_dynamo}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.after:
            return None
        after = self.after.pop(name)
        if not self.after:
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
                STATE.problems.append(f"patching {name}: {type(exc).__name__}: {exc}")

        loader.exec_module = exec_module  # this module's own loader object only
        return spec


def patch_torch(torch: Any) -> None:
    """torch was imported: patch it (once), then whatever another hook added (`STATE.on_torch`)."""
    if not getattr(torch, "_compile_lens_recording", False):
        _patch_torch(torch)
    for extra in list(STATE.on_torch):
        extra(torch)


def _patch_torch(torch: Any) -> None:
    torch._compile_lens_recording = True
    STATE.tensor = torch.Tensor
    compiler = getattr(torch, "compiler", None)
    STATE.compiling = getattr(compiler, "is_compiling", None) or hook_state.not_compiling
    module = torch.nn.Module
    previous = module.__dict__.get("__init_subclass__")

    def __init_subclass__(cls: type, **kwargs: Any) -> None:
        if previous is not None:
            previous.__get__(None, cls)(**kwargs)
        else:
            super(module, cls).__init_subclass__(**kwargs)
        try:
            wrap.adopt(cls)
            if cls in STATE.by_class:
                for extra in STATE.on_workspace_class:
                    extra(cls)
        except Exception as exc:  # noqa: BLE001
            STATE.problems.append(f"{cls.__qualname__}: {type(exc).__name__}: {exc}")

    module.__init_subclass__ = classmethod(__init_subclass__)
    if hasattr(torch, "compile"):
        torch.compile = wrap.patched_compile(torch.compile)


def skip_in_dynamo(eval_frame: Any) -> None:
    """Dynamo must never compile a frame of the recorder (it still compiles what they call), nor of
    another hook's (`STATE.on_dynamo`)."""
    STATE.set_eval_frame = getattr(eval_frame, "set_eval_frame", None)
    STATE.dynamo = True
    skip = getattr(eval_frame, "skip_code", None)
    if skip is not None:
        for code in own_code([*OWN_MODULES, sys.modules[__name__]]):
            skip(code)
    for extra in list(STATE.on_dynamo):
        extra(eval_frame)


def own_code(modules: Any) -> list:
    """Every code object of `modules`' functions and classes' methods, nested ones included."""
    codes: list = []
    pending: list = []
    for module in modules:
        for value in list(vars(module).values()):
            if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
                pending.append(value.__code__)
            elif isinstance(value, type) and value.__module__ == module.__name__:
                pending += [v.__code__ for v in vars(value).values() if isinstance(v, types.FunctionType)]
    seen: set = set()
    while pending:
        code = pending.pop()
        if code in seen:
            continue
        seen.add(code)
        codes.append(code)
        pending += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return codes


def _write() -> None:
    if os.getpid() != STATE.pid:
        return
    try:
        compiled = [e for e in STATE.entries if e.compile is not None]
        if compiled:  # the settings as the run ends (a program may set one after its torch.compile call)
            settings = compile_calls.settings_now()
            for entry in compiled:
                entry.compile["settings"] = settings
    except Exception as exc:  # noqa: BLE001
        STATE.problems.append(f"settings: {type(exc).__name__}: {exc}")
    try:
        targets = {e.key: e.as_json() for e in STATE.entries if e.init is not None or e.call is not None}
        if targets:
            store.merge_write(STATE.out, targets)
    except Exception as exc:  # noqa: BLE001 - the program's exit status must stay its own
        STATE.problems.append(f"writing {STATE.out}: {type(exc).__name__}: {exc}")
    if STATE.problems:
        store.log(STATE.out, STATE.problems)
