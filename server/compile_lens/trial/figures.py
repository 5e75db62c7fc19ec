"""A trial's figures as typed records: what `summary` makes, `session` completes, `store` saves in
trial.json and `render/` words, read by attribute. Pure: no torch.

The JSON of a record is `dataclasses.asdict` of it (`to_dict`), so `--json` and trial.json keep the
keys below; `TrialRecord.from_dict` rebuilds it (`protocol.from_dict`). Still plain dicts, their
shapes written where they are made: per-shape findings (`shapes.findings`) and a break's
`inside`/`loop` (`library_breaks`, `events`). Per-shape rows are `ShapeRow`; rank partings
`ranks.RankParting`, shared with `compile-lens import`; the bill `cost.Bill`.

SCHEMA numbers trial.json's layout: 2 since the figures are these records (1: the untyped dict of
earlier versions, which `store.load` names as made by an older compile-lens, to be run again).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

from ..cost import Bill
from ..protocol import BusyProcess, from_dict
from ..ranks import RankParting

SCHEMA = 2


@dataclass
class Quartiles:
    median: float
    q1: float
    q3: float
    min: float
    max: float
    n: int


@dataclass
class Steady:
    """A run's steady state (every step that is no warm-up and was not profiled), in seconds."""

    wall_s: Quartiles  # from the end of the previous step: data loading included
    hook_s: Optional[Quartiles] = None  # from the step's first model call: forward, backward, optimizer step


@dataclass
class Failure:
    """How a run ended when it did not end well: "exception", "nan-loss", "exit", "hang", "no-record", "not-run"."""

    kind: str
    message: str
    step: Optional[int] = None
    where: Optional[str] = None  # "train.py:12"
    at: Optional[float] = None  # time.time() of the failure (under torchrun the first rank's is the cause)
    rank: Optional[int] = None  # under torchrun: the rank that failed first
    ranks: Optional[list[int]] = None  # a hang: the ranks stuck


@dataclass
class Step:
    index: int
    wall_s: Optional[float] = None
    hook_s: Optional[float] = None
    loss: Optional[float] = None
    shapes: Optional[list] = None  # the input shapes of the step's first model call
    compiles: int = 0  # frame compiles that happened in it
    profiled: Optional[bool] = None  # profiled for its allocations (CPU peak memory): no steady time


@dataclass
class RunFigures:
    """One run (eager, compiled, eager again): its steps split into warm-up and steady state, its memory,
    how it ended, and what the trial compiled in it."""

    ran: bool
    exit_code: Optional[int] = None
    steps: list[Step] = field(default_factory=list)
    warmup_steps: list[int] = field(default_factory=list)
    steady: Optional[Steady] = None
    failure: Optional[Failure] = None
    stopped_by_trial: bool = False
    device: Optional[str] = None  # "cuda" | "cpu"
    torch: Optional[str] = None
    warmup_wall_s: float = 0.0
    untimed_steps: list[int] = field(default_factory=list)  # ended before any model call was seen
    peak_memory_bytes: Optional[int] = None
    memory_method: Optional[str] = None
    memory_note: Optional[str] = None  # why there is no peak memory
    outermost_modules: list[str] = field(default_factory=list)
    outermost_targets: list[str] = field(default_factory=list)  # "train.py:Net", as recorded.json names them
    outermost_found_late: bool = False  # a library's model, found at the end of step 0
    compiled_by_program: bool = False
    other_cpu_percent: Optional[float] = None  # other processes' CPU during the run (ours beyond the program's too)
    busy_top: list[BusyProcess] = field(default_factory=list)  # the busiest meanwhile
    dropout_in: list[str] = field(default_factory=list)


@dataclass
class RunBreak:
    """A distinct graph break the compiled run hit (`summary.graph_breaks`)."""

    where: Optional[str]  # "train.py:24": the program's line (for a break inside a library, the line that called it)
    reason: Optional[str]
    gb: Optional[str] = None  # torch's graph-break id, "GB0124"
    explanation: Optional[str] = None
    inside: Optional[dict[str, Any]] = None  # torch reported it inside a library: {function, where, shown, reported, …}
    loop: Optional[dict[str, Any]] = None  # inside a loop: {where, skipped}: the whole frame runs eagerly
    step: Optional[int] = None
    shapes: Optional[list] = None  # the step's input shapes


@dataclass
class RunRecompile:
    """A recompile of the compiled run (`summary.recompiles`), in the user's terms once `guard_words.say` read it."""

    function: str
    where: Optional[str]
    reason: Optional[str]  # the guard that failed, as torch says it
    step: Optional[int] = None
    shapes: Optional[list] = None
    meaning: Optional[str] = None  # the guard in the user's terms, when it has some
    resumed_at_line: Optional[int] = None  # a resumed frame's function: the line it resumed at


@dataclass
class Speedup:
    """Eager steady median over compiled steady median, and whether the two can be told apart."""

    ratio: float
    verdict: str  # "faster" | "slower" | "inconclusive"
    why: Optional[str]
    eager_median_s: float
    compiled_median_s: float


@dataclass
class Speedups:
    wall: Optional[Speedup] = None  # per step, wall time
    hook: Optional[Speedup] = None  # per step, model + backward + optimizer step


@dataclass
class Payback:
    """The step from which compiled is ahead in cumulative wall time, measured or projected."""

    step: Optional[int]
    measured: bool
    text: str
    steps_compared: Optional[int] = None
    eager_cumulative_s: Optional[float] = None
    compiled_cumulative_s: Optional[float] = None


@dataclass
class LossFigures:
    """Per-step losses side by side (`steps`: {index, eager, compiled}) and whether they agree."""

    rtol: float
    atol: float
    verdict: str  # "match" | "diverge" | "random" | "not-deterministic" | "no-loss"
    text: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    first_divergent_step: Optional[int] = None
    max_abs_diff: Optional[float] = None
    deterministic: Optional[bool] = None  # with --repeat-eager: two eager runs gave the same losses


@dataclass
class CompileTime:
    """Compile seconds as Dynamo counted them: whole frames (forward), Inductor/AOT for backward graphs."""

    total_s: float
    forward_frames_s: float
    backward_s: float
    compiles: int  # frame compiles
    steps: list[int]  # the steps they happened in


@dataclass
class CompileSettings:
    """The settings behind the compiled run's compiles (`hook_settings`): each `torch.compile` call, and the
    settings off torch's defaults with the compiles they were in force for."""

    calls: list[dict[str, Any]] = field(default_factory=list)  # {what, where, fullgraph, dynamic, backend, mode, options}
    settings: list[dict[str, Any]] = field(default_factory=list)  # {compile_ids, values}
    explains: list[str] = field(default_factory=list)  # the settings that explain a finding, in words


@dataclass
class Machine:
    cpus: Optional[int] = None
    load_before: Optional[float] = None  # 1-minute load average
    load_after: Optional[float] = None


@dataclass
class Recorded:
    """The eager run's record merged into recorded.json (the editor traces its targets with those inputs)."""

    path: str
    targets: list[str]


@dataclass
class ServedRun:
    """A fresh process meant to be served its compiles (from the artifact, or the remote cache), up to the
    compiled run's last step that compiled."""

    note: Optional[str] = None  # why it was not run, or what it shows
    steps: Optional[int] = None
    exit_code: Optional[int] = None
    compile_time: Optional[CompileTime] = None
    miss_reasons: list[str] = field(default_factory=list)  # what differed in the FX-graph cache keys it missed


@dataclass
class ArtifactRun(ServedRun):
    """`--cache-artifact`: warmed by the artifact the compiled run saved."""

    path: Optional[str] = None  # None: not measured (`note` says why)
    bytes: Optional[int] = None
    loaded: bool = False


@dataclass
class RemoteRun(ServedRun):
    """`--remote-cache`: an empty local cache, served by the team's Redis only."""

    url: str = ""
    remote: Optional[dict[str, Any]] = None  # per cache: hits, misses (`remote_cache.remote_counts`)
    served: bool = False


@dataclass
class RankFigures:
    """One torchrun rank's figures, eager vs compiled (`trial.ranks.per_rank`)."""

    rank: int
    eager: RunFigures
    compiled: RunFigures
    speedup: Optional[Speedup] = None
    graph_breaks: list[RunBreak] = field(default_factory=list)
    recompiles: list[RunRecompile] = field(default_factory=list)
    ddp_splits: list[dict[str, Any]] = field(default_factory=list)
    compile_time: Optional[CompileTime] = None
    frames_compiled: list[dict[str, Any]] = field(default_factory=list)
    killed: dict[str, Any] = field(default_factory=dict)  # run name -> {signal, step} or None
    finished: dict[str, Any] = field(default_factory=dict)


@dataclass
class ShapeRow:
    """The trial at one input-shape signature (`shapes.by_shape`): its steps, compiles and steady times."""

    shapes: Any  # the inputs' shapes, as the hook saw them ([[8, 16]])
    signature: str  # "[8, 16]"
    step_count: int
    steps: list[int]
    compiles: int
    recompiles: int
    compile_s: float
    eager_median_s: Optional[float] = None
    compiled_median_s: Optional[float] = None
    eager_steady: Optional[Quartiles] = None
    compiled_steady: Optional[Quartiles] = None
    speedup: Optional[float] = None
    verdict: Optional[str] = None
    note: Optional[str] = None  # why there is no steady time
    cudagraph_records: Optional[int] = None  # None: no CUDA-graph recording at this shape
    cudagraph_rerecords: Optional[int] = None


@dataclass
class TrialFigures:
    """Everything a trial measured: `summary.summarize` fills the runs' figures, `session` the rest."""

    eager: RunFigures
    compiled: RunFigures
    loss: LossFigures
    command: str = ""
    speedup: Optional[Speedups] = None  # None: the compiled run failed
    payback: Optional[Payback] = None
    graph_breaks: list[RunBreak] = field(default_factory=list)
    recompiles: list[RunRecompile] = field(default_factory=list)
    compile_time: Optional[CompileTime] = None
    compile_settings: Optional[CompileSettings] = None
    by_shape: list[ShapeRow] = field(default_factory=list)
    shape_findings: list[dict[str, Any]] = field(default_factory=list)
    recorded: Optional[Recorded] = None
    artifact: Optional[ArtifactRun] = None
    remote_cache: Optional[RemoteRun] = None
    ranks: list[RankFigures] = field(default_factory=list)
    rank_divergence: list[RankParting] = field(default_factory=list)
    cold: bool = False
    machine: Optional[Machine] = None
    cost: Optional[Bill] = None  # the bill the trial printed (`summary.bill`)

    @property
    def wall(self) -> Optional[Speedup]:
        """The steady-state speedup per step in wall time, None when there is none."""
        return self.speedup.wall if self.speedup else None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialFigures:
        return from_dict(cls, data)


@dataclass
class TrialRecord:
    """trial.json: one trial, as `store` writes it and the report and the hover card read it."""

    figures: TrialFigures
    schema: int = SCHEMA
    at: str = ""  # when the trial ended, "2026-01-01T00:00:00Z"
    command: str = ""
    targets: list[str] = field(default_factory=list)  # the modules it compiled, named as in recorded.json

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialRecord:
        return from_dict(cls, data)
