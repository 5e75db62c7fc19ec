"""The settings behind the compiled run's compiles, inside the user's program: each `torch.compile`
call made (where, by whom, with its mode / options / dynamic / fullgraph / backend), and the settings
off torch's defaults when compiles happen, as torch's own `codegen_config()` lists them (the lines
Inductor writes atop a trace's `fx_graph_runnable`, read by the same `torch_text.compile_settings`).
Stdlib only at import."""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

from ..record.workspace import relative
from ..torch_text import compile_settings
from .hook_state import STATE

CALL_KEYS = ("fullgraph", "dynamic", "backend", "mode", "options")  # torch.compile's, in its positional order
CONFIGS = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config", "torch.fx.experimental._config")
ENV_WORDS = ("TORCH", "DYNAMO", "INDUCTOR", "TRITON")  # the variables torch's runnable lists


def _words(value: Any) -> Any:
    """A call argument as JSON holds it: a backend function by its name, options as a dict of plain values."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _words(v) for k, v in value.items()}
    return getattr(value, "__name__", None) or type(value).__name__


def _program_line() -> Optional[str]:
    """The workspace line that made the call (the hook's and torch's frames skipped)."""
    frame: Any = sys._getframe(2)
    while frame is not None:
        rel = relative(frame.f_code.co_filename)
        if rel:
            return f"{rel}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def note_call(what: str, args: tuple, kwargs: dict, where: Optional[str] = None) -> None:
    """A `torch.compile` call: `what` says whose ("torch.compile", "Module.compile", "trial")."""
    try:
        given = dict(zip(CALL_KEYS, args))
        given.update({k: v for k, v in kwargs.items() if k in CALL_KEYS})
        call = {"what": what, "where": where or _program_line(), **{k: _words(v) for k, v in given.items()}}
        if call not in STATE.calls:
            STATE.calls.append(call)
    except Exception as exc:  # noqa: BLE001 - never change what the program does
        STATE.problems.append(f"torch.compile call: {type(exc).__name__}: {exc}")


def snapshot(compile_ids: list) -> None:
    """The settings off torch's defaults now, kept with the compiles that just happened (a set seen before
    gains their ids): a program may change a setting between two compiles."""
    try:
        lines = [sys.modules[name].codegen_config() for name in CONFIGS if name in sys.modules]
        lines += [f"os.environ['{k}'] = '{v}'" for k, v in os.environ.items() if any(w in k for w in ENV_WORDS)
                  and not k.startswith("COMPILE_LENS")]
        values = compile_settings.non_default(compile_settings.read_codegen("\n".join(lines)))
    except Exception as exc:  # noqa: BLE001
        STATE.problems.append(f"settings: {type(exc).__name__}: {exc}")
        return
    compile_ids = list(dict.fromkeys(compile_ids))  # a forward and its backward share an id
    for seen in STATE.settings:
        if seen["values"] == values:
            seen["compile_ids"] += [c for c in compile_ids if c not in seen["compile_ids"]]
            return
    STATE.settings.append({"compile_ids": list(compile_ids), "values": values})
