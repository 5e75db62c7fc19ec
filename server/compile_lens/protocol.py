"""Plain, JSON-safe records shared by the server, the CLI and the torch worker.

Defined once here so both sides of the worker pipe agree on the shapes. No torch, no pygls.
Lines and columns are 1-based everywhere in these records (as in the CLI's JSON); the LSP
renderer converts to 0-based.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Optional

from .measured import (  # noqa: F401 - re-exported: the measurement's records, named from here
    AccuracyDrift,
    BatchSweep,
    Benchmark,
    BusyProcess,
    CompileFrame,
    CompileLine,
    CompileSeconds,
    CompileTime,
    ContentionReport,
    Errors,
    ExportCheck,
    FallbackOp,
    KernelShare,
    Lever,
    LineCost,
    LineRef,
    PeakMemory,
    Precision,
    Report,
    SweepPoint,
    Timing,
)

SCHEMA = 1


# `check --profile-dir DIR`: the workers keep the profiles of the measured calls there (`lines.windows`)
PROFILE_DIR_ENV = "COMPILE_LENS_PROFILE_DIR"

@dataclass
class InputRecipe:
    """How to build a target and call it: Python expressions evaluated in the module's namespace."""

    source: str  # "directive" | "config" | "recorded" | "inferred"
    text: str  # a tuple of positional args, e.g. "(torch.randn(8, 16),)"
    init: Optional[str] = None  # how to build a module, e.g. "Net(hidden=64)"; None: Name()
    variants: list[str] = field(default_factory=list)  # more argument tuples (recompile sweep)
    line: Optional[int] = None  # where the directive is, when it is one
    # shape sequence of a recorded run (recompile sweep)
    recorded_shapes: list = field(default_factory=list)  # open: the record's own entries (`record/store.py`), read by the sweep alone
    # a guess the worker makes after import, from what a library publishes (GPT2Config, timm's
    # pretrained_cfg, a first convolution): `text` is empty until then; `note` says what to do
    # when no library tells either (the message discovery would have shown)
    after_import: bool = False
    note: str = ""
    origin: str = ""  # where a guess came from, for the user: "from GPT2Config", "from its first layer"


RECORD_HINT = "compile-lens record -- python train.py"  # a run of whatever script uses the target


def where_from(recipe: InputRecipe) -> str:
    """Where a recipe came from, for messages about inputs that failed to build or to run."""
    if recipe.source == "directive":
        return f"the compile-lens directive on line {recipe.line}" if recipe.line else "the compile-lens directive"
    if recipe.source == "config":
        return "its [[tool.compile-lens.targets]] entry in pyproject.toml"
    if recipe.source == "recorded":
        return "the recorded run in .compile-lens/recorded.json"
    return f"Compile Lens's guess {recipe.origin or 'from its first layer'}"


def fix_hint(recipe: InputRecipe, name: str) -> str:
    """What to do when `recipe` does not fit the target: fix it where it came from, or override it."""
    if recipe.source == "directive":
        return "fix the `inputs=` (or `init=`) expression of the directive"
    if recipe.source == "config":
        return "fix `inputs` (or `init`) in its [[tool.compile-lens.targets]] entry in pyproject.toml"
    if recipe.source == "recorded":
        return (f"record again (`{RECORD_HINT}`) if `{name}` changed since, or give inputs with a "
                "`# compile-lens: inputs=(...)` directive, which wins over the record")
    return ("these inputs are a guess: write the right ones as `# compile-lens: inputs=(...)` above it "
            f"(or a pyproject.toml entry, or `{RECORD_HINT}`)")


@dataclass
class TargetSpec:
    """Something callable found in a file, and (when known) how to call it."""

    name: str  # "Net", or "Outer.method" for methods
    kind: str  # "module" | "function" | "call"
    line: int  # the class/def line
    end_line: int = 0  # last line of its body: lints inside it are covered by its trace
    column: int = 1  # the name's columns on that line, for hovers
    end_column: int = 1
    inputs: Optional[InputRecipe] = None
    problem: Optional[str] = None  # why it cannot be run as is (shown on `line`)
    # literal kwargs of @torch.compile(...)
    compile_options: dict[str, Any] = field(default_factory=dict)  # open: whatever torch.compile accepts, passed on as is
    fingerprint: str = ""  # hash of what matters (AST, not comments): cache key part
    # a class whose base the source alone cannot place (`GradientCheckpointingLayer`, a class
    # imported from another file): the worker checks `issubclass(obj, nn.Module)` and drops it if not
    maybe_module: bool = False
    # what the measurement runs in (`discovery/precision.py`): "fp32" | "tf32" | "bf16-autocast" |
    # "fp16-autocast", and where that came from: "directive" | "setting" | "pyproject" | "recorded";
    # "" for both: torch's defaults
    precision: str = ""
    precision_source: str = ""


@dataclass
class Frame:
    path: str
    line: int
    name: str
    note: Optional[str] = None  # what a related location is, when it is not a call on the chain


@dataclass
class SkippedLoop:
    """GB7000: a break inside a for/while loop makes torch skip the whole frame, which then runs
    eagerly. The loop's header (in the skipped frame) and that frame's name."""
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    function: str  # the frame torch skips
    gb_id: Optional[str]  # "GB7000"; None on a torch whose registry does not know it yet
    url: Optional[str]


@dataclass
class GraphNode:
    """One node of a graph Dynamo captured: `name = target(args)` and the source line it came from."""

    text: str  # "linear = torch._C._nn.linear(l_x_, …)", "l_x_ = input", "return (sum_1, y)"
    path: Optional[str] = None  # the innermost workspace frame of the node's stack trace (None: none, e.g. the output)
    line: Optional[int] = None


@dataclass
class CapturedGraph:
    """One FX graph TorchDynamo captured for a target (`torch._dynamo.explain`'s graphs, in order): what
    torch.compile hands to Inductor; a graph break ends one and the code after it starts the next."""

    function: str  # the frame it was captured from: "forward", "torch_dynamo_resume_in_forward_at_8"
    nodes: list[GraphNode] = field(default_factory=list)
    left_out: int = 0  # nodes past the cap (`worker/breaks/captured.MAX_NODES`), not kept


@dataclass
class GraphBreak:
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    gb_id: Optional[str]  # "GB0124", from torch's registry
    gb_type: str  # short kind, e.g. "Unsupported Tensor.item() call ..."
    explanation: str
    hints: list[str]
    url: Optional[str]
    reason: str  # torch's own text, untouched
    stack: list[Frame] = field(default_factory=list)  # outermost -> innermost (user frames)
    # a break inside a loop: the loop whose frame torch then skips (GB7000); the break stays here
    loop: Optional[SkippedLoop] = None
    compile_id: Optional[str] = None  # torch's id of the compile that broke here first ("1/0"), when logged


@dataclass
class Recompile:
    line: int
    variation: str  # "variant 1", "batch 17", "eval mode", ...
    kind: str  # "automatic-dynamic" | "specialization" | "limit"
    reason: str  # torch's guard-failure text
    changed: str  # which input changed, e.g. "x" or "steps"
    compile_s: Optional[float] = None
    path: Optional[str] = None  # file of the guard's line when torch names one
    frame: Optional[Frame] = None  # the compiled frame (code object: file, first line, name) that recompiled
    compile_id: Optional[str] = None  # torch's id of the compile this caused ("0/1": frame 0, its 2nd compile)
    meaning: Optional[str] = None  # the guard in the user's terms (`guard_words.meaning`), when it can be said

@dataclass
class Problem:
    """Why something could not be analysed, said once, where the user can act on it."""

    kind: str  # "build" | "inputs" | "guess" | "import" | "crash" | "timeout" | "memory" | "exit" | "call" | "no-torch" | "internal"
    message: str  # short, no traceback
    path: Optional[str] = None
    line: Optional[int] = None  # the user line it came from, when known
    hint: Optional[str] = None  # what to do about it
    # "internal" (a bug of Compile Lens's own, `worker/tool_errors`): the bug report with its
    # traceback, for the log; never shown on the user's line
    details: Optional[str] = None


PHASES = ("trace", "sweep", "measure")  # in the order a job runs them
LEVERS = "levers"  # the phase after the measurement, run only when asked (`check --levers`, "Try levers")


@dataclass
class Phase:
    """What one phase of a target's analysis came to. Each phase is its own result: a measurement
    that times out never takes the trace's findings with it."""

    name: str  # "trace" | "sweep" | "measure"
    status: str  # "done" | "failed" | "not-run"
    error: Optional[Problem] = None  # failed: why; not-run: why not (kind "skipped")


# A measurement's parts, in the order they run and are sent ("target" events with `part` set):
# what the user waits for first (the forward's speedup and compile), then the rest.
PARTS = ("forward", "train_step", "memory", "lines", "export", "fallback_ops", "batch_sweep")
# The parts a user may ask for whatever the budget (`AnalyzeJob.opt_in`; `check --with`, the setting
# `benchmark.optIn`): those the budget may skip or stop, strict export (a second, strict trace) on its
# own, and the warm-remote compile (with a remote cache). Only the forward's headline is never cut
# (`worker/measure/run/budget.py`); the forward's warm compile and accuracy check run with any of the first three
# and the fallback ops (read from its output code).
OPT_IN = ("train_step", "memory", "lines", "export", "strict_export", "fallback_ops", "batch_sweep", "warm_remote")


@dataclass
class PartStatus:
    """Where one part of a target's measurement stands (`TargetResult.parts`), so a renderer can tell
    "not measured yet" from "not run" from "not measurable". `why` is the user's words, e.g.
    "15 s budget" or "TimeoutError: …"; a missing key in `parts` means the part was never planned."""

    status: str  # "pending" (not measured yet: still to come) | "done" | "not-run" (budget, opt-out) | "failed" (not measurable)
    why: Optional[str] = None  # not-run / failed: why, without the "not run:" prefix
    seconds: Optional[float] = None  # done / failed: what the part took


@dataclass
class TargetResult:
    name: str
    kind: str
    line: int
    inputs: Optional[InputRecipe] = None
    status: str = "ok"  # "ok" | "error" (could not be built or called at all) | "skipped" (not an nn.Module after all: nothing to show)
    error: Optional[Problem] = None
    graph_count: Optional[int] = None
    captured_graphs: list[CapturedGraph] = field(default_factory=list)  # the trace's FX graphs (`compile-lens show --graph`)
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    recompiles: list[Recompile] = field(default_factory=list)
    benchmark: Optional[Benchmark] = None
    # deployment questions (measured with the benchmark): does it export, which ops run eagerly
    export: Optional[ExportCheck] = None
    fallback_ops: list[FallbackOp] = field(default_factory=list)
    report: Optional[Report] = None  # the compile report's figures; None until measured
    # optional parameters of `forward` (or the function) the example call leaves out, e.g. ["labels"]:
    # the traced path may differ from the one training takes
    left_out: list[str] = field(default_factory=list)
    # the optional parts measured after the benchmark that failed, and why ("torch.export",
    # "fallback ops", "batch sweep", …: `worker/measure/run/isolated`); the benchmark stands
    unmeasured: dict[str, str] = field(default_factory=dict)
    # bug reports (traceback included) of optional parts that failed in Compile Lens's own code
    # (`worker/tool_errors`): for the log only (the server's output channel, the CLI's stderr)
    bug_reports: list[str] = field(default_factory=list)
    phases: list[Phase] = field(default_factory=list)  # one per phase run (or settled) so far
    # the `levers` phase (`worker/levers`): each lever that applies, measured against the default
    levers: list[Lever] = field(default_factory=list)
    # the measurement's parts (`PARTS`) and where each stands; {} before the measure phase starts
    parts: dict[str, PartStatus] = field(default_factory=dict)
    # wall seconds of each deployment part ("export", "fallback_ops", "batch_sweep"), beside
    # `benchmark.stages_s` (the measurement's own stages)
    parts_s: dict[str, float] = field(default_factory=dict)


def phase_of(result: TargetResult, name: str) -> Optional[Phase]:
    return next((p for p in result.phases if p.name == name), None)


def with_phase(result: TargetResult, name: str, status: str, error: Optional[Problem] = None) -> TargetResult:
    """A copy of `result` with phase `name` set (the other phases and every field kept)."""
    phases = [p for p in result.phases if p.name != name] + [Phase(name, status, error)]
    phases.sort(key=lambda p: (*PHASES, LEVERS).index(p.name) if p.name in (*PHASES, LEVERS) else len(PHASES) + 1)
    return dataclasses.replace(result, phases=phases)


@dataclass
class Finding:
    """One thing to show the user: the common input of every renderer (LSP, text, JSON, SARIF)."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    severity: str  # "error" | "warning" | "information" | "hint"
    code: str  # "GB0124", "CL101", "CL201", ...
    message: str
    url: Optional[str] = None
    related: list[Frame] = field(default_factory=list)  # call chain for breaks inside helpers
    # what a code action needs
    data: dict[str, Any] = field(default_factory=dict)  # open: each code's own, written and read by its lint and action
    predicted: bool = False  # static lint: not confirmed by a trace


@dataclass
class FileReport:
    """Everything found in one file: the CLI's unit of output."""

    path: str
    targets: list[TargetResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    error: Optional[Problem] = None  # the file could not be analysed at all


# --- worker pipe messages -------------------------------------------------------------------

@dataclass
class Known:
    """What the levers phase reads of a target's earlier phases when they came from the cache or the
    editor (`AnalyzeJob.known`, `jobs/levers.known_of`): the figures' guard share, the sweep's recompiles."""

    benchmark: Optional[Benchmark] = None
    recompiles: list[Recompile] = field(default_factory=list)


@dataclass
class AnalyzeJob:
    id: int
    path: str
    root: str  # workspace root: put on sys.path; user modules under it are reloaded per job
    targets: list[TargetSpec]
    trace: bool = True
    recompiles: bool = True
    benchmark: bool = False
    device: str = "cpu"
    mode: str = "default"
    max_seconds: float = 60.0
    remote_cache: Optional[str] = None  # redis://HOST:PORT: also measure the warm-remote compile
    # phases already settled per target (a job re-sent after a worker died): not run again
    skip: dict[str, list[str]] = field(default_factory=dict)
    trace_dir: Optional[str] = None  # write torch's structured trace (TORCH_TRACE) here, for tlparse
    # after this long with no progress and no compile event the worker says where it is (a `stall`
    # event: `worker.stall_watch`); 0: never
    stall_s: float = 0.0
    stamps: bool = False  # send the trace's timeline marks with each target (`compile_lens.timeline`)
    levers: bool = False  # run the levers phase after the measurement
    known: dict[str, Known] = field(default_factory=dict)  # by target: earlier phases the levers phase reads
    # parts of the measurement (`OPT_IN`: "strict_export", "batch_sweep", …) run whatever the budget
    # (`max_seconds`) says; the others run only where they fit
    opt_in: list[str] = field(default_factory=list)


@dataclass
class WorkerEvent:
    """One line from the worker: progress, a finished target, or the end of a job."""

    id: int
    event: str  # "hello" | "progress" | "stall" (quiet: where it is, not progress) | "target" | "done"
    stage: Optional[str] = None  # progress: "importing" | "tracing" | "sweeping" | "benchmarking"
    target: Optional[str] = None
    phase: Optional[str] = None  # progress: the phase (`PHASES`) the worker is in for `target`
    result: Optional[TargetResult] = None
    error: Optional[Problem] = None  # done: the file-level problem (import failed, ...)
    # hello: torch version, device names; a target: its timeline's marks ("stamps", `compile_lens.timeline`)
    info: dict[str, Any] = field(default_factory=dict)  # open: each event's own facts, for the log and the timeline
    # "target": the part of the measurement (`PARTS`) whose figures this event adds; None for a
    # phase's own event (trace, sweep, the measure phase's end, levers)
    part: Optional[str] = None


# --- (de)serialisation ----------------------------------------------------------------------

def to_json(obj: Any) -> str:
    return json.dumps(dataclasses.asdict(obj), separators=(",", ":"))


T = typing.TypeVar("T")
# fields read under an older name too (a result cache, a recorded or saved JSON written before the
# rename), until 0.2.0: old name -> new
RENAMED = {"phases_s": "stages_s"}


def from_dict(cls: type[T], data: Any) -> T:
    """Rebuild a dataclass (recursively) from what `dataclasses.asdict` made of it."""
    return _convert(cls, data)


def _convert(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        value = {**{RENAMED[k]: v for k, v in value.items() if k in RENAMED}, **value}  # the new name wins
        return tp(**{k: _convert(hints[k], v) for k, v in value.items() if k in names})
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, getattr(types, "UnionType", typing.Union)):
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value) if len(inner) == 1 else value
    if origin is list:
        return [_convert(args[0], v) for v in value]
    if origin is dict and len(args) == 2 and dataclasses.is_dataclass(args[1]):  # `TargetResult.parts`
        return {k: _convert(args[1], v) for k, v in value.items()}
    return value
