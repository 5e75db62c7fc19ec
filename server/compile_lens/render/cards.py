"""Measured figures → the words the editor shows (CodeLens title, inlay hint, hover card). Pure."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
import urllib.parse
from typing import Iterable, Optional

from ..busy.rule import top_words
from ..cost import Bill
from ..protocol import (
    LEVERS,
    Benchmark,
    ContentionReport,
    ExportCheck,
    FallbackOp,
    Lever,
    Report,
    TargetResult,
    Timing,
    phase_of,
)
from ..speed_words import direction, speed_words
from ..trial.figures import ShapeRow, TrialRecord
from . import settings_text
from .findings import break_count_text, recompile_findings
from .lens_titles import inconclusive_reason
from .levers_text import lever_line
from .line_costs import hint_label as line_label
from .line_costs import launch_bound, no_finding
from .phases import phase_states
from .precision import precision_words
from .progress_rows import LABELS, MEASURE_PARTS, UNMEASURED_KEYS, RowState
from .remote_cache_words import warm_remote_words
from .units import duration, format_bytes


def _x(speedup: float) -> str:
    return f"{speedup:.2f}×"


def age(measured_at: float, now: Optional[float] = None) -> str:
    seconds = max(0.0, (now or time.time()) - measured_at)
    if seconds < 90:
        return "just now"
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return "just now"


def speed(t: Timing) -> str:
    """`faster: 1.36–1.49× (median 1.42×)` for a conclusive figure (`speed_words`); `inconclusive`
    otherwise — never a bare noisy ratio."""
    return speed_words(t)


def interval(t: Timing) -> str:
    """`95% CI 1.35–1.50×`, or "" when there is none."""
    if not t.speedup_ci or not all(math.isfinite(v) for v in t.speedup_ci):
        return ""
    lo, hi = t.speedup_ci
    return f"95% CI {lo:.2f}–{hi:.2f}×"


def line_cost_lines(b: Benchmark, levers: Iterable[Lever] = ()) -> list[str]:
    """The card's line-cost bullets: a launch-bound compiled call (the CUDA-graphs lever: what it
    measured, where the target's `levers` has it), and a line table that is no finding (`Timing.lines_caveat`)."""
    out = []
    for label, t in (("forward", b.forward), ("train step", b.train_step)):
        if t is None:
            continue
        bound = launch_bound(t, label, levers)
        if bound:
            out.append(f"- ⚠ {_md(bound, 400)}")
        caveat = no_finding(t) if t.lines else None
        if caveat:
            out.append(f"- line costs ({label}): {_md(caveat, 300)}")
    return out


def contention_line(b: Benchmark) -> str:
    """`12 paired rounds; other processes used 180% CPU meanwhile (2 CPUs): pytest 95%; our own
    processes used 30%; 0 other processes on the GPU`, and what the busy rule could not read."""
    main = b.train_step or b.forward
    c = b.contention or ContentionReport()
    parts = [f"{main.rounds} paired rounds" if main.rounds else "paired rounds"]
    if c.other_cpu_percent is not None:
        named = top_words(c.top, ours=False)
        parts.append(f"other processes used {c.other_cpu_percent:.0f}% CPU meanwhile ({c.cpus} CPUs)"
                     + (f": {named}" if named else ""))
    if (c.own_cpu_percent or 0) >= 1:
        named = top_words(c.top, ours=True)
        parts.append(f"our own processes used {c.own_cpu_percent:.0f}%" + (f": {named}" if named else ""))
    if c.rule == "cuda" and c.launch_wait_percent is not None:
        parts.append(f"the launching thread waited for a core {c.launch_wait_percent:.0f}% of the time")
    gpu = c.gpu_other_processes
    if gpu is not None:
        parts.append(f"{gpu} other process{'es' if gpu != 1 else ''} on the GPU")
    parts += [f"not read: {u}" for u in c.unknown]
    if c.declared_quiet:  # a test's figures: said, so that none passes for an idle machine's
        parts.append("every round counted: a test declared the machine quiet"
                     + (" (the busy rule saw it busy)" if c.busy_by_rule else "")
                     + ("; timed on the thread's CPU clock" if c.clock else ""))
    return "; ".join(parts)


# Plain CommonMark (tables as GFM), readable as raw text in any client: no HTML entities. VS Code
# draws hover tables without cell padding, so the columns are kept apart by their alignment and
# the arrow, not by spaces (a cell's spaces, non-breaking ones too, are trimmed).
TABLE_HEAD = ["| | eager ms (median ± IQR of rounds) | → compiled ms | speedup |", "|---|---:|:---|:---:|"]


def _row(name: str, t: Optional[Timing]) -> str:
    if t is None:
        return f"| {name} | – | → – | – |"
    shown = f"**{speed(t)}**" if direction(t) else "**inconclusive**" + (f" ({interval(t)})" if interval(t) else "")
    return (f"| {name} | {t.eager_ms:.3f} ± {t.eager_iqr_ms:.3f} | → {t.compiled_ms:.3f} ± {t.compiled_iqr_ms:.3f} "
            f"| {shown} |")


def _err(value: Optional[float]) -> str:
    return "–" if value is None else ("0" if value == 0 else f"{value:.2e}")


REPORT_LINK = "[Open the compile report](command:compileLens.showReport)"  # for clients that run it


def report_hint(path: str) -> str:
    """The hover's last line for clients without the report command: the same page from a terminal."""
    return f"Compile report: `compile-lens report {path}`"
_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|#"})


_CODE_SPAN = re.compile(r"(`[^`]+`)")


def _md(text: str, limit: int = 160) -> str:
    """Plain text for the card: markdown's special characters escaped, except inside the text's own
    `code spans`, which stay code (an escape inside a code span would show its backslash)."""
    text = " ".join(text.split())
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    parts = _CODE_SPAN.split(text)
    return "".join(part if k % 2 else part.translate(_MD_SPECIAL) for k, part in enumerate(parts))


def _code(text: str, limit: int = 160) -> str:
    """A code span: backslash escapes would show literally inside one (CommonMark), so the text is
    left as it is and fenced with more backticks than it holds."""
    text = " ".join(text.split())
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _where(export: ExportCheck) -> str:
    line, path = export.line, export.path
    if line is None:
        return ""
    return f" at `{os.path.basename(path)}:{line}`" if path else f" at line {line}"


EXPORT_PART, FALLBACK_PART = "torch.export", "fallback ops"  # their names in `TargetResult.unmeasured`


def export_line(export: Optional[ExportCheck], unmeasured: Optional[dict[str, str]] = None) -> Optional[str]:
    """`torch.export: ✓ …` / `✗ fails at line N: …` / `not measurable: …` for the hover card; None
    when not checked."""
    if unmeasured and EXPORT_PART in unmeasured:
        return f"- torch.export: {_md(unmeasured[EXPORT_PART], 300)}"
    if not export:
        return None
    if export.ok and export.strict:
        return "- torch.export: ✓ exports (strict and non-strict)"
    if export.ok and export.strict is None:  # the budget had no room for strict's trace
        return "- torch.export: ✓ exports non-strict (strict not checked: the budget)"
    why = _md((export.message or "").removeprefix("strict export fails: "))
    if export.ok:
        return f"- torch.export: ✓ exports non-strict; strict export fails{_where(export)}" + (f": {why}" if why else "")
    return f"- torch.export: ✗ fails{_where(export)}" + (f": {why}" if why else "")


def _ops(ops: list[FallbackOp]) -> str:
    return ", ".join(f"`{o.op}` ×{o.count}" for o in ops)


def fallback_line(ops: list[FallbackOp], report: Optional[Report] = None,
                  unmeasured: Optional[dict[str, str]] = None) -> Optional[str]:
    """Ops Inductor runs through eager ATen kernels, and its library calls, apart; None when unknown."""
    if unmeasured and FALLBACK_PART in unmeasured:
        return f"- ops that fall back to eager: {_md(unmeasured[FALLBACK_PART], 300)}"
    fallbacks = [o for o in ops if o.kind == "fallback"]
    library = [o for o in ops if o.kind == "extern"]
    if not ops and not (report and report.kernels is not None):
        return None
    text = "- ops that fall back to eager: " + (_ops(fallbacks) if fallbacks else "none")
    if library:
        text += f" · library calls (not generated code): {_ops(library)}"
    return text


def left_out_line(names: list[str], most: int = 4) -> str:
    """Optional arguments the example call leaves out: the traced path may not be training's."""
    shown = ", ".join(f"`{n}`" for n in names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")
    return f"- called without {shown} (optional): the traced path may differ from the one training takes"


_MARKS = {"done": "✓", "failed": "✗", "not-run": "–"}


def phase_line(result: TargetResult, b: Optional[Benchmark], measuring: bool = False) -> str:
    """`✓ traced · ✓ recompiles checked · ✗ measurement failed: …`: what ran, what did not, and why."""
    states = phase_states(result if b is None or result.benchmark is not None else dataclasses.replace(result, benchmark=b))
    parts = []
    for state in states:
        if state.name == "measure" and measuring and b is None:
            parts.append("⏳ measuring…")
        else:
            parts.append(f"{_MARKS.get(state.status, '')} {_md(state.words, 200)}")
    return " · ".join(parts)


def money(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def trial_line(trial: Optional[TrialRecord], bill: Optional[Bill] = None) -> Optional[str]:
    """`- measured in your run: 1.31× per step, pays back after 410 steps` from a saved
    `compile-lens trial` (trial.store's record), with the bill's money when it has a figure."""
    if not trial:
        return None
    figures = trial.figures
    compiled = figures.compiled
    steps = len(compiled.steps)
    head = f"- measured in your run ({_code(trial.command or 'compile-lens trial', 60)}, {trial.at or '?'})"
    failure = compiled.failure
    if failure:
        return f"{head}: ✗ the compiled run failed at step {failure.step}: {_md(failure.message or '', 120)}"
    wall = figures.wall
    if not wall:
        return f"{head}: no steady-state steps to compare ({steps} steps)"
    if wall.verdict == "inconclusive":
        text = f"{head}: per step inconclusive over {steps} steps ({wall.why or 'quartiles overlap'}); no money figure"
    else:
        slower = " (slower)" if wall.verdict == "slower" else ""
        paid = figures.payback
        within = paid.steps_compared if paid and paid.steps_compared is not None else steps
        when = (f"pays back after {paid.step:,} steps" + ("" if paid.measured else " (projected)")
                if paid and paid.step is not None else f"does not pay back within {within} steps")
        text = f"{head}: **{_x(wall.ratio)}** per step{slower}, {when}"
    loss = figures.loss.verdict
    if loss == "match":
        text += "; losses match"
    elif loss == "diverge":
        text += f"; ⚠ losses diverge from step {figures.loss.first_divergent_step}"
    elif loss == "random":
        text += "; losses not comparable (dropout)"
    saved = bill.money_saved_per_month if bill else None
    hours = bill.gpu_hours_saved_per_month if bill else None
    if saved is not None:
        text += f"; {money(abs(saved))} {'saved' if saved >= 0 else 'added'} per month"
        if bill and bill.payback_months is not None:
            text += f", the migration pays back in {bill.payback_months:.1f} months"
    elif hours is not None:
        text += f"; {abs(hours):,.1f} GPU-hours {'saved' if hours >= 0 else 'added'} per month"
    if bill and bill.device not in (None, "cuda") and (hours is not None or saved is not None):
        text += f" (measured on {bill.device}, not a GPU)"
    shapes = shape_hover_line(figures.by_shape)
    settings = settings_text.hover_line(figures.compile_settings)
    return text + ("\n" + shapes if shapes else "") + ("\n" + settings if settings else "")


def hover_card(result: TargetResult, b: Optional[Benchmark], *, guessed_inputs: bool, now: Optional[float] = None,
               measuring: bool = False, report: str = REPORT_LINK, trial: Optional[str] = None,
               stalled: Optional[str] = None, rows: Optional[dict[str, RowState]] = None) -> str:
    """The hover card, read in five seconds: what ran (each phase, while not all did), the verdict, the
    table a team needs to decide, and at most three lines under it (`card_lines`); the rest of a
    measured target's facts (`detail_lines`) are one click away: `report` is the card's last line, the
    link to them (`details_line`). `trial` (`trial_line`) what a `compile-lens trial` of the user's
    program measured (shown on a target not measured here; a measured one's is in its details);
    `stalled`: where the worker analysing it now has been quiet (`worker.stall_watch`);
    `rows` (`render.progress_rows.states`): where each part of the measurement stands — those not measured
    yet are said so until they land, one that failed says why, the figures before it stand."""
    rows = rows or {}
    waiting = [p for p in MEASURE_PARTS if p in rows and rows[p].status == "pending"]
    lines = [f"### torch.compile · `{result.name}`"]
    if result.graph_count is not None:
        recompiles = len(recompile_findings(result, ""))  # as many as the editor shows
        lines.append(break_count_text(len(result.graph_breaks), result.graph_count)
                     + (f", {recompiles} recompile warning{'s' if recompiles != 1 else ''}" if recompiles else ""))
    states = phase_states(result if b is None else dataclasses.replace(result, benchmark=b))
    if b is None or not all(state.status == "done" for state in states):  # all ✓: the verdict says it
        lines.append(f"\n{phase_line(result, b, measuring)}")
    if stalled:
        lines.append(f"\n⏳ no progress now: {stalled}")
    recipe = result.inputs
    guessed = f" — **guessed** {(recipe.origin if recipe else '') or 'from the first layer'}; write them as a directive to be sure"
    if b is None:
        if recipe is not None and recipe.text:
            lines.append(f"\n- inputs: `{recipe.text}`" + (guessed if guessed_inputs else f" (from the {recipe.source})"))
        elif recipe is not None and recipe.after_import:
            # discovery stopped at a library layer it calls ("first reaches"), or at a base class
            # it cannot read: say which, not a library model it may not wrap
            source = "the library model it wraps" if "first reaches" in recipe.note else "the class it derives from"
            lines.append(f"\n- inputs: to be guessed after import from {source} (not traced yet)")
        if result.left_out:
            lines.append(left_out_line(result.left_out))
        measure = phase_states(result)[2]
        if measure.status == "not-run" and measure.error is None and not measuring:
            lines.append("\nNot measured yet: use the **▶ Measure** lens above the target.")
        lines += _part_lines(result, None, rows, waiting)
        if trial:
            lines.append(trial)
        lines += ["", report]
        return "\n".join(lines)
    if waiting:  # the measurement runs still: what is to come, said above the figures so far
        lines.append(f"\n⏳ not measured yet: {', '.join(LABELS[p] for p in waiting)}")
    # the figures are named with what they ran in (autocast, TF32), as the report's verdict row
    shown = f"**{b.verdict}**" + (f" · precision {_md(precision_words(b.precision), 200)}" if b.precision else "")
    lines += ["", shown, "", *TABLE_HEAD, _row("forward", b.forward), _row("train step", b.train_step)]
    chosen = card_lines(result, b, waiting)
    if chosen:
        lines += ["", *chosen]
    lines += ["", report]
    return "\n".join(lines)


def card_lines(result: TargetResult, b: Benchmark, waiting: Iterable[str] = ()) -> list[str]:
    """The at most three lines the card shows under its table, for a user deciding whether to compile:
    1. what compiling costs and when it pays back (always);
    2. the one warning that changes the decision, the most decisive present: a difference in the
       outputs beyond tolerance (accuracy, where it drifts), then a graph break, then a recompile,
       then a timing that is inconclusive, with its one-line why; none when none applies;
    3. the costliest line of the line costs (the verdict's workload's, else the forward's), when measured.
    Everything else is in `detail_lines`, one click away (the report at this target)."""
    return [line for line in (_cost_line(b, waiting), _decisive_warning(result, b), _costliest_line(b)) if line]


def _cost_line(b: Benchmark, waiting: Iterable[str] = ()) -> str:
    paid = ("pays back: not known until the train step is measured" if "train_step" in waiting
            else f"pays back after {b.break_even_calls:,} calls" if b.break_even_calls is not None
            else "never pays back (compiled is not faster)" if (b.train_step or b.forward).conclusive
            else "pays back: unknown until the timing is conclusive")
    return f"- compile {duration(b.compile_s.cold)} cold, {duration(b.compile_s.warm)} warm · {paid}"


def _decisive_warning(result: TargetResult, b: Benchmark) -> Optional[str]:
    """`card_lines`' second line: the first of accuracy, graph break, recompile, inconclusive timing."""
    def note(*heads: str) -> Optional[str]:
        return next((n for n in b.notes if n.startswith(heads)), None)

    accuracy = note("accuracy drift:") or note("accuracy:")  # where it drifts says more than by how much
    if accuracy:
        return f"- ⚠ {_md(accuracy, 200)}"
    if result.graph_breaks:
        g = result.graph_breaks[0]
        more = f" (and {len(result.graph_breaks) - 1} more)" if len(result.graph_breaks) > 1 else ""
        return (f"- ⚠ graph break{more}: {g.gb_id} {_md(g.gb_type, 120)} at `{os.path.basename(g.path)}:{g.line}`"
                " — the code after it runs eagerly")
    broke = note("graph breaks:")
    if broke:
        return f"- ⚠ {_md(broke, 200)}"
    recompiles = recompile_findings(result, "")
    if recompiles:
        more = f" (and {len(recompiles) - 1} more)" if len(recompiles) > 1 else ""
        return f"- ⚠ recompile{more}: {_md(recompiles[0].message, 200)}"
    recompiled = note("recompiles:")
    if recompiled:
        return f"- ⚠ {_md(recompiled, 200)}"
    if not (b.train_step or b.forward).conclusive:
        return f"- ⚠ timing inconclusive: {_md(inconclusive_reason(b), 200)}"
    return None


def _costliest_line(b: Benchmark) -> Optional[str]:
    """`- costliest line (train step): `model.py:17` train 0.81 ms → 0.20 ms · fused ×3`."""
    for label, t in (("train step", b.train_step), ("forward", b.forward)):
        if t is not None and t.lines and not t.lines_note:
            top = t.lines[0]  # costliest first (worker/measure/lines/costs.py)
            return f"- costliest line ({label}): `{os.path.basename(top.path)}:{top.line}` {_md(line_label(top, t))}"
    return None


def detail_lines(result: TargetResult, b: Benchmark, *, guessed_inputs: bool, now: Optional[float] = None,
                 trial: Optional[str] = None, rows: Optional[dict[str, RowState]] = None) -> list[str]:
    """Every fact of a measured target the card leaves out (`card_lines`), as markdown bullets: what
    the report shows under this target's Details; the card's own lines too, so the list stands alone."""
    rows = rows or {}
    waiting = [p for p in MEASURE_PARTS if p in rows and rows[p].status == "pending"]
    recipe = result.inputs
    guessed = f" — **guessed** {(recipe.origin if recipe else '') or 'from the first layer'}; write them as a directive to be sure"
    memory = (f"- peak memory: eager {format_bytes(b.peak_memory_bytes.eager)}, compiled "
              f"{format_bytes(b.peak_memory_bytes.compiled)}"
              f" ({_md(b.peak_memory_bytes.method or 'method unknown', 300)})")
    lines = [
        f"- compile: {duration(b.compile_s.cold)} cold, {duration(b.compile_s.warm)} with warm caches"
        + (f", {remote} on a fresh machine" if (remote := warm_remote_words(b)) else ""),
        ("- pays back: not known until the train step is measured" if "train_step" in waiting
         else f"- pays back after {b.break_even_calls:,} calls" if b.break_even_calls is not None
         else "- never pays back (compiled is not faster)" if (b.train_step or b.forward).conclusive
         else "- pays back: unknown until the timing is conclusive"),
        "- peak memory: not measured yet" if "memory" in waiting else memory,
        f"- largest difference: output {_err(b.max_abs_error.output)} abs / {_err(b.max_rel_error.output)} rel, "
        f"gradients {_err(b.max_abs_error.grad)} abs",
        f"- {b.device_name} ({b.device}) · torch {b.torch} · mode `{b.mode or 'default'}`"
        + (f" · precision {_md(precision_words(b.precision, detail=True), 300)}" if b.precision else ""),
        f"- timing: {contention_line(b)}",
        f"- inputs: `{b.inputs or (result.inputs.text if result.inputs else '?')}`"
        + (guessed if guessed_inputs else ""),
        *([left_out_line(result.left_out)] if result.left_out else []),
        f"- measured {age(b.measured_at, now)}",
    ]
    lines += [line for line in (export_line(result.export, result.unmeasured),
                                fallback_line(result.fallback_ops, result.report, result.unmeasured)) if line]
    lines += [f"- {_md(part)}: {_md(why, 300)}" for part, why in result.unmeasured.items()
              if part not in (EXPORT_PART, FALLBACK_PART)]
    costliest = _costliest_line(b)
    lines += [costliest] if costliest else []
    lines += line_cost_lines(b, result.levers)
    lines += _part_lines(result, b, rows, waiting)
    for note in b.notes:
        lines.append(f"- ⚠ {note}")
    if phase_of(result, LEVERS) is not None:  # "Try levers" ran: each lever in one line
        lines += [f"- lever tried: {_md(lever_line(lever), 300)}" for lever in result.levers] \
            or ["- levers: none applies to this target"]
    if trial:
        lines.append(trial)
    return lines


def _part_lines(result: TargetResult, b: Optional[Benchmark], rows: dict[str, RowState],
                waiting: list[str]) -> list[str]:
    """`- ⏳ not measured yet: train step, peak memory, …`, and the parts that failed (or were not
    run, with a reason) whose why no other line of the card says, those with one why together.
    Without figures the phase line says why the measurement failed: nothing more here."""
    lines = [f"- ⏳ not measured yet: {', '.join(LABELS[p] for p in waiting)}"] if waiting else []
    if b is None:
        return lines
    by_why: dict[tuple[str, str], list[str]] = {}
    for part in MEASURE_PARTS:
        state = rows.get(part)
        if state is None or state.status not in ("failed", "not-run") or not state.why:
            continue
        if UNMEASURED_KEYS.get(part) in result.unmeasured:
            continue  # the card's own line for it says why
        head = "not measurable" if state.status == "failed" else "not run"
        by_why.setdefault((head, state.why), []).append(LABELS[part])
    lines += [f"- {', '.join(names)}: {head}: {_md(why, 300)}" for (head, why), names in by_why.items()]
    return lines


# --- the words around the figures in the editor (lens, hover) ---------------------------------

def report_line(client_shows_report: bool, relpath: str) -> str:
    """The hover's last line: a link where the client opens the report itself, else the CLI command."""
    return REPORT_LINK if client_shows_report else report_hint(relpath)


def details_line(client_shows_report: bool, relpath: str, uri: str, target: str) -> str:
    """A measured target's card's last line: `[Details](command:compileLens.showReport?…)`, the report
    opened at this target's details (`detail_lines`), where the client opens the report itself; else
    the CLI command whose page has them."""
    if not client_shows_report:
        return f"Details: `compile-lens report {relpath}`"
    # a command link's arguments: a JSON array, percent-encoded (VS Code's command URIs)
    return f"[Details](command:compileLens.showReport?{urllib.parse.quote(json.dumps([uri, target]))})"


def shape_hover_line(rows: list[ShapeRow]) -> Optional[str]:
    """The trial per input shape (`trial.shapes.by_shape`): `- by input shape in your run: [8, 16] 11 steps 1.4×; [5, 16] 1 step (warm-up only), 2 recompiles`."""
    if len(rows) < 2:
        return None
    parts = []
    for r in rows[:4]:
        what = f"{r.speedup:.2f}×" if r.speedup is not None else "warm-up only"
        rec = f", {r.recompiles} recompile{'s' if r.recompiles != 1 else ''}" if r.recompiles else ""
        parts.append(f"`{r.signature}` {r.step_count} step{'s' if r.step_count != 1 else ''} {what}{rec}")
    more = f"; {len(rows) - 4} more" if len(rows) > 4 else ""
    return "- by input shape in your run: " + "; ".join(parts) + more
