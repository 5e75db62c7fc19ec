"""The report's section for a `compile-lens trial` of the user's own training run. Pure; no torch.

From the saved trial (`trial.store`'s document) and its bill (`trial.summary.bill` with the
reader's settings): time per step eager vs compiled (warm-up apart, steady-state median and
quartiles), peak memory, loss agreement, the graph breaks and recompiles of the real run, compile
time, the payback step, the GPU bill; and one inline SVG chart — cumulative cost eager vs compiled
over a month when the bill has a money figure, else cumulative wall time over the measured steps.
An inconclusive speedup gives no money figure, and the section says why.
"""

from __future__ import annotations

from typing import Any, Optional

from ..cost import Bill
from ..trial.figures import RunFigures, TrialFigures, TrialRecord
from ..trial.summary import step_times
from .cards import money
from .html_parts import _e, _finite, _Page, _x, code_spans, nice_ticks, y_grid
from .report_ranks import ranks_part
from .report_shapes import shapes_part
from .trial_text import break_text, busy_before, cache_run_lines, none_timed, untimed
from .units import STEP, duration, format_bytes

DAYS = 30
WARN = ' class="warn"'  # a line that warns (a miss, a bill measured off the GPU)


def _steady(figures: RunFigures, key: str) -> str:
    q = getattr(figures.steady, key) if figures.steady else None
    if not q:
        return "–"
    return f"{duration(q.median, STEP)} <span class=\"sub\">(IQR {duration(q.q1, STEP)}–{duration(q.q3, STEP)}, n={q.n})</span>"


def _warmup(figures: RunFigures) -> str:
    warm = figures.warmup_steps
    if not warm:
        return "–"
    shown = ", ".join(str(i) for i in warm[:8]) + (" …" if len(warm) > 8 else "")
    if none_timed(figures):
        return '<span class="muted">not timed</span> <span class="sub">(step 0: the model was found at its end)</span>'
    return (f"{duration(figures.warmup_wall_s, STEP)} <span class=\"sub\">(step{'s' if len(warm) != 1 else ''} {_e(shown)})"
            f"{_e(untimed(figures))}</span>")


def _memory(figures: RunFigures) -> str:
    peak = figures.peak_memory_bytes
    if peak is not None:
        method = figures.memory_method or "method unknown"
        return f'<span title="{_e(method)}">{_e(format_bytes(peak))}</span> <span class="sub">({_e(method.split(":")[0])})</span>'
    return f'<span class="muted">{_e(figures.memory_note or "not measured")}</span>'


def _run_table(eager: RunFigures, compiled: RunFigures) -> str:
    rows = [("steps run", lambda f: str(len(f.steps)) if f.ran else "did not run"),
            ("warm-up steps (step 0, and compiles), wall", _warmup),
            ("steady state per step, wall", lambda f: _steady(f, "wall_s")),
            ("… of it model + backward + optimizer step", lambda f: _steady(f, "hook_s"))]
    head = "<tr><th></th><th>eager</th><th>compiled</th></tr>"
    body = "".join(f'<tr><td>{_e(label)}</td><td class="num">{cell(eager)}</td><td class="num">{cell(compiled)}</td></tr>'
                   for label, cell in rows)
    if eager.peak_memory_bytes is None and compiled.peak_memory_bytes is None:
        body += f'<tr><td>peak memory</td><td colspan="2">{_memory(eager)}</td></tr>'  # one note for both
    else:
        body += f'<tr><td>peak memory</td><td class="num">{_memory(eager)}</td><td class="num">{_memory(compiled)}</td></tr>'

    return f'<div class="scroll"><table class="trial">{head}{body}</table></div>'


def _verdict(figures: TrialFigures) -> str:
    wall = figures.wall
    failure = figures.compiled.failure
    if failure:
        where = f" ({failure.where})" if failure.where else ""
        return (f'<p class="bad"><b>The compiled run failed at step {_e(failure.step)}</b>: '
                f'{_e(failure.message)}{_e(where)}. The eager figures above still hold.</p>')
    if not wall:
        return '<p class="muted">No steady-state steps in both runs: no speedup to state.</p>'
    if wall.verdict == "inconclusive":
        return (f'<p class="warn"><b>Speedup per step: inconclusive</b> (medians {duration(wall.eager_median_s, STEP)} eager, '
                f'{duration(wall.compiled_median_s, STEP)} compiled, but {_e(wall.why or "their quartile ranges overlap")}): '
                "more steps or a quieter machine may settle it. No payback projection and no money figure from it.</p>")
    cls = "good" if wall.verdict == "faster" else "bad"
    return (f'<p><b class="{cls}">{_x(wall.ratio)} per step</b> at steady state ({_e(wall.verdict)}: '
            f'{duration(wall.eager_median_s, STEP)} eager vs {duration(wall.compiled_median_s, STEP)} compiled, wall time, quartile ranges '
            "apart).</p>")


def _facts(page: _Page, figures: TrialFigures) -> str:
    items = []
    ct = figures.compile_time
    if ct:
        caches = "empty Inductor caches" if figures.cold else "Inductor caches as the machine had them"
        items.append(f"<li>compile time in the run: <b>{duration(ct.total_s)}</b> over {ct.compiles} frame compiles "
                     f"(in steps {_e(', '.join(map(str, ct.steps)))}; {caches})</li>")
    else:
        items.append('<li>compile time: <span class="muted">nothing was compiled in the run</span></li>')
    items += [f"<li{WARN if warns else ''}>{_e(text)}</li>" for text, warns in cache_run_lines(figures)]
    if figures.payback:
        items.append(f"<li>payback: {_e(figures.payback.text)}</li>")
    loss = figures.loss
    cls = {"match": "good", "diverge": "bad", "not-deterministic": "warn", "random": "warn"}.get(loss.verdict, "muted")
    items.append(f'<li>loss: <span class="{cls}">{_e(loss.text)}</span></li>')
    if (busy := busy_before(figures)) is not None:
        items.append(f'<li class="warn">{_e(busy)}</li>')
    return "<ul>" + "".join(items) + "</ul>"


def _where(page: _Page, where: Optional[str]) -> str:
    if not where:
        return '<span class="muted">?</span>'
    path, _, line = where.rpartition(":")
    return page.loc(path, int(line)) if line.isdigit() and path else f"<code>{_e(where)}</code>"


def _events(page: _Page, figures: TrialFigures) -> str:
    breaks, recs = figures.graph_breaks, figures.recompiles
    out = [f"<h3>Graph breaks in the run: {len(breaks)}</h3>"]
    if breaks:
        out.append("<ul>" + "".join(
            f"<li>{_where(page, b.where)} <span class=\"gb\">{_e(b.gb or '')}</span> {_e(break_text(b))} "
            f"<span class=\"sub\">(step {_e(b.step)}, inputs {_e(b.shapes)})</span></li>" for b in breaks) + "</ul>")
    out.append(f"<h3>Recompiles in the run: {len(recs)}</h3>")
    if recs:
        out.append("<ul>" + "".join(
            f"<li><code>{_e(r.function)}</code>{' at ' + _where(page, r.where) if r.where else ''}: "
            + (f"{code_spans(r.meaning)} <span class=\"sub\">(torch's guard: <code>{_e(r.reason)}</code>)</span> "
               if r.meaning else f"{_e(r.reason)} ") +
            f"<span class=\"sub\">(step {_e(r.step)}, inputs {_e(r.shapes)})</span></li>" for r in recs) + "</ul>")
    return "".join(out)


def _bill(bill: Optional[Bill]) -> str:
    if not bill or not (bill.lines or bill.money_saved_per_month is not None):
        return ('<p class="muted">GPU bill: no price set (<code>--gpu-price</code>, '
                "<code>bill.gpuPricePerHour</code> in [tool.compile-lens] or the editor's settings): no money shown.</p>")
    return "<ul>" + "".join(f"<li{WARN if 'not a GPU' in line else ''}>{_e(line.removeprefix('GPU bill: '))}</li>"
                            for line in bill.lines) + "</ul>"


# --- the chart ----------------------------------------------------------------------------------

def _line_chart(title: str, series: list[tuple[str, str, list[tuple[float, float]]]], x_label: str,
                y_label: Any, x_max: float, marker: Optional[tuple[float, str]] = None) -> str:
    """Lines over a shared x axis from 0: an inline <svg>. `y_label(value)` writes a tick."""
    width, height = 560, 280
    left, right, top, bottom = 72, 16, 40, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    highest = max((y for _, _, pts in series for _, y in pts), default=0.0)
    ticks = nice_ticks(highest * 1.05)
    y_max = ticks[-1] or 1.0
    x_ticks = nice_ticks(x_max, 5)
    x_top = x_ticks[-1] or 1.0

    def x_at(x: float) -> float:
        return left + plot_w * x / x_top

    def y_at(y: float) -> float:
        return top + plot_h * (1 - y / y_max)

    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">',
             f'<text class="title" x="8" y="18">{_e(title)}</text>']
    parts += y_grid(ticks, y_at, left, width - right, y_label)
    for tick in x_ticks:
        parts.append(f'<text class="axis" x="{x_at(tick):.1f}" y="{top + plot_h + 16}" text-anchor="middle">'
                     f"{tick:g}</text>")
    parts.append(f'<text class="axis" x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">{_e(x_label)}</text>')
    if marker is not None:
        x = x_at(marker[0])
        parts.append(f'<line class="grid marker" x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + plot_h}"/>'
                     f'<text class="axis strong" x="{x + 4:.1f}" y="{top + 12}">{_e(marker[1])}</text>')
    lx = width - right - 200
    for i, (name, cls, pts) in enumerate(series):
        parts.append(f'<polyline class="line {cls}" points="{" ".join(f"{x_at(x):.1f},{y_at(y):.1f}" for x, y in pts)}">'
                     f"<title>{_e(name)}</title></polyline>")
        parts.append(f'<rect class="swatch {cls}" x="{lx + i * 100}" y="9" width="12" height="4"/>'
                     f'<text class="axis" x="{lx + i * 100 + 16}" y="15">{_e(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def money_chart(bill: Bill) -> Optional[str]:
    """Cumulative cost over a month, eager vs compiled (the migration paid on day 0); None without money."""
    price = bill.inputs.price_per_gpu_hour
    eager_h, compiled_h = _finite(bill.eager_hours_per_month), _finite(bill.compiled_hours_per_month)
    if price is None or eager_h is None or compiled_h is None or bill.money_saved_per_month is None:
        return None
    gpus = max(1, int(bill.inputs.gpus or 1))
    start = _finite(bill.migration_cost) or 0.0
    eager = [(d, eager_h * gpus * price * d / DAYS) for d in (0, DAYS)]
    compiled = [(d, start + compiled_h * gpus * price * d / DAYS) for d in (0, DAYS)]
    marker = None
    months = _finite(bill.payback_months)
    if months is not None and months * DAYS <= DAYS:
        marker = (months * DAYS, f"pays back: day {months * DAYS:.0f}")
    return _line_chart("Cumulative GPU cost over a month", [("eager", "s-eager", eager), ("compiled", "s-compiled", compiled)], "days",
                       lambda v: money(v) if v else "0", DAYS, marker)


def time_chart(figures: TrialFigures) -> Optional[str]:
    """Cumulative wall time over the measured steps, eager vs compiled; None with no steps."""
    series = []
    ratio = figures.wall
    for name, cls, run in (("eager", "s-eager", figures.eager), ("compiled", "s-compiled", figures.compiled)):
        total, pts = 0.0, [(0.0, 0.0)]
        for i, seconds in enumerate(step_times(run, ratio)):
            total += _finite(seconds) or 0.0
            pts.append((float(i + 1), total))
        series.append((name, cls, pts))
    n = max(len(pts) - 1 for _, _, pts in series)
    if n == 0:
        return None
    paid = figures.payback
    marker = (paid.step + 1, f"ahead from step {paid.step}") if paid and paid.measured and paid.step is not None else None
    return _line_chart("Cumulative wall time over the run's steps", series, "steps", lambda v: duration(v) if v else "0",
                       float(n), marker)


def old_trial_section(note: str) -> str:
    """Where the trial's section would be, when trial.json is one this version cannot read (`store.load`)."""
    return ("<section><h2>Your training run: eager vs compiled (<code>compile-lens trial</code>)</h2>"
            f'<p class="warn">{_e(note)}</p></section>')


def trial_section(page: _Page, trial: TrialRecord, bill: Optional[Bill]) -> str:
    """The `<section>` of the report for one saved trial."""
    figures = trial.figures
    eager, compiled = figures.eager, figures.compiled
    device = compiled.device or eager.device or "?"
    modules = trial.targets or compiled.outermost_modules
    out = ["<section><h2>Your training run: eager vs compiled (<code>compile-lens trial</code>)</h2>",
           f'<p class="meta"><code>{_e(trial.command or figures.command)}</code> · {_e(trial.at)} · '
           f"{_e(device)} · torch {_e(compiled.torch or eager.torch or '?')}"
           + (f" · compiled: {_e(', '.join(modules))}" if modules else "") + "</p>",
           _verdict(figures), _run_table(eager, compiled), _facts(page, figures)]
    chart = money_chart(bill) if bill else None
    caption = "cost = GPU-hours × GPUs × price; compiled adds the compile at every process start" + (
        f" and starts with the migration's cost ({money(bill.migration_cost)})" if bill and bill.migration_cost else "")
    if chart is None:
        chart = time_chart(figures)
        caption = ("the measured steps: warm-up (compiles) shows as the compiled run's early climb"
                   + ("; no money figure: the speedup is inconclusive"
                      if figures.wall and figures.wall.verdict == "inconclusive" else ""))
    if chart:
        out.append(f'<div class="charts"><figure>{chart}<figcaption>{_e(caption)}</figcaption></figure></div>')
    out.append("<h3>The GPU bill</h3>" + _bill(bill))
    out.append(_events(page, figures))
    out.append(shapes_part(figures))
    out.append(ranks_part(page, figures))  # torchrun: rank by rank
    out.append("</section>")
    return "".join(out)
