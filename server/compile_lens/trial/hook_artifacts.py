"""The trial hook's cache artifacts and FX-graph cache keys, inside the user's program: the compiled
run saves torch's compile cache artifact at exit (`--cache-artifact`), the third run loads it at
start, and the runs meant to be served note each compile's FX-graph cache key so that a miss can be
explained. Stdlib only at import."""

from __future__ import annotations

import os
from typing import Any, Optional

from .hook_state import STATE


def record_fx_keys() -> None:
    """Why a run meant to be served (`--cache-artifact`, `--remote-cache`) missed: each compile's FX-graph
    cache key, to compare with the compiled run's. Only when the trial asks (COMPILE_LENS_TRIAL_FX_KEYS):
    while a handler listens, torch computes every structured-trace payload (compile time it counts as
    `structured_logging_overhead`)."""
    if not os.environ.get("COMPILE_LENS_TRIAL_FX_KEYS"):
        return
    try:
        from ..torch_text import cache_keys  # stdlib only

        STATE.fx_keys = cache_keys.record_all()
    except Exception as exc:  # noqa: BLE001 - never change what the program does
        STATE.problems.append(f"FX-graph cache keys: {type(exc).__name__}: {exc}")


def load_artifacts(torch: Any) -> None:
    """`--cache-artifact`'s third run: a fresh process warmed by the artifact the compiled run saved."""
    path = os.environ.get("COMPILE_LENS_TRIAL_LOAD_ARTIFACTS")
    if not path:
        return
    try:
        with open(path, "rb") as f:
            info = torch.compiler.load_cache_artifacts(f.read())
        STATE.artifact = {"loaded": path, "info": _artifact_info(info)}
    except Exception as exc:  # noqa: BLE001
        STATE.artifact = {"loaded": None, "error": f"{type(exc).__name__}: {exc}"}


def _artifact_info(info: Any) -> Optional[dict]:
    if info is None:
        return None
    out = {}
    for name in ("inductor_artifacts", "autotune_artifacts", "aot_autograd_artifacts", "pgo_artifacts",
                 "precompile_artifacts"):
        value = getattr(info, name, None)
        if value is not None:
            out[name] = len(value) if hasattr(value, "__len__") else str(value)
    return out


def save_artifacts(torch: Any) -> Optional[dict]:
    """At exit of the compiled run, with `--cache-artifact`: torch's compile cache artifact, saved."""
    path = os.environ.get("COMPILE_LENS_TRIAL_SAVE_ARTIFACTS")
    if not path:
        return None
    save = getattr(torch.compiler, "save_cache_artifacts", None)
    if save is None:
        return {"saved": None, "error": f"torch {torch.__version__} has no torch.compiler.save_cache_artifacts (2.7+)"}
    try:
        saved = save()
        if not saved or not saved[0]:
            return {"saved": None, "error": "torch saved no cache artifacts (nothing was compiled by Inductor?)"}
        with open(path, "wb") as f:
            f.write(saved[0])
        return {"saved": path, "bytes": len(saved[0]), "info": _artifact_info(saved[1])}
    except Exception as exc:  # noqa: BLE001
        return {"saved": None, "error": f"{type(exc).__name__}: {exc}"}
