"""The measurement's records (`worker/measure`, `worker/levers`): eager vs compiled per workload with
its lines and kernels, the cold compile by frame, where accuracy drifts, the precision it ran in,
each lever tried, and the deployment answers measured with them (export, fallback ops, the batch
sweep). Plain, JSON-safe, no torch, no pygls; `protocol` re-exports them, so every
side names them from there."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional


@dataclass
class LineRef:
    path: str
    line: int


@dataclass
class KernelShare:
    """A kernel a line became (worker/measure/lines/costs.py)."""

    name: str  # "cpp_fused_mul_relu_0", "triton_poi_fused_add_0", "extern_kernels.addmm", "aten._fft_r2c"
    kind: str  # "generated" (fused by Inductor) | "extern" (a library kernel) | "fallback" (an aten op Inductor did not lower)
    us: Optional[float]  # the whole kernel's time per call (None: no profile, e.g. an imported trace)
    lines: int = 1  # the lines it was fused from: its time is split evenly among them
    backward: bool = False  # a train step's backward kernel: the gradient of the line(s) it is given to


@dataclass
class LineCost:
    """One source line's steady-state cost per call, eager and compiled (worker/measure/lines/costs.py)."""

    path: str
    line: int
    eager_us: Optional[float]  # the ops this line called, self time per call
    compiled_us: Optional[float]  # its share of the compiled kernels; None: the compiled column is not measured
    kernels: list[KernelShare] = field(default_factory=list)
    fused_with: list[LineRef] = field(default_factory=list)  # lines sharing a generated kernel with it
    fallback: bool = False  # one of its kernels is an aten op Inductor did not lower


@dataclass
class BusyProcess:
    """One of the busiest processes beside a timing (`busy/cpu`: psutil's reading), the JSON `contention.top`."""

    pid: int
    name: str
    cmdline: str
    cpu_percent: float
    ours: bool  # our own tree (Inductor's compile workers, the CLI or server that started us), not others'


@dataclass
class ContentionReport:
    """What else ran while we timed and the busy rule's verdict (`busy/contention.Contention.report`),
    the JSON `contention`. None: not read. `busy` None: a reading from before the rule (judged by
    today's, `busy.rule.busy_words`)."""

    cpus: int = 1
    threads: int = 1  # the threads the timed work ran on
    rule: str = "cpu"  # the device's rule that judged it: "cpu" | "cuda"
    busy: Optional[bool] = None
    why: list[str] = field(default_factory=list)  # the rule's words when busy (also under a declared quiet)
    other_cpu_percent: Optional[float] = None  # % of one CPU: processes outside our tree
    own_cpu_percent: Optional[float] = None  # our own tree less this process
    launch_wait_percent: Optional[float] = None  # our launching thread's run-queue wait, % of the span (schedstat)
    gpu_other_processes: Optional[int] = None
    load_average: Optional[float] = None  # read only on CUDA without schedstat
    declared_quiet: bool = False  # a test declared the machine quiet (`busy.contention.declared_quiet`): busy False
    busy_by_rule: bool = False  # under that declaration: what the rule would have said
    clock: Optional[str] = None  # "thread CPU": the rounds' clock under a test's declaration on the CPU
    top: list[BusyProcess] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # what could not be read, in words

    def json(self) -> dict[str, Any]:
        """The JSON `contention` as the CLI has always printed it: the fields read (unset ones left out),
        `busy` always, and on the CUDA rule `gpu_other_processes` (null: not read)."""
        kept = ("busy", "gpu_other_processes") if self.rule == "cuda" else ("busy",)
        return {k: v for k, v in asdict(self).items() if k in kept or not (v is None or v is False or v == [])}


@dataclass
class Timing:
    eager_ms: float
    compiled_ms: float
    speedup: float  # median of the paired rounds' eager/compiled ratios
    eager_iqr_ms: float
    compiled_iqr_ms: float
    # 95% bootstrap interval of `speedup` over the paired rounds; None: not measured that way
    speedup_ci: Optional[list[float]] = None
    # the direction is certain: the interval excludes 1.0, on a machine that stayed quiet (enough
    # quiet rounds); False: show "inconclusive". How precise the figure is: `ci_rel_width`.
    conclusive: bool = False
    rounds: int = 0  # eager/compiled pairs timed
    # the interval's width relative to the speedup, (hi - lo) / speedup; above MAX_CI_WIDTH (0.2)
    # a conclusive figure is shown as "imprecise" (`speed_words`); None: no interval
    ci_rel_width: Optional[float] = None
    # the forward only (worker/measure/timing/guard_cost.py): guard evaluation per compiled call, median of the
    # rounds' (compiled − guards skipped), its 95% interval, and its share of the compiled call
    # (None: not measurable, the interval is not wholly above 0); all None: not measured on this torch
    guard_us_per_call: Optional[float] = None
    guard_us_ci: Optional[list[float]] = None
    guard_share: Optional[float] = None
    # where the time goes, line by line (worker/measure/lines/costs.py; a train step's lines include their backward),
    # profiled after the timing rounds: lines by cost; what no line took, per reason; each side's
    # profile total per call ({"eager", "compiled"}: lines + unattributed_us = "compiled")
    lines: list[LineCost] = field(default_factory=list)
    unattributed_us: Optional[float] = None
    unattributed_why: dict[str, float] = field(default_factory=dict)
    profile_us: dict[str, Optional[float]] = field(default_factory=dict)
    lines_note: Optional[str] = None  # None: measured; else "not measurable: <why>" (or not run)
    compiled_lines_note: Optional[str] = None  # the compiled column alone: "not on this torch (...)"
    # CUDA: the share of the compiled call the GPU sat idle (timed call − device-busy time); None on CPU
    gpu_idle_share: Optional[float] = None
    # why the line table is no finding ("machine busy while profiling: …", a profile total more than
    # 25% off its timed call): renderers show no per-line eager→compiled ratio then; None: a finding
    lines_caveat: Optional[str] = None
    # the generated kernels the lines name, their source from Inductor's output code (`compile-lens show`);
    # not in the check JSON
    kernel_sources: dict[str, str] = field(default_factory=dict)
    # a lever's paired rounds (`worker/levers/steady`; the benchmark says it in `Benchmark.contention`):
    # "machine busy: …" when other processes took our cores and the timing is inconclusive, with what
    # the busy rule saw (`busy/contention.Contention.report`); None otherwise
    busy: Optional[str] = None
    contention: Optional[ContentionReport] = None


@dataclass
class CompileFrame:
    """One compiled frame's share of the cold compile (torch's compilation metrics, fresh process)."""

    compile_id: str  # "0/0"; a graph break splits a function into frames ("1/0": the code after it)
    function: str  # co_name: "forward", "torch_dynamo_resume_in_forward_at_17"
    path: str
    line: int  # the frame's first line: the `def`, or the line a resumed frame starts at
    total_s: float
    stages_s: dict[str, float] = field(default_factory=dict)  # "dynamo", "aot_autograd", "inductor", "codegen_build", "autotune"
    # of "dynamo": the seconds Dynamo spent tracing the frame's bytecode line by line (what its lines'
    # seconds add up to, `CompileLine.top`); the rest is its guards, graph and bytecode. None: not measured
    traced_s: Optional[float] = None
    guards_s: Optional[float] = None  # of "dynamo": building its guards (Dynamo's own timer); None: not measured


@dataclass
class CompileLine:
    """One source line's share of a frame's Dynamo tracing (`worker/measure/compile/per_line.py`).
    AOTAutograd and Inductor compile a frame's graph as a whole: their time is the frame's, not a line's."""

    compile_id: str  # the frame it was traced in (`CompileFrame.compile_id`)
    path: str
    line: int
    s: float  # tracing seconds while on this line, the calls inlined from it included (and `after_s`)
    self_s: float  # of which on this line itself (the calls it made not included)
    traced: int  # how many times Dynamo traced it: a block's line under a loop over 4 blocks, 4
    # a line of the compiled frame's own code (the outermost on its stack, not reached through a
    # call): the top lines' `s` add up to the frame's `traced_s` plus its def line's `after_s`
    top: bool = True
    via: Optional[LineRef] = None  # an inner line: the frame's own line it was reached from (the loop's)
    # the frame's def line only: Dynamo's work on the whole frame after its lines were traced (its guards,
    # its graph and bytecode), of its Dynamo time by torch's timers; included in `s` and `self_s`
    after_s: float = 0.0
    guards_s: Optional[float] = None  # of `after_s`: building its guards (Dynamo's timer); None: not timed


@dataclass
class CompileTime:
    frames: list[CompileFrame] = field(default_factory=list)  # in compile order
    note: Optional[str] = None  # not measured: why
    lines: list[CompileLine] = field(default_factory=list)  # Dynamo's tracing by line, costliest first
    lines_note: Optional[str] = None  # the lines not measured: why


@dataclass
class AccuracyDrift:
    """Where the compiled model's accuracy first drifts from eager (`worker/measure/accuracy/drift`): the module
    (its dotted name; "" the model's own forward), its file and `def forward` line, the difference of
    its output (or its own parameters' gradients) and of its inputs (None: not compared)."""

    module: str
    path: Optional[str]
    line: Optional[int]
    max_abs: Optional[float]
    max_rel: Optional[float]
    inputs_max_abs: Optional[float]
    of: str  # "output" | "grad", as `Errors`' fields


@dataclass
class Precision:
    """What a measurement ran in (`worker/measure/workload/precision.py`): named beside every figure."""

    value: str = "fp32"  # "fp32" | "tf32" | "bf16-autocast" | "fp16-autocast": what the figures are
    source: str = "default"  # "setting" | "directive" | "pyproject" | "recorded" | "default"
    detail: str = ""  # what it meant on this device ("matmul TF32 off, cuDNN convolutions TF32 on")
    asked: str = ""  # what was asked, when this device could not run it (then `value` is what ran)


@dataclass
class CompileSeconds:
    """A measurement's compiles, seconds (None: not measured): cold, a fresh process with an empty cache;
    warm, this machine's caches filled (`worker/measure/compile/children`, `benchmark`)."""

    cold: Optional[float] = None  # the break-even workload's: the train step when there is one
    warm: Optional[float] = None
    cold_forward: Optional[float] = None  # the forward's, measured first
    warm_forward: Optional[float] = None
    warm_remote: Optional[float] = None  # a fresh process served by the team's remote cache; None: not measured


@dataclass
class Errors:
    """The largest difference of the compiled call from eager (`worker/measure/accuracy/compare.py`), absolute or
    relative: of the output, and of the gradients after one backward (train mode); None: not compared."""

    output: Optional[float] = None
    grad: Optional[float] = None


@dataclass
class PeakMemory:
    """Peak memory of one call of the verdict's workload, eager and compiled (`worker/measure/memory/peak.py`)."""

    eager: Optional[int] = None  # bytes; None: not measured (`method` says why)
    compiled: Optional[int] = None
    method: str = ""  # how it was read ("allocator peak over …"), or why not ("unavailable: …")


@dataclass
class Benchmark:
    device: str  # "cpu" | "cuda"
    device_name: str
    mode: str
    forward: Timing
    train_step: Optional[Timing]
    compile_s: CompileSeconds
    break_even_calls: Optional[int]
    peak_memory_bytes: PeakMemory
    max_abs_error: Errors
    max_rel_error: Errors
    verdict: str
    torch: str = ""
    inputs: str = ""
    measured_at: float = 0.0  # unix time
    notes: list[str] = field(default_factory=list)  # breaks/recompiles seen while timing
    conclusive: bool = False  # the verdict's timing (train step, else forward) is conclusive
    # what else ran while timing and the busy rule's verdict (`busy/contention.Contention.report`); None: not read
    contention: Optional[ContentionReport] = None
    # where the measurement's wall time went, seconds: {"build", "cold_child", "cold_child_train",
    # "cold_compile", "warm_compiles", "accuracy_warmup", "timing", "memory", "line_costs",
    # "to_forward" (until the forward's figures were sent), "total"}
    stages_s: dict[str, float] = field(default_factory=dict)
    # from torch's compilation metrics, where this torch records them (None: not recorded)
    guard_latency_us: Optional[float] = None  # torch's one timing of the compiled forward's guard check (all frames), at build
    # the warm compile's Inductor/AOTAutograd cache {"hits", "misses"} (the break-even workload's; the
    # forward's apart under "forward": {"hits", "misses"} when that is the train step); with a remote cache also
    # "remote": {"fx_graph": {"hits", "misses"}, "aot_autograd": {..}, "autotune": ("n/a" on the CPU)}
    warm_cache: Optional[dict[str, Any]] = None  # open: torch's cache counters, as this torch names them
    # the optional parts of the measurement that failed, and why, each on its own
    # (`worker/measure/run/isolated`): {"guard cost": "not measurable: …", "peak memory": …,
    # "accuracy": …, "warm-remote compile": …}; the other figures stand
    unmeasured: dict[str, str] = field(default_factory=dict)
    compile_time: Optional[CompileTime] = None  # the cold compile, frame by frame
    accuracy_drift: Optional[AccuracyDrift] = None  # where a difference beyond tolerance first appears (None: none found)
    precision: Optional[Precision] = None  # autocast / TF32 the figures ran under (None: measured before it was named)


@dataclass
class Lever:
    """One torch lever tried on a target against the default `torch.compile`, measured the way the
    speedup is (`worker/levers`): compile times in fresh processes with empty caches, steady time in
    paired rounds with a 95% interval. `before` is the default, `after` the lever; a figure that could
    not be measured is None, and a lever that could not be measured at all says why in `why`."""

    lever: str  # "regional" | "dynamic" | "static" | "guard_filter" | "aot_artifact" | "cudagraphs" | "max_autotune"
    change: str  # what was changed, in the user's words ("each Block in `blocks` compiled once (block.compile())")
    verdict: str  # "better" | "worse" | "no change" | "inconclusive" | "not measured"
    why: str = ""  # the figure that decided the verdict, or why it could not be measured
    action: str = ""  # the edit offered when better (code action title), else ""
    # {"before", "after"} seconds of the cold compile (None: not measured), with its CPU time as
    # "cpu_before"/"cpu_after" where measured; and of the warm one where measured
    compile_s: dict[str, Optional[float]] = field(default_factory=dict)
    warm_compile_s: dict[str, Optional[float]] = field(default_factory=dict)
    # the default (`eager_ms`: "before") against the lever (`compiled_ms`: "after") in paired rounds, ms per
    # call; `speedup` default/lever; None: not timed (the train step where the measurement timed none).
    # The CLI's JSON names them {"before", "after", "speedup", "ci", ...} (`render/levers_text.timing_json`)
    forward: Optional[Timing] = None
    train_step: Optional[Timing] = None
    recompiles: dict[str, int] = field(default_factory=dict)  # {"before", "after"}: compiles counted
    # what the edit needs (`actions/levers.py`): {"attribute": "blocks", "block_class": "Block", ...}
    data: dict[str, Any] = field(default_factory=dict)  # open: each lever's own, read back by its edit
    wall_s: float = 0.0  # what trying this lever cost (BENCHMARKS)
    # CUDA graphs: {"before", "after"} the GPU idle share of the compiled call (`lines.windows.gpu_idle_share`,
    # as `forward.gpu_idle_share`), the default compile and the lever's; {} where not measured
    gpu_idle_share: dict[str, Optional[float]] = field(default_factory=dict)


# --- the deployment answers (`worker/measure/deployment/questions`), measured with the benchmark ----------------

@dataclass
class ExportCheck:
    """Does the target export with `torch.export` (`deployment.check_export`): non-strict, then strict."""

    ok: bool  # non-strict export works
    strict: Optional[bool]  # strict export works too; None: not checked (the budget had no room for its trace)
    line: Optional[int] = None  # where the (first) failure is, at its innermost user line; None: no failure
    path: Optional[str] = None
    message: Optional[str] = None  # torch's own words, first paragraph; "strict export fails: …" when only strict does


@dataclass
class FallbackOp:
    """An op Inductor's output code calls instead of generating code for it (`deployment.ops_in_code`)."""

    op: str  # "aten.sort", "mylib.op", "extern_kernels.addmm"
    count: int  # calls in the compiled forward's wrappers
    kind: str = "fallback"  # "fallback" (an eager ATen kernel) | "extern" (a library GEMM/convolution: not eager)


@dataclass
class SweepPoint:
    batch: int
    eager_ms: float
    compiled_ms: float
    eager_iqr_ms: float
    compiled_iqr_ms: float
    speedup: float


@dataclass
class BatchSweep:
    """Eager vs compiled latency across batch sizes (`deployment.batch_sweep`), compiled once with dim 0 dynamic."""

    dim: int
    example_batch: int
    sizes: list[int]
    points: list[SweepPoint]
    compiles: int  # 1: the batch dimension stayed dynamic
    dynamic: bool
    device: str
    workload: str  # "forward (eval, no_grad)"
    seconds: float = 0.0  # what the sweep took


@dataclass
class Report:
    """The compile report's figures (`deployment.report_data`): None until measured."""

    batch_sweep: Optional[BatchSweep] = None  # None: not measured (its note, or `TargetResult.unmeasured`, says why)
    kernels: Optional[int] = None  # generated kernels in the compiled forward's output code
    notes: list[str] = field(default_factory=list)
