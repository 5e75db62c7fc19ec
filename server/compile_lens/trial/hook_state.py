"""The trial hook's one state object inside the user's program (`STATE`): the step being timed, the
steps done, what torch logged and compiled, the modules the trial tracks, and (under torchrun)
the rank's log. Stdlib only."""

from __future__ import annotations

from typing import Any, Optional


def new_step() -> dict:
    """The step in progress: its first model call's time and input shapes, and its loss."""
    return {"start": None, "shapes": None, "loss": None, "loss_finite": True}


class TrialState:
    """Everything the trial hook knows of the run; one per process (`STATE`)."""

    def __init__(self) -> None:
        self.mode = ""  # "eager" | "compiled"
        self.steps_limit = 0
        self.seconds_limit = 0.0
        self.step_on = "optimizer"  # | "forward"
        self.options: dict = {}  # torch.compile's, for the modules the trial compiles
        self.out = ""  # where the record goes at exit
        self.pid = -1  # the process that installed the hook: the one that writes
        self.recorder: Any = None  # compile_lens.record.hook_state.STATE
        self.torch: Any = None
        self.compile_below: Any = None  # torch.compile under our patch (the record hook's)
        # id(outermost module) -> (weak reference, its compiled call or None: eager / the program's own). A plain
        # dict, read only in the hook's functions (Dynamo skips them): a WeakKeyDictionary's Python methods, called
        # from a module's call in the program's own compiled region (`torch.compile(DDP(model))`), were compiled
        # as frames of their own, two frames the program alone does not compile
        self.tracked: dict = {}
        self.tracked_names: list = []  # their classes, for the record (the modules are gone at exit)
        self.tracked_targets: list = []  # the same as recorded.json names them ("train.py:Net"), for the hover card
        self.with_dropout: set = set()  # tracked classes holding dropout layers with p > 0: compiled masks differ
        self.found_late = False  # the model was found at the end of step 0 (no workspace module was built)
        self.compiled_by_program = False  # a tracked module is the program's own `torch.compile(model)`
        self.init_depth = 0
        self.call_depth = 0
        self.steps: list = []
        self.cur: dict = new_step()  # the step in progress
        self.last_end: Optional[float] = None
        self.first_start: Optional[float] = None
        self.stopped = False
        self.failure: Optional[dict] = None
        self.events: list = []  # graph breaks and recompiles from torch's logs, with the step they happened in
        self.seen_metrics: set = set()
        self.compiles: list = []  # compilation metrics entries, with their step
        self.calls: list = []  # each distinct torch.compile call: where, whose, its arguments (`hook_settings`)
        self.settings: list = []  # the settings off torch's defaults: [{compile_ids, values}] (`hook_settings`)
        self.problems: list = []
        self.artifact: Optional[dict] = None  # the cache artifact loaded at start (third run)
        self.fx_keys: Optional[list] = None  # this run's FX-graph cache lookups, when the trial compares runs
        self.rank: Optional[int] = None  # under torchrun: this process's RANK
        self.log = ""  # under torchrun: the step log this rank appends to
        self.logged = [0, 0]  # events, compiles already in the step log
        self.killed: Optional[dict] = None  # the signal that ended the run, and the step it was in


STATE = TrialState()


def compiling() -> bool:
    """Dynamo is tracing right now (the hook's code then does nothing of its own)."""
    recorder = STATE.recorder
    return bool(recorder is not None and recorder.dynamo and recorder.compiling())


def on_cuda() -> bool:
    torch = STATE.torch
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())
