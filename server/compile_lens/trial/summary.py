"""The figures of a trial (`figures`' records) from the two run records the hook wrote (`render/trial_text.py`
words them). Pure: no torch.

Warm-up steps are step 0 and every step in which something compiled (compiled run); the steady
state is the other steps, as a median with its quartiles. A speedup is *conclusive* when each run
has at least 3 steady steps and their interquartile ranges do not overlap; otherwise it is
reported as inconclusive and gives no payback projection and no money figure.
"""

from __future__ import annotations

import math
import re
from typing import Optional

from ..busy.rule import CpuUse, Load, decide, top_words
from ..cost import Bill, CostInputs, gpu_bill
from ..protocol import BusyProcess, from_dict
from ..torch_text import compile_settings
from .figures import (
    CompileSettings,
    CompileTime,
    Failure,
    LossFigures,
    Payback,
    Quartiles,
    RunBreak,
    RunFigures,
    RunRecompile,
    Speedup,
    Speedups,
    Steady,
    Step,
    TrialFigures,
)

MIN_STEADY = 3
LIMIT_HIT = re.compile(r"recompile[_ ]limit|cache[_ ]size[_ ]limit", re.IGNORECASE)  # a compile the limit refused


def quartiles(values: list[float]) -> Optional[Quartiles]:
    if not values:
        return None
    ordered = sorted(values)

    def at(q: float) -> float:
        pos = q * (len(ordered) - 1)
        low = math.floor(pos)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)

    return Quartiles(median=at(0.5), q1=at(0.25), q3=at(0.75), min=ordered[0], max=ordered[-1], n=len(ordered))


NO_RECORD = ("the run left no record (did the program start Python with -E/-I, "
             "or exit before importing torch?)")


def run_figures(run: Optional[dict], exit_code: Optional[int]) -> RunFigures:
    """One run from the hook's record: its steps split into warm-up and steady state, its memory and how it ended."""
    if run is None:
        return RunFigures(ran=False, exit_code=exit_code, failure=Failure(kind="no-record", message=NO_RECORD))
    steps = run.get("steps") or []
    warmup = [s["index"] for s in steps if s["index"] == 0 or s.get("compiles")]
    # the step profiled for memory ran under the profiler: not a steady-state time
    steady = [s for s in steps if s["index"] not in warmup and not s.get("profiled")]
    failure = from_dict(Failure, run["failure"]) if run.get("failure") else None
    if failure is None and exit_code not in (0, None) and not run.get("stopped_by_trial"):
        failure = Failure(kind="exit", step=len(steps), message=f"the program exited with status {exit_code}")
    return RunFigures(
        ran=True,
        exit_code=exit_code,
        stopped_by_trial=bool(run.get("stopped_by_trial")),
        device=run.get("device"),
        torch=run.get("torch"),
        steps=[Step(index=s["index"], wall_s=s.get("wall_s"), hook_s=s.get("hook_s"), loss=s.get("loss"),
                    shapes=s.get("shapes"), compiles=s.get("compiles") or 0, profiled=s.get("profiled"))
               for s in steps],
        warmup_steps=warmup,
        warmup_wall_s=sum(s["wall_s"] for s in steps if s["index"] in warmup and s.get("timed", True)),
        # steps that ended before any model call was seen (a library model, found at step 0's end)
        untimed_steps=[s["index"] for s in steps if s.get("timed") is False],
        steady=Steady(wall_s=quartiles([s["wall_s"] for s in steady]),  # type: ignore[arg-type]
                      hook_s=quartiles([s["hook_s"] for s in steady])) if steady else None,
        peak_memory_bytes=run.get("peak_memory_bytes"),
        memory_method=run.get("memory_method"),
        memory_note=None if run.get("peak_memory_bytes") is not None else (run.get("memory_note") or "not measured"),
        failure=failure,
        outermost_modules=run.get("outermost_modules", []),
        outermost_targets=run.get("outermost_targets", []),
        outermost_found_late=bool(run.get("outermost_found_late")),
        compiled_by_program=bool(run.get("compiled_by_program")),
        other_cpu_percent=run.get("other_cpu_percent"),
        busy_top=[from_dict(BusyProcess, t) for t in run.get("busy_top") or []],
        dropout_in=run.get("dropout_in", []),
    )


def busy_during(eager: RunFigures, compiled: RunFigures) -> Optional[str]:
    """`other processes used 180% CPU during the eager run` when they took time from the program, by
    the busy rule's CPU rule: torch in the program runs on every core by default (threads = cpus), so
    more than half a CPU's worth of others' (and our own other processes') use is busy."""
    runs = [(name, run.other_cpu_percent, run.busy_top) for name, run in (("eager", eager), ("compiled", compiled))]
    busy = [(name, pct, top) for name, pct, top in runs
            if pct is not None and decide("cpu", Load(cpus=1, threads=1, cpu=CpuUse(pct, 0.0, top))).busy]
    if not busy:
        return None
    return "machine busy: other processes used " + " and ".join(
        f"{pct:.0f}% CPU during the {name} run" + (f" ({named})" if (named := _named(top)) else "")
        for name, pct, top in busy)


def _named(top: list[BusyProcess]) -> str:
    """`python -m pytest 95%; ours: Inductor compile worker 30%`: who, others first (`busy.rule.top_words`)."""
    others, ours = top_words(top, ours=False), top_words(top, ours=True)
    return "; ".join([w for w in (others, f"ours: {ours}" if ours else "") if w])


def judge(a: Optional[Quartiles], b: Optional[Quartiles], busy: Optional[str]) -> Optional[Speedup]:
    """Eager steady times `a` against compiled `b`: their median ratio, and whether the two can be told
    apart: apart quartile ranges, and no other process taking CPU from either run (`busy`)."""
    if not a or not b or b.median <= 0:
        return None
    enough = a.n >= MIN_STEADY and b.n >= MIN_STEADY
    why = None
    if busy:
        verdict, why = "inconclusive", busy
    elif enough and b.q3 < a.q1:
        verdict = "faster"
    elif enough and b.q1 > a.q3:
        verdict = "slower"
    else:
        verdict = "inconclusive"
        why = "the steady-state quartile ranges overlap" if enough else \
            f"fewer than {MIN_STEADY} steady-state steps in a run"
    return Speedup(ratio=a.median / b.median, verdict=verdict, why=why, eager_median_s=a.median,
                   compiled_median_s=b.median)


def speedup(eager: RunFigures, compiled: RunFigures, key: str = "wall_s") -> Optional[Speedup]:
    """The two runs' steady `key` times judged (`judge`)."""
    a = getattr(eager.steady, key) if eager.steady else None
    b = getattr(compiled.steady, key) if compiled.steady else None
    return judge(a, b, busy_during(eager, compiled))


def step_times(run: RunFigures, ratio: Optional[Speedup]) -> list[float]:
    """A run's wall time per step as payback and the report's chart count it: the step profiled for
    memory (the same index in both runs) at eager's steady median in both, since the profiler slows
    eager's many small ops more than compiled code."""
    return [ratio.eager_median_s if s.profiled and ratio else (s.wall_s or 0.0) for s in run.steps]


def payback(eager: RunFigures, compiled: RunFigures, ratio: Optional[Speedup]) -> Payback:
    """The step from which compiled is ahead in cumulative wall time, measured or projected."""
    a, b = step_times(eager, ratio), step_times(compiled, ratio)
    n = min(len(a), len(b))
    if n == 0:
        return Payback(step=None, measured=False, text="no steps to compare")
    ahead_from = None
    cum_a = cum_b = 0.0
    for i in range(n):
        cum_a += a[i]
        cum_b += b[i]
        if cum_b <= cum_a:
            ahead_from = i if ahead_from is None else ahead_from
        else:
            ahead_from = None
    out = {"steps_compared": n, "eager_cumulative_s": cum_a, "compiled_cumulative_s": cum_b}
    if ahead_from is not None:
        return Payback(**out, step=ahead_from, measured=True,
                       text=f"compiled is ahead in cumulative time from step {ahead_from}")
    if ratio and ratio.verdict == "faster":
        gain = ratio.eager_median_s - ratio.compiled_median_s
        step = n + math.ceil((cum_b - cum_a) / gain)
        return Payback(**out, step=step, measured=False,
                       text=f"does not pay back within {n} steps; projected from the steady-state medians: "
                            f"after step {step}")
    why = "compiled is slower at steady state" if ratio and ratio.verdict == "slower" else \
        "the steady-state difference is inconclusive"
    return Payback(**out, step=None, measured=False, text=f"does not pay back within {n} steps ({why})")


def losses(eager: RunFigures, compiled: RunFigures, rtol: float, atol: float,
           repeat: Optional[RunFigures] = None) -> LossFigures:
    """Per-step losses side by side and the first step where they differ beyond tolerance."""
    pairs = [(s.index, s.loss, c.loss) for s, c in zip(eager.steps, compiled.steps)]
    seen = [(i, a, b) for i, a, b in pairs if a is not None and b is not None]
    out: dict = {"rtol": rtol, "atol": atol, "steps": [{"index": i, "eager": a, "compiled": b} for i, a, b in pairs]}

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= atol + rtol * abs(a)

    if not seen:
        return LossFigures(**out, verdict="no-loss", text="no scalar .backward() was seen: no loss to compare")
    deterministic: Optional[bool] = None
    if repeat is not None:
        twice = [(s.loss, r.loss) for s, r in zip(eager.steps, repeat.steps)]
        deterministic = all(a == b for a, b in twice if a is not None and b is not None)
    first = next((i for i, a, b in seen if not close(a, b)), None)
    worst = max(abs(a - b) for _, a, b in seen)
    out.update({"first_divergent_step": first, "max_abs_diff": worst, "deterministic": deterministic})
    if deterministic is False:
        return LossFigures(**out, verdict="not-deterministic",
                           text="two eager runs gave different losses: the program is not deterministic, "
                                "so a divergence cannot be judged")
    if first is not None and first == seen[0][0] and deterministic is None:
        return LossFigures(**out, verdict="not-deterministic",
                           text=f"the losses differ from the first step ({seen[0][1]:.6g} vs {seen[0][2]:.6g}): "
                                "the program is likely not deterministic (seeds, data order); rerun with "
                                "--repeat-eager to check")
    if first is None:
        return LossFigures(**out, verdict="match",
                           text=f"losses match within rtol={rtol:g}, atol={atol:g} over {len(seen)} steps "
                                f"(max difference {worst:.3g})")
    differ = f"from step {first} beyond rtol={rtol:g}, atol={atol:g} (max difference {worst:.3g})"
    if compiled.dropout_in:
        return LossFigures(**out, verdict="random",
                           text=f"losses differ {differ}, as dropout makes them: "
                                f"{', '.join(compiled.dropout_in)} has dropout (p > 0), and compiled code draws "
                                "its own random masks, so the runs cannot match step by step; set dropout to 0 to "
                                "compare the losses")
    return LossFigures(**out, verdict="diverge",
                       text=f"losses diverge {differ} (if the model draws random numbers, e.g. dropout through "
                            "torch.nn.functional, compiled code draws different ones: rerun with it off)")


def graph_breaks(run: Optional[dict]) -> list[RunBreak]:
    """Distinct breaks the compiled run hit, where, why, in which step, with which input shapes; a break
    torch reported inside a library is at the program's line that called it, torch's place in `inside`."""
    found: dict = {}
    for event in (run or {}).get("events", []):
        if event.get("kind") == "graph_break":
            found.setdefault((event.get("where"), event.get("reason"), (event.get("inside") or {}).get("reported")),
                             RunBreak(**{k: event.get(k) for k in ("where", "inside", "reason", "gb", "explanation",
                                                                     "loop", "step", "shapes")}))
    return list(found.values())


def recompiles(run: Optional[dict]) -> list[RunRecompile]:
    """Every recompile: the function, the guard that failed, the step and the model's input shapes then."""
    found = []
    for event in (run or {}).get("events", []):
        if event.get("kind") != "recompile":
            continue
        recompile = RunRecompile(function=event.get("function") or "", where=event.get("where"),
                                 reason=event.get("reason"), step=event.get("step"), shapes=event.get("shapes"))
        if "_dynamo/external_utils.py" in (recompile.where or "").replace("\\", "/"):
            # the frame `torch.compile(model)` adds around the model's call: the model is what recompiled
            model = ", ".join((run or {}).get("outermost_modules") or []) or "the model"
            recompile.function, recompile.where = f"{model} (its compiled call)", None
        found.append(recompile)
    return found


def compile_time(run: Optional[dict]) -> Optional[CompileTime]:
    """Compile seconds of a run's record as Dynamo counted them: whole frames (forward), Inductor/AOT for
    backward graphs."""
    entries = (run or {}).get("compiles") or []
    if not entries:
        return None
    frames = sum(e.get("entire_frame_compile_time_s") or 0.0 for e in entries if e.get("co_name"))
    backward = sum((e.get("inductor_compile_time_s") or e.get("backend_compile_time_s") or 0.0)
                   for e in entries if not e.get("co_name"))
    return CompileTime(total_s=frames + backward, forward_frames_s=frames, backward_s=backward,
                       compiles=sum(1 for e in entries if e.get("co_name")),
                       steps=sorted({e["step"] for e in entries if e.get("step") is not None}))


def settings(run: Optional[dict]) -> Optional[CompileSettings]:
    """The compiled run's `torch.compile` calls and settings off torch's defaults; a recompile-limit hit
    is said with the limit the run set."""
    if not run or not (run.get("calls") or run.get("settings")):
        return None
    merged: dict = {}
    for seen in run.get("settings") or []:
        merged.update(seen.get("values") or {})
    explains = compile_settings.explanations(merged)
    hits = [c for c in run.get("compiles") or [] if LIMIT_HIT.search(str(c.get("fail_reason") or ""))]
    if hits:
        at = ", ".join(f"compile {c.get('compile_id')} in step {c.get('step')}" for c in hits[:3])
        limit = compile_settings.limit_words(merged) or "torch._dynamo.config.recompile_limit at torch's default (8)"
        explains = [f"the recompile limit was hit ({at}), after which the frame runs eagerly: {limit}",
                    *(e for e in explains if e != compile_settings.limit_words(merged))]
    return CompileSettings(calls=list(run.get("calls") or []), settings=list(run.get("settings") or []),
                           explains=explains)


def summarize(eager_run: Optional[dict], eager_code: Optional[int], compiled_run: Optional[dict],
              compiled_code: Optional[int], *, rtol: float, atol: float, repeat_run: Optional[dict] = None,
              command: str = "") -> TrialFigures:
    """The figures of the two runs' records (and the repeated eager run's); `session` adds the rest."""
    eager = run_figures(eager_run, eager_code)
    compiled = run_figures(compiled_run, compiled_code)
    wall = speedup(eager, compiled, "wall_s")
    hook = speedup(eager, compiled, "hook_s")
    repeat = run_figures(repeat_run, 0) if repeat_run is not None else None
    compiled_ok = compiled.failure is None
    return TrialFigures(
        command=command,
        eager=eager,
        compiled=compiled,
        speedup=Speedups(wall=wall, hook=hook) if compiled_ok else None,
        payback=payback(eager, compiled, wall) if compiled_ok else None,
        loss=losses(eager, compiled, rtol, atol, repeat),
        graph_breaks=graph_breaks(compiled_run),
        recompiles=recompiles(compiled_run),
        compile_time=compile_time(compiled_run),
        compile_settings=settings(compiled_run),
    )


def restart_compile_s(figures: TrialFigures) -> tuple[Optional[float], Optional[str]]:
    """Seconds one process start compiles, and which run says so: served by the team's remote cache
    when that run was measured and served (`--remote-cache`), else warm from the cache artifact
    (a team ships it), else the compiled run's compile time."""
    served = figures.remote_cache
    if served and served.served and served.compile_time:
        return served.compile_time.total_s, "warm-remote"
    if figures.artifact and figures.artifact.compile_time:
        return figures.artifact.compile_time.total_s, "artifact"
    compiled = figures.compile_time.total_s if figures.compile_time else None
    return compiled, ("compiled run" if compiled is not None else None)


def bill(figures: TrialFigures, inputs: CostInputs) -> Bill:
    """The GPU bill of a trial from its measured steady-state medians (wall time per step)."""
    wall = figures.wall
    compile_s, compile_from = restart_compile_s(figures)
    out = gpu_bill(inputs, eager_step_s=wall.eager_median_s if wall else None,
                   compiled_step_s=wall.compiled_median_s if wall else None,
                   verdict=(wall.verdict if wall else None) if figures.speedup else "missing (the compiled run failed)",
                   compile_s=compile_s, compile_from=compile_from)
    device = figures.compiled.device or figures.eager.device
    out.device = device
    if device != "cuda" and out.lines:
        out.lines.append(f"GPU bill: measured on {'the CPU' if device == 'cpu' else device or 'an unknown device'}, "
                               "not a GPU: these figures price a CPU run's step times and speedup in GPU-hours; "
                               "run the trial on the GPU you train on for a GPU's")
    if not inputs.given():
        out.lines = []  # nothing asked: no bill in the text
    return out
