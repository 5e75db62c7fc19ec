"""A `torch.compile` call and the settings in force, inside the user's program (the recorder's and the
trial's hooks share it): where the call was made, with its fullgraph / dynamic / backend / mode /
options, and the settings off torch's defaults as torch's own `codegen_config()` lists them (the lines
Inductor writes atop a trace's `fx_graph_runnable`, read by the same `torch_text.compile_settings`).
Stdlib only at import."""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

from ..torch_text import compile_settings
from .workspace import relative

CALL_KEYS = ("fullgraph", "dynamic", "backend", "mode", "options")  # torch.compile's, in its positional order
DEFAULTS = {"fullgraph": False, "dynamic": None, "mode": None, "options": None}  # said by leaving them out
ENV_WORDS = ("TORCH", "DYNAMO", "INDUCTOR", "TRITON")  # the variables torch's runnable lists


def _words(value: Any) -> Any:
    """A call argument as JSON holds it: a backend function by its name, options as a dict of plain values."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _words(v) for k, v in value.items()}
    return getattr(value, "__name__", None) or type(value).__name__


def program_line() -> Optional[str]:
    """The workspace line that made the call now being made (the hooks' and torch's frames skipped)."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        rel = relative(frame.f_code.co_filename)
        if rel:
            return f"{rel}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def call(what: str, args: tuple, kwargs: dict, where: Optional[str] = None) -> dict:
    """`{what, where, backend, mode, …}`: `args` are torch.compile's after the model; `what` says whose
    ("torch.compile", "Module.compile", "trial"); an argument at torch.compile's default is left out (the
    decorator form passes them all)."""
    given = dict(zip(CALL_KEYS, args))
    given.update({k: v for k, v in kwargs.items() if k in CALL_KEYS})
    given = {k: v for k, v in given.items() if not (k in DEFAULTS and v is DEFAULTS[k])}
    return {"what": what, "where": where or program_line(), **{k: _words(v) for k, v in given.items()}}


def settings_now() -> dict[str, str]:
    """The settings off torch's defaults at this moment (Dynamo's, Inductor's, functorch's, FX's, and the
    TORCH*/INDUCTOR* variables), as a compile made now would have them before `mode`'s patches."""
    lines = [sys.modules[name].codegen_config() for name in compile_settings.MODULES if name in sys.modules]
    lines += [f"os.environ['{k}'] = '{v}'" for k, v in os.environ.items()
              if any(w in k for w in ENV_WORDS) and not k.startswith("COMPILE_LENS")]
    return compile_settings.non_default(compile_settings.read_codegen("\n".join(lines)))
