"""A trial's figures in words: the text `compile-lens trial` prints, and the phrases the report reuses.

Pure, no torch; the figures (`trial.figures.TrialFigures`) come from `trial/session.py`.
"""

from __future__ import annotations

import os
from typing import Optional

from ..busy.rule import load_over_cores
from ..trial.figures import Machine, RunBreak, RunFigures, TrialFigures
from . import settings_text
from .remote_cache_words import trial_miss_words, trial_remote_words
from .trial_shapes_text import shape_lines
from .units import MISSING_TEXT, MS_UNDER_10S, duration, format_bytes


def break_text(b: RunBreak) -> str:
    """A break's type; for a break torch reported inside a library, where (the break itself is at the
    program's line that called it); for a break in a loop, what it costs (the whole frame runs eagerly)."""
    text = b.reason or ""
    inside = b.inside
    if inside and b.where:
        reported = ("" if inside["reported"] == inside["where"] else
                    f"; torch reports it at {inside['reported_shown']}")
        text += (f" — inside `{inside['function']}` ({inside['shown']}{reported}), called from "
                 f"{os.path.basename(b.where.rpartition(':')[0])}:{b.where.rpartition(':')[2]}")
    loop = b.loop
    if loop:
        text += (f" — inside the loop at {os.path.basename(loop['where'])}: torch skips the whole "
                 f"`{loop['skipped']}`, which runs eagerly")
    return text


def untimed(figures: RunFigures) -> str:
    """What the warm-up time leaves out, if anything."""
    left = figures.untimed_steps
    if not left:
        return ""
    return (f" (step{'s' if len(left) > 1 else ''} {', '.join(map(str, left))} not timed: the model was found "
            "at its end)")


def none_timed(figures: RunFigures) -> bool:
    """No warm-up step has a time: a library model's eager run, where step 0 is the only one."""
    warm = figures.warmup_steps
    return bool(warm) and set(warm) <= set(figures.untimed_steps)


def cache_run_lines(figures: TrialFigures) -> list[tuple[str, bool]]:
    """The runs meant to be served (`--cache-artifact`, `--remote-cache`) in words, each line with whether
    it warns (what the text prints and the report lists)."""
    lines: list[tuple[str, bool]] = []
    artifact = figures.artifact
    if artifact:
        warm = artifact.compile_time
        if artifact.path and warm:
            lines.append((f"compile time warm from the cache artifact: {warm.total_s:.1f} s in a fresh process "
                          f"({artifact.path}, {format_bytes(artifact.bytes)}: ship it with the job)", False))
        else:
            lines.append((f"cache artifact: not measured: {artifact.note}", False))
        if (why := trial_miss_words(artifact, "cache artifact")) is not None:
            lines.append((why, True))
    if (served := trial_remote_words(figures.remote_cache)) is not None:
        lines.append((served, False))
        if (why := trial_miss_words(figures.remote_cache, "remote cache")) is not None:
            lines.append((why, True))
    return lines


def busy_before(figures: TrialFigures) -> Optional[str]:
    """The machine's load before the trial when it was above its CPUs: the step times are noisy."""
    machine = figures.machine or Machine()
    cpus, load = machine.cpus or 0, machine.load_before
    if load is not None and load_over_cores(load, cpus):
        return (f"the machine was busy before the trial (load {load:.1f} on {cpus} CPUs): "
                "step times are noisy; compare on a quiet machine before deciding")
    return None


def _steady(figures: RunFigures) -> str:
    steady = figures.steady
    if not steady:
        return "no steady-state steps"
    w, h = steady.wall_s, steady.hook_s

    def t(seconds: Optional[float]) -> str:
        return duration(seconds, MS_UNDER_10S, MISSING_TEXT)

    return (f"steady {t(w.median)}/step wall (IQR {t(w.q1)}–{t(w.q3)}, n={w.n}), "
            f"{t(h.median if h else None)} in model+backward+step")


def render_text(summary: TrialFigures) -> str:
    eager, compiled = summary.eager, summary.compiled
    lines = [f"compile-lens trial: {summary.command}"]
    for name, figures in (("eager", eager), ("compiled", compiled)):
        if not figures.ran:
            lines.append(f"  {name:8} did not run: {figures.failure.message if figures.failure else '?'}")
            continue
        warm = f"warm-up steps {figures.warmup_steps} " + (
            "not timed (the model was found at the end of step 0)" if none_timed(figures)
            else f"took {duration(figures.warmup_wall_s, MS_UNDER_10S, MISSING_TEXT)}{untimed(figures)}")
        lines.append(f"  {name:8} {len(figures.steps)} steps; {warm}; {_steady(figures)}")
        memory = figures.peak_memory_bytes
        method = (figures.memory_method or "method unknown").split(":")[0]  # the JSON has it whole
        lines.append(f"  {'':8} peak memory: " + (f"{format_bytes(memory)} ({method})" if memory is not None
                                                   else str(figures.memory_note)))
    if eager.ran and not eager.steps and not eager.failure:
        lines.append("  no step was seen: no optimizer.step() (or, with --step-on forward, no call of a module "
                     "defined under the workspace root)")
    if compiled.ran and not compiled.outermost_modules and not summary.compile_time:
        lines.append("  nothing was compiled: no nn.Module defined under the workspace root was built, no module "
                     "held the optimizer's parameters at the end of step 0, and the program compiles nothing "
                     "itself (--root sets the workspace)")
    elif compiled.outermost_found_late:
        how = ("timed from step 1, compiled by the program's own torch.compile" if compiled.compiled_by_program
               else "compiled and timed from step 1")
        lines.append(f"  the model ({', '.join(compiled.outermost_modules)}) is a library's: found at the end "
                     f"of step 0 as the module holding the optimizer's parameters, {how}")
    failure = compiled.failure
    if failure:
        lines.append(f"  COMPILED RUN FAILED at step {failure.step}: {failure.message}"
                     + (f" ({failure.where})" if failure.where else ""))
    if eager.failure:
        lines.append(f"  eager run failed at step {eager.failure.step}: {eager.failure.message}")
    ct = summary.compile_time
    if ct:
        caches = "empty Inductor caches" if summary.cold else "Inductor caches as this machine has them"
        lines.append(f"  compile time in the run: {ct.total_s:.1f} s over {ct.compiles} frame compiles "
                     f"(in steps {ct.steps}; {caches})")
    lines += settings_text.trial_lines(summary.compile_settings)
    lines += [("    " if warns else "  ") + text for text, warns in cache_run_lines(summary)]
    if (busy := busy_before(summary)) is not None:
        lines.append(f"  note: {busy}")
    ratio = summary.wall
    if ratio:
        why = f": {ratio.why}" if ratio.why else ""
        lines.append(f"  speedup at steady state: {ratio.ratio:.2f}x per step ({ratio.verdict}{why})")
    if summary.payback:
        lines.append(f"  payback: {summary.payback.text}")
    lines.append(f"  loss: {summary.loss.text}")
    breaks, recs = summary.graph_breaks, summary.recompiles
    lines.append(f"  graph breaks in the run: {len(breaks)}")
    for b in breaks:
        lines.append(f"    {b.where}  {b.gb or ''} {break_text(b)}  (step {b.step}, inputs {b.shapes})")
    lines.append(f"  recompiles in the run: {len(recs)}")
    for r in recs:
        at = f" at {r.where}" if r.where else ""
        said = f"{r.meaning} (torch's guard: {r.reason})" if r.meaning else r.reason
        lines.append(f"    {r.function}{at}: {said}  (step {r.step}, inputs {r.shapes})")
    lines += shape_lines(summary)
    if summary.cost:
        lines += ["  " + line for line in summary.cost.lines]
    return "\n".join(lines)
