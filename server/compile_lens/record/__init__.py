"""`compile-lens record -- python train.py ...`: real inputs from a real run.

`hook` runs inside the user's program (stdlib only until torch is imported), its state one object
(`hook_state`), its wrappers `wrap`, their descriptions of a call `describe`, what is the user's
`workspace`; `store` is the file
format; `recorded` reads it back for the analysis; `launch` starts the user's program (record
and trial); the subcommand is `cli/record.py`. Importing this package imports nothing else, so
the recorder adds no start-up cost to the user's program.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Recorded", "load_recorded"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import recorded

        return getattr(recorded, name)
    raise AttributeError(name)
