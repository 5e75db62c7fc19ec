"""The recorder's one state object inside the user's program (`STATE`), its records (`Entry`), and
`quietly` (our own code run with Dynamo's frame hook off). Stdlib only.

Another hook that runs beside the recorder (the trial's) adds its own work at the recorder's
patch points through `STATE.on_torch`, `STATE.on_workspace_class` and `STATE.on_dynamo`: each
is called after the recorder's own, in the order added.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional


def not_compiling() -> bool:
    return False


class RecorderState:
    """What the recorder knows of the run; one per process (`STATE`)."""

    def __init__(self) -> None:
        self.root = ""  # the workspace root (real path)
        self.out = ""  # recorded.json
        self.command = ""
        self.run_id = ""
        self.pid = -1  # the process that installed the recorder: the one that writes
        self.by_class: dict = {}  # workspace class -> Entry
        self.entries: list = []  # every Entry, in the order they were made
        self.problems: list = []
        self.workspace_files: dict = {}  # path -> relative path, or None when not in the workspace
        self.tensor: Any = None  # torch.Tensor, once torch is imported
        self.compiling: Callable[[], bool] = not_compiling  # torch.compiler.is_compiling
        self.set_eval_frame: Any = None  # Dynamo's frame hook switch, once Dynamo is imported
        self.dynamo = False  # Dynamo is imported: something may be compiling (until then, no need to ask)
        self.suppressed = 0  # > 0 while a compiled call already records (Module.compile): forward does not
        self.on_torch: list = []  # fn(torch): torch was imported and patched
        self.on_workspace_class: list = []  # fn(cls): a workspace nn.Module class was adopted
        self.on_dynamo: list = []  # fn(eval_frame): Dynamo was imported (mark code to skip)


STATE = RecorderState()


class Entry:
    """One recorded target: a workspace class or a compiled function."""

    __slots__ = ("key", "kind", "init", "call", "calls", "shapes", "more", "precision", "compile")

    def __init__(self, key: str, kind: str):
        self.key, self.kind = key, kind
        self.init: Optional[dict] = None
        self.call: Optional[dict] = None
        self.calls = 0
        self.shapes: dict = {}  # tuple of torch.Size (one per tensor argument) -> count
        self.more = 0
        self.precision: Optional[dict] = None  # autocast / TF32 at the first call (`describe.precision_state`)
        self.compile: Optional[dict] = None  # the program's torch.compile call of it, and the settings (`compile_calls`)

    def as_json(self) -> dict:
        return {
            "kind": self.kind,
            "init": self.init,
            "call": self.call,
            "calls": self.calls,
            "shapes": [{"shapes": [list(s) for s in key], "count": n} for key, n in self.shapes.items()],
            "more_shapes": self.more,
            "precision": self.precision,
            "compile": self.compile,
            "run": {"id": STATE.run_id, "command": STATE.command,
                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        }


def quietly(fn: Any, *args: Any) -> Any:
    """Run our own describing code (inspect, ...) with Dynamo's frame hook off: it must compile none of it."""
    switch = STATE.set_eval_frame
    if switch is None:
        return fn(*args)
    prior = switch(None)
    try:
        return fn(*args)
    finally:
        switch(prior)
