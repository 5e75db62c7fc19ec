"""The settings behind the compiled run's compiles, inside the user's program: each `torch.compile`
call made (where, by whom, with its arguments), and the settings off torch's defaults when compiles
happen, with the compile ids they held for (`record.compile_calls` reads both). Stdlib only at import."""

from __future__ import annotations

from typing import Optional

from ..record import compile_calls
from .hook_state import STATE


def note_call(what: str, args: tuple, kwargs: dict, where: Optional[str] = None) -> None:
    """A `torch.compile` call: `what` says whose ("torch.compile", "Module.compile", "trial")."""
    try:
        call = compile_calls.call(what, args, kwargs, where)
        if call not in STATE.calls:
            STATE.calls.append(call)
    except Exception as exc:  # noqa: BLE001 - never change what the program does
        STATE.problems.append(f"torch.compile call: {type(exc).__name__}: {exc}")


def snapshot(compile_ids: list) -> None:
    """The settings off torch's defaults now, kept with the compiles that just happened (a set seen before
    gains their ids): a program may change a setting between two compiles."""
    try:
        values = compile_calls.settings_now()
    except Exception as exc:  # noqa: BLE001
        STATE.problems.append(f"settings: {type(exc).__name__}: {exc}")
        return
    compile_ids = list(dict.fromkeys(compile_ids))  # a forward and its backward share an id
    for seen in STATE.settings:
        if seen["values"] == values:
            seen["compile_ids"] += [c for c in compile_ids if c not in seen["compile_ids"]]
            return
    STATE.settings.append({"compile_ids": compile_ids, "values": values})
