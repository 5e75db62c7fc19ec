"""Run one analysis job: import the file fresh, then trace / sweep / benchmark each target.

Results stream back one target at a time, so the editor shows the first target's breaks while
the next one is still being traced.
"""

from __future__ import annotations

import os
import platform
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..protocol import (
    PARTS,
    AnalyzeJob,
    ExportCheck,
    FallbackOp,
    Known,
    PartStatus,
    Problem,
    Report,
    TargetResult,
    TargetSpec,
    from_dict,
    with_phase,
)
from ..timeline import Timeline
from . import loader
from .breaks.graph_breaks import trace_graph_breaks
from .measure.workload.devices import cpu_name
from .stall_watch import StallWatch, install_compile_callbacks
from .tool_errors import BUG_HINT, bug_report, is_tool_error, raised_at, take_reports, where
from .torch_trace import torch_trace

Send = Callable[[dict], None]


def describe_runtime() -> dict[str, Any]:
    cuda = torch.cuda.is_available()
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cuda": cuda,
        "device_name": torch.cuda.get_device_name(0) if cuda else cpu_name(),
        "pid": os.getpid(),
        "escape_hatches": escape_hatches(),
    }


def escape_hatches() -> list[str]:
    """The ways out of a graph break this torch has, by the name the code actions use: the server
    (no torch) offers an edit only when the worker's torch can run it."""
    import torch._dynamo  # noqa: F401 - `torch._dynamo` is imported on first use otherwise

    found = []
    if callable(getattr(torch._dynamo, "nonstrict_trace", None)):
        found.append("nonstrict_trace")
    decorators = getattr(torch._dynamo, "decorators", None)
    leaf = getattr(decorators, "leaf_function", None)
    if callable(leaf):
        found.append("leaf_function")
    # the set a "skip in compiled code" edit adds to: `ignore_logging_functions`, or its older name
    # `ignore_logger_methods` (an alias of it on torch 2.13); an older torch has neither
    for name in ("reorderable_logging_functions", "ignore_logging_functions", "ignore_logger_methods"):
        if isinstance(getattr(torch._dynamo.config, name, None), set):
            found.append(name)
    return found


def _problem_from(exc: BaseException, job: AnalyzeJob, kind: str, what: str) -> Problem:
    """A short user-facing problem at the innermost workspace line; details go to the log."""
    where = loader.innermost_user_frame(exc, job.root)
    path, line = where if where else (job.path, None)
    if isinstance(exc, SystemExit):
        return Problem("exit", f"{what}: user code called sys.exit({exc.code!r})", path, line,
                       "guard script code with `if __name__ == \"__main__\":`")
    hint = None
    if isinstance(exc, ModuleNotFoundError):
        hint = f"install `{exc.name}` in the interpreter Compile Lens uses, or select another one"
    return Problem(kind, f"{what}: {loader.describe(exc)}", path, line, hint)


def run_job(raw: dict, send: Send) -> None:
    timeline = Timeline("worker") if raw.get("stamps") else None  # the trace's marks, for the bench
    if timeline is not None:
        timeline.mark("received")
    job = from_dict(AnalyzeJob, raw)
    take_reports()  # a report belongs to the target whose phase made it: none carried over

    running: dict[str, str | None] = {"target": None, "phase": None}

    def progress(stage: str, target: str | None = None, phase: str | None = None,
                 limit_s: float | None = None) -> None:
        event: dict[str, Any] = {"id": job.id, "event": "progress", "stage": stage, "target": target, "phase": phase}
        if limit_s:  # how long the next stage may be silent (a measurement's stages)
            event["info"] = {"limit_s": limit_s}
        running.update(target=target, phase=phase)
        watch.poke()
        install_compile_callbacks()  # again: torch._dynamo.reset() between targets clears them
        send(event)

    # A config line in one user file (`torch._dynamo.config.x = ...`) must not carry over to the
    # next file this warm worker analyses.
    config = torch._dynamo.config
    saved_config = config.get_config_copy()
    watch = StallWatch(send, job.id, job.root, job.stall_s, lambda: (running["target"], running["phase"]))
    try:
        with torch_trace(job.trace_dir), watch:
            _run(job, send, progress, timeline)
    finally:
        changed = config.get_config_copy()
        for key, value in saved_config.items():  # only what changed: setting deprecated keys warns
            if changed.get(key) != value:
                setattr(config, key, value)


def _run(job: AnalyzeJob, send: Send, progress: Callable[..., None], timeline: Timeline | None = None) -> None:
    early = _early_cold(job)  # the first measured target's cold children: their imports beside ours
    try:
        _run_phases(job, send, progress, timeline, early)
    finally:
        if early is not None:
            early.stop()


EARLY_TRAIN_CORES = 4  # cores before the train step's cold child starts early too


def _early_cold(job: AnalyzeJob) -> Any:
    """The cold children of the first target this job measures (`compile.children.Early`), started
    now, so that fresh processes' imports run beside this one's import and trace; None when
    the job measures nothing or the target's inputs are known only after the import."""
    if not job.benchmark:
        return None
    spec = next((s for s in job.targets if "measure" not in job.skip.get(s.name, ())), None)
    if spec is None or spec.inputs is None or (spec.inputs.after_import and not spec.inputs.text):
        return None
    from .measure.compile.children import Early, child_job
    from .measure.compile.cold import allowed_cpus
    from .measure.workload.devices import resolve_device
    from .measure.workload.model import uses_cudagraphs

    device, _ = resolve_device(job.device)
    step_begin = uses_cudagraphs(job.mode) and device.startswith("cuda")
    # the train step's too, for a module (its eager run may yet say it has none: then it is ended),
    # where the cores let three processes import at once: on 2 cores it would slow the forward's
    workloads = ["forward", "train"] if spec.kind == "module" and len(allowed_cpus()) >= EARLY_TRAIN_CORES else ["forward"]
    try:
        return Early(spec.name, {wl: child_job(job.path, job.root, spec, device, job.mode, step_begin, wl,
                                               job.max_seconds)
                                 for wl in workloads}, job.max_seconds)
    except OSError:  # no process to spare: the measurement starts its own when it needs it
        return None


def _run_phases(job: AnalyzeJob, send: Send, progress: Callable[..., None], timeline: Timeline | None,
                early: Any) -> None:
    progress("importing")
    try:
        module = loader.import_file(job.path, job.root)
        if timeline is not None:
            timeline.mark("imported")
    except BaseException as exc:  # noqa: BLE001 - user code: report, never crash the worker
        traceback.print_exc()
        problem = _problem_from(exc, job, "import", f"importing {os.path.basename(job.path)} failed")
        send({"id": job.id, "event": "done", "error": _asdict(problem)})
        return
    targets = _Targets(job, module, send, progress,
                       {spec.name: TargetResult(spec.name, spec.kind, spec.line, inputs=spec.inputs) for spec in job.targets},
                       timeline=timeline)
    run_phase, built = targets.run_phase, targets.built
    for name, earlier in job.known.items():  # the levers phase after a measurement read from the cache
        if name in targets.results:
            _known(targets.results[name], earlier)

    # Phases in the order the editor needs them: every target's graph breaks first (fast), then
    # the recompile sweeps, then measurements. Each phase re-sends the target's growing result.
    if job.trace:
        for spec in job.targets:
            run_phase(spec, "trace", "tracing", lambda r, p, s=spec: _trace(r, built[s.name], job.root, timeline))
    if job.recompiles:
        for spec in job.targets:
            run_phase(spec, "sweep", "checking recompiles of", lambda r, p, s=spec: _set(r, "recompiles", _sweep(built[s.name], job, p)))
    if job.benchmark:
        for spec in job.targets:
            run_phase(spec, "measure", "measuring",
                      lambda r, p, s=spec: _measure_target(r, p, built[s.name], job, send, early))
    if job.levers:
        for spec in job.targets:
            run_phase(spec, "levers", "trying levers on", lambda r, p, s=spec: _levers(r, p, built[s.name], job))
    send({"id": job.id, "event": "done"})


@dataclass
class _Targets:
    """One job's targets as its phases run: each built once, its result growing phase by phase."""

    job: AnalyzeJob
    module: Any
    send: Send
    progress: Callable[..., None]
    results: dict[str, TargetResult]
    built: dict[str, loader.BuiltTarget] = field(default_factory=dict)
    timeline: Timeline | None = None  # the job's marks, sent with each target's trace (`AnalyzeJob.stamps`)

    def run_phase(self, spec: TargetSpec, phase: str, what: str,
                  work: Callable[[TargetResult, Callable[[str], None]], None]) -> None:
        """Run one phase of one target. Its outcome is that phase's own: a failure marks the phase
        (and, when the target cannot be built or called at all, the target), never the job."""
        job, result = self.job, self.results[spec.name]
        if phase in job.skip.get(spec.name, ()):
            return  # settled by an earlier job (this one was re-sent after a worker died)
        if result.status == "skipped":  # not an nn.Module after all: nothing to show
            return
        if result.status == "error":  # could not be built or called: nothing later can run
            why = result.error.message if result.error else "the target could not be analysed"
            _settle(result, phase, "not-run", Problem("skipped", f"not run: {why}"))
            self.send({"id": job.id, "event": "target", "result": _asdict(result)})
            return
        self.progress(f"{what} {spec.name}", spec.name, phase)
        try:
            if spec.name not in self.built:
                self.built[spec.name] = target = loader.build_target(self.module, spec, job.path)
                result.inputs, result.left_out = target.spec.inputs, list(target.left_out)
                if self.timeline is not None:
                    self.timeline.mark("built")
            work(result, lambda text, **kw: self.progress(text, spec.name, phase, **kw))
            _settle(result, phase, "done")
        except loader.NotATarget:
            result.status = "skipped"  # not an nn.Module after all: dropped without a word
            _settle(result, phase, "done")  # an answer about the code: cached, so no worker starts for it again
        except BaseException as exc:  # noqa: BLE001 - user code: report, never crash the worker
            problem = self._problem(exc, spec, phase, result)
            if phase == "trace" or spec.name not in self.built:  # not built or not callable: nothing can run
                result.status, result.error = "error", problem
            _settle(result, phase, "failed", problem)
        result.bug_reports += take_reports()  # optional parts that failed in our own code
        event: dict[str, Any] = {"id": job.id, "event": "target", "result": _asdict(result)}
        if self.timeline is not None and phase == "trace":
            self.timeline.mark("sending")
            event["info"] = {"stamps": self.timeline.marks}
        self.send(event)

    def _problem(self, exc: BaseException, spec: TargetSpec, phase: str, result: TargetResult) -> Problem:
        if isinstance(exc, loader.TargetError):
            return exc.problem
        if phase == "measure" and is_tool_error(exc):
            return _tool_problem(exc, spec.name)
        traceback.print_exc()
        # the first run of guessed inputs (the trace) failing is the guess's fault, not the
        # code's; once traced, the inputs are known to fit and a later failure is the code's
        guessed = result.inputs is not None and result.inputs.source == "inferred"
        if guessed and phase == "trace" and not isinstance(exc, SystemExit):
            return loader.guess_problem(self.built[spec.name].spec if spec.name in self.built else spec, exc)
        return _problem_from(exc, self.job, "call", f"calling `{spec.name}` failed")


def _tool_problem(exc: BaseException, name: str) -> Problem:
    """A measurement that failed in Compile Lens's own code: the bug report goes to the log (stderr
    here, and `details` for the server's log and the CLI's stderr), never a warning on the user's line."""
    report = bug_report(exc, f"measuring `{name}`")
    frame = raised_at(exc)
    at = where(frame) if frame is not None else "?"
    return Problem("internal", f"internal error in Compile Lens at {at} ({BUG_HINT}; the traceback is in the log)",
                   details=report)


def _measure_target(result: TargetResult, p: Callable[..., None], target: loader.BuiltTarget, job: AnalyzeJob,
             send: Send, early: Any = None) -> None:
    """The measurement, each part sent as its own "target" event (`part` set) the moment it lands:
    the forward first, then the train step, memory, line costs, then the deployment questions.
    Every part is "pending" until then (`TargetResult.parts`). A part that fails after the forward
    fails alone; a forward that fails fails the phase (nothing measured)."""
    from .measure.run.budget import Budget

    started = time.perf_counter()
    budget = Budget(job.max_seconds, started)  # the bound: every part after the forward's headline within it
    result.parts = {part: PartStatus("pending") for part in PARTS}
    last = {"at": started}

    def send_part(part: str) -> None:
        result.bug_reports += take_reports()
        send({"id": job.id, "event": "target", "part": part, "result": _asdict(result)})

    def on_part(part: str, benchmark: Any, status: str, why: str | None) -> None:
        now = time.perf_counter()
        if benchmark is not None:
            result.benchmark = benchmark
        result.parts[part] = PartStatus(status, why, round(now - last["at"], 3) if status != "not-run" else None)
        last["at"] = now
        if part != "train_step" or status != "not-run" or why == budget.label:  # none at all: said with the forward
            send_part(part)

    output_code: list[str] = []
    try:
        mine = early if early is not None and early.name == target.spec.name else None
        result.benchmark = _benchmark(target, job, p, on_part, output_code, mine, budget)
    except BaseException as exc:
        # the forward (or the target itself) failed: what was not measured is not measurable
        why = getattr(getattr(exc, "problem", None), "message", None) or loader.describe(exc)
        for part, state in result.parts.items():
            if state.status == "pending":
                result.parts[part] = PartStatus("failed", f"the measurement failed: {why}"[:300])
        raise
    deployment_parts(result, target, job, p, budget=budget, output_code=output_code, send_part=send_part)


# Parts a budgeted measurement runs only when asked for (`AnalyzeJob.opt_in`): the batch sweep is a
# dynamic-batch compile of its own and its timing, often more than the rest of the measurement; run
# by "what fits", it made a faster measurement slower (the time saved went to it).
ASKED_ONLY = ("batch_sweep",)
NOT_ASKED = "an opt-in part, not asked for"


def deployment_parts(result: TargetResult, target: loader.BuiltTarget, job: AnalyzeJob,
                     progress: Callable[..., None], *, budget: Any = None,
                     output_code: list[str] | None = None,
                     send_part: Callable[[str], None] = lambda part: None) -> None:
    """The deployment questions and the report's data, after the benchmark: each `isolated`, so a
    failure in one is "not measurable: <why>" on its own figure (`result.unmeasured`) and never
    loses the benchmark or another part. Each runs only when what is left of the target's budget
    (`budget`, the measurement's `measure.run.budget.Budget`; None: no budget) fits what it should take
    (`deployment.estimate_s`), else it is "not run: N s budget", and one that runs on past the budget's
    stop point is stopped ("stopped: N s budget"). The fallback ops are read from the warm forward compile's
    `output_code`, no compile of their own (compiled afresh only without it)."""
    from .measure.deployment import questions as deployment
    from .measure.run.budget import bounded, part_status
    from .measure.run.isolated import isolated

    seen = _asdict(result.benchmark.compile_s) if result.benchmark else {}
    cold = seen.get("cold_forward") or seen.get("cold") or 0.0
    # a part's stages may be silent for what the cold compile took, twice, as the measurement's own stages
    limit_s = max(job.max_seconds, 2.0 * cold)

    def p(text: str, **kw: Any) -> None:  # each stage inside a part gets the part's limit, not the default
        progress(text, **{"limit_s": limit_s, **kw})

    def asked(part: str) -> bool:  # asking for the export asks for both; the strict one, the export it is part of
        return part in job.opt_in or (part == "strict_export" and "export" in job.opt_in) or \
            (part == "export" and "strict_export" in job.opt_in)

    def fits(part: str) -> bool:
        cost = deployment.estimate_s(part, seen, job.max_seconds, bool(output_code))
        if asked(part):
            return True
        if part in ASKED_ONLY:  # in a budgeted measurement, only when asked for
            return budget is None
        return budget is None or budget.fits(cost)

    def export() -> None:
        strict = fits("strict_export")  # strict export too (a Dynamo trace more) only where it fits
        found = deployment.check_export(target, root=job.root, device=job.device, progress=p, strict=strict)
        result.export = from_dict(ExportCheck, found)

    def fallback() -> None:
        if output_code:
            found = deployment.read_output_code(output_code)
        else:  # no output code seen (an older torch): one compile of its own
            found = deployment.inspect_inductor(target, device=job.device, mode=job.mode, progress=p)
        result.fallback_ops = [from_dict(FallbackOp, o) for o in found["fallback_ops"]]
        kernels["kernels"] = found.get("kernels")

    def sweep() -> None:
        result.report = from_dict(Report, deployment.report_data(
            target, device=job.device, mode=job.mode, progress=p, max_seconds=deployment.report_budget(job.max_seconds),
            inductor=kernels, unmeasured=result.unmeasured))

    kernels: dict[str, Any] = {}
    for part, label, what, run in (
        ("export", "torch.export", "checking torch.export…", export),
        ("fallback_ops", "fallback ops", "finding ops that fall back to eager…", fallback),
        ("batch_sweep", "batch sweep", "measuring latency across batch sizes…", sweep),
    ):
        if not fits(part):
            why = NOT_ASKED if part in ASKED_ONLY else budget.label
            result.parts[part] = PartStatus("not-run", why)
            result.unmeasured[label] = f"not run: {why}"
            send_part(part)
            continue
        p(what, limit_s=limit_s)
        t0 = time.perf_counter()
        # an asked-for part runs whatever the budget: not stopped either
        with isolated(label, result.unmeasured) as outcome, bounded(None if asked(part) else budget) as stopped:
            run()
        result.parts_s[part] = round(time.perf_counter() - t0, 3)
        why = outcome.why.split(":", 1)[1].strip() if outcome.why else None
        if stopped.why:  # a part cut short keeps nothing: its figures do not stand on their own
            result.unmeasured[label] = stopped.why
            setattr(result, {"export": "export", "fallback_ops": "fallback_ops", "batch_sweep": "report"}[part], None)
            why = part_status(stopped.why)[1]
        result.parts[part] = PartStatus("failed" if why else "done", why, result.parts_s[part])
        send_part(part)
    if result.report is None and kernels.get("kernels") is not None:  # no sweep: the kernel count stands
        result.report = Report(kernels=kernels["kernels"])


def _known(result: TargetResult, earlier: Known) -> None:
    if earlier.benchmark is not None:
        result.benchmark = earlier.benchmark
    result.recompiles = list(earlier.recompiles)


def _levers(result: TargetResult, p: Callable[..., None], target: loader.BuiltTarget, job: AnalyzeJob) -> None:
    from .levers.phase import run_levers

    result.levers = run_levers(result, target, path=job.path, root=job.root, device=job.device, mode=job.mode,
                               max_seconds=job.max_seconds, progress=p)


def _settle(result: TargetResult, phase: str, status: str, error: Problem | None = None) -> None:
    result.phases = with_phase(result, phase, status, error).phases


def _trace(result: TargetResult, built: loader.BuiltTarget, root: str, timeline: Timeline | None = None) -> None:
    result.captured_graphs = []
    result.graph_count, result.graph_breaks = trace_graph_breaks(built, root, timeline, result.captured_graphs)


def _set(result: TargetResult, name: str, value: Any) -> None:
    setattr(result, name, value)


def _sweep(built: loader.BuiltTarget, job: AnalyzeJob, progress: Callable[[str], None]) -> list:
    try:
        from .breaks.recompiles import sweep_recompiles
    except ImportError:
        return []
    inputs = built.spec.inputs
    return sweep_recompiles(built, path=job.path, progress=progress,
                            compile_kwargs=built.spec.compile_options or None,
                            recorded_shapes=(inputs.recorded_shapes or None) if inputs else None)


def _benchmark(built: loader.BuiltTarget, job: AnalyzeJob, progress: Callable[[str], None],
               on_part: Callable[..., None], output_code: list[str], early: Any = None, budget: Any = None) -> Any:
    from .measure.run.benchmark import run_benchmark

    # the requested device, not the resolved one: the benchmark notes a cuda → cpu fallback
    return run_benchmark(built, path=job.path, root=job.root, device=job.device, mode=job.mode,
                         max_seconds=job.max_seconds, progress=progress, remote_cache=job.remote_cache,
                         on_part=on_part, output_code=output_code, opt_in=tuple(job.opt_in), early=early,
                         budget=budget)


def _asdict(obj: Any) -> dict:
    import dataclasses

    return dataclasses.asdict(obj)
