"""The compile report: one standalone HTML page for a set of `FileReport`s. Pure; no torch.

Used by `compile-lens report PATH -o report.html` and by the editor's report webview
(`compileLens.reportHtml`). Everything is inline — CSS, and charts drawn here as SVG — so the
file opens with no network; the only links out are the graph-break registry pages.

- `for_webview=False`: a page with its own light/dark palette (`prefers-color-scheme`).
  Locations are plain text.
- `for_webview=True`: the palette is VS Code's theme (`var(--vscode-…)`), a strict Content
  Security Policy (`default-src 'none'; style-src 'unsafe-inline'; img-src data:;` and one
  nonce'd script), and locations are links carrying `data-path`/`data-line`/`data-column`: the
  script posts `{type: "open", path, line, column}` to the extension, which opens the file there.

Sections: the targets table (graph breaks, recompiles, forward and train-step speedup, compile
time cold/warm, break-even, memory, accuracy, export, fallback ops, verdict); per measured target,
the latency-vs-batch-size chart and the compile-time breakdown; where the time goes, per line and
per frame (`report_lines`); every graph break with its
location, registry id (linked) and hints; recompiles; other findings; notes.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
import time
from typing import Any, Iterable, Optional

from .. import __version__, codes
from ..cost import Bill, CostInputs
from ..protocol import (
    Benchmark,
    ExportCheck,
    FallbackOp,
    FileReport,
    Finding,
    GraphBreak,
    Report,
    TargetResult,
    Timing,
)
from ..speed_words import direction, speed_words
from ..trial.figures import TrialRecord
from .cards import EXPORT_PART, FALLBACK_PART
from .cli_output import display_path
from .findings import RECOMPILE_CODES as _RECOMPILE_KINDS
from .findings import break_count_text, recompile_findings
from .html_parts import _e, _finite, _Page, _plural, _sci, _slug
from .phases import phase_states
from .precision import precision_words
from .remote_cache_words import warm_remote_words
from .report_charts import breakdown_chart, latency_chart
from .report_details import details_section, focus_of
from .report_levers import levers_section
from .report_lines import lines_section
from .report_style import SCRIPT, STANDALONE_PALETTE, STYLE, WEBVIEW_PALETTE
from .report_time import breakdown_of, part_words, time_section
from .report_torch_diff import compare_section
from .report_trial import old_trial_section, trial_section
from .units import FINE, duration, format_bytes

RECOMPILE_CODES = set(_RECOMPILE_KINDS.values())

SPEEDUP_GOOD = 1.1  # as the benchmark's verdict: below this a speedup is not worth a compile


# --- the targets table ----------------------------------------------------------------------

def _speed_cell(t: Optional[Timing]) -> str:
    if t is None or _finite(t.speedup) is None:
        return '<td class="num muted">–</td>'
    title = f"eager {duration(style=FINE, ms=t.eager_ms)} ± {duration(style=FINE, ms=t.eager_iqr_ms)}, compiled {duration(style=FINE, ms=t.compiled_ms)} ± {duration(style=FINE, ms=t.compiled_iqr_ms)} (median ± IQR)"
    if t.speedup_ci:
        title += f"; 95% CI {t.speedup_ci[0]:.2f}–{t.speedup_ci[1]:.2f}× over {t.rounds} paired rounds"
    if not direction(t):  # never a bare noisy ratio
        return f'<td class="num warn" title="{_e(title)}">inconclusive</td>'
    low = (t.speedup_ci or [t.speedup])[0]
    cls = "good" if low >= SPEEDUP_GOOD else ("bad" if t.speedup < 1.0 else "")
    return f'<td class="num {cls}" title="{_e(title)}">{_e(speed_words(t))}</td>'


def _accuracy(b: Benchmark) -> tuple[str, str]:
    """Cell text and class: worst output and gradient difference, flagged when out of tolerance."""
    out, grad = b.max_abs_error.output, b.max_abs_error.grad
    text = f"out {_sci(out)}" + (f" · grad {_sci(grad)}" if grad is not None else "")
    bad = any(n.startswith("accuracy:") for n in b.notes)
    return (("⚠ " if bad else "") + text), ("bad" if bad else "")


def export_cell(export: Optional[ExportCheck], unmeasured: Optional[dict[str, str]] = None) -> tuple[str, str, str]:
    """(text, class, tooltip) for a target's torch.export result."""
    if unmeasured and EXPORT_PART in unmeasured:
        why = unmeasured[EXPORT_PART]
        return ("not run", "muted", why) if why.startswith("not run") else ("not measurable", "warn", why)
    if not export:
        return "–", "muted", "not checked (measure the target)"
    where = f" line {export.line}" if export.line else ""
    message = export.message or ""
    if export.ok and export.strict:
        return "✓ strict", "good", "torch.export works, strict and non-strict"
    if export.ok and export.strict is None:
        return "✓ non-strict", "good", "torch.export works non-strict; strict not checked (the budget)"
    if export.ok:
        return "✓ non-strict", "warn", message or "strict export fails"
    return f"✗{where}", "bad", message or "torch.export failed"


def fallback_cell(ops: list[FallbackOp], report: Optional[Report],
                  unmeasured: Optional[dict[str, str]] = None) -> tuple[str, str, str]:
    if unmeasured and FALLBACK_PART in unmeasured:
        why = unmeasured[FALLBACK_PART]
        return ("not run", "muted", why) if why.startswith("not run") else ("not measurable", "warn", why)
    fallbacks = [o for o in ops if o.kind == "fallback"]
    library = [o for o in ops if o.kind == "extern"]
    if not ops and not (report and report.kernels is not None):
        return "–", "muted", "not checked (measure the target)"
    lib = ", ".join(f"{o.op} ×{o.count}" for o in library)
    tip = f"library calls (not generated code, not eager): {lib}" if lib else "no library calls"
    if not fallbacks:
        return "none" + (f" (+{sum(o.count for o in library)} library)" if library else ""), "good", tip
    text = ", ".join(f"{o.op} ×{o.count}" for o in fallbacks)
    return text, "warn", tip


def _target_row(page: _Page, path: str, t: TargetResult) -> str:
    anchor = f"t-{_slug(path)}-{_slug(t.name)}"
    name = (f'<td class="name" id="{anchor}"><strong>{_e(t.name)}</strong>'
            f'<div class="sub">{page.loc(path, t.line)}</div></td>')
    if t.status == "error" or t.error is not None:
        message = t.error.message if t.error else "could not be analysed"
        return f'<tr class="error">{name}<td colspan="{len(COLUMNS) - 1}" class="bad">✗ {_e(message)}</td></tr>'
    breaks, recs = len(t.graph_breaks), len(recompile_findings(t, path))
    if t.graph_count is None:
        cells = [name, '<td class="num muted">–</td>']
    else:
        shown = f'<a href="#breaks-{anchor}">{breaks}</a>' if breaks else "0"
        graphs = break_count_text(breaks, t.graph_count).partition(" (")[2].rstrip(")")
        cells = [name, f'<td class="num {"warn" if breaks else "good"}">{shown}'
                       + (f'<div class="sub">{_e(graphs)}</div>' if graphs else "") + "</td>"]
    b = t.benchmark
    states = {p.name: p for p in phase_states(t)}
    sweep = states["sweep"]
    if sweep.status == "done" or recs:
        cells.append(f'<td class="num {"warn" if recs else ""}">{recs}</td>')
    else:  # a count of 0 would claim it was checked
        cells.append(f'<td class="num {"bad" if sweep.status == "failed" else "muted"}" title="{_e(sweep.words)}">'
                     f'{"✗" if sweep.status == "failed" else "–"}</td>')
    if b is None:  # forward .. accuracy
        measure = states["measure"]
        if measure.status == "not-run" and measure.error is None:
            cells.append('<td colspan="6" class="muted">not measured yet</td>')
        else:
            cells.append(f'<td colspan="6" class="bad">✗ {_e(measure.words)}</td>')
    else:
        acc, acc_cls = _accuracy(b)
        calls = "never" if b.break_even_calls is None else f"{b.break_even_calls:,} calls"
        eager_mem, compiled_mem = b.peak_memory_bytes.eager, b.peak_memory_bytes.compiled
        memory = "–" if eager_mem is None and compiled_mem is None else f"{format_bytes(eager_mem)} → {format_bytes(compiled_mem)}"
        cells += [
            _speed_cell(b.forward),
            _speed_cell(b.train_step),
            f'<td class="num" title="{_e(warm_remote_words(b) or "")}">{duration(b.compile_s.cold)} / {duration(b.compile_s.warm)}'
            + (f' / {duration(b.compile_s.warm_remote)} remote' if b.compile_s.warm_remote is not None else "") + '</td>',
            f'<td class="num">{calls}</td>',
            f'<td class="num" title="{_e(b.peak_memory_bytes.method)}">{memory}</td>',
            f'<td class="num {acc_cls}">{_e(acc)}</td>',
        ]
    text, cls, tip = export_cell(t.export, t.unmeasured)
    where = (t.export.path, t.export.line) if t.export else (None, None)
    if where[0] and where[1] and EXPORT_PART not in t.unmeasured:  # the line that does not export: a location like any other
        mark, _, label = text.partition(" ")
        shown = f"{_e(mark)} {page.loc(where[0], where[1], label=label or f'line {where[1]}')}"
    else:
        shown = _e(text)
    cells.append(f'<td class="{cls}" title="{_e(tip)}">{shown}</td>')
    text, cls, tip = fallback_cell(t.fallback_ops, t.report, t.unmeasured)
    cells.append(f'<td class="{cls}" title="{_e(tip)}">{_e(text)}</td>')
    row = '<tr class="target">' + "".join(_labelled(cells)) + "</tr>"
    if any(p.status == "failed" or (p.status == "not-run" and p.error) for p in states.values()):
        # which phases ran and which did not, and why: what is shown above is only what ran
        row += (f'<tr class="verdict"><td></td><td colspan="{len(COLUMNS) - 1}" class="warn">'
                f'<span class="label">Analysis</span> {_e(" · ".join(p.words for p in states.values()))}</td></tr>')
    if b is None:
        return row
    # the verdict gets a line of its own under the figures it sums up
    return (row + f'<tr class="verdict"><td></td><td colspan="{len(COLUMNS) - 1}" class="{_verdict_class(b.verdict)}">'
            f'<span class="label">Verdict</span> {_e(b.verdict)}'
            + (f' <span class="sub">· precision {_e(precision_words(b.precision))}</span>' if b.precision else "") + '</td></tr>')


def _labelled(cells: list[str]) -> list[str]:
    """Each cell with its column's name, shown before it when a narrow page stacks the cells."""
    out, column = [], 0
    for cell in cells:
        label = COLUMNS[column] if column < len(COLUMNS) else ""
        out.append(cell.replace("<td", f'<td data-label="{_e(label)}"', 1))
        span = re.search(r'colspan="(\d+)"', cell.partition(">")[0])
        column += int(span.group(1)) if span else 1
    return out


def _verdict_class(verdict: str) -> str:
    if verdict.startswith("worth it"):
        return "good"
    if verdict.startswith("not worth") or "differ" in verdict:
        return "bad"
    return "warn"


COLUMNS = ["Target", "Graph breaks", "Recompiles", "Forward speedup", "Train-step speedup",
           "Compile cold / warm", "Break-even", "Peak memory eager → compiled", "Accuracy (max abs diff)",
           "torch.export", "Ops falling back to eager"]  # and a verdict line under each measured target
TABLE_HEAD = '<tr class="head">' + "".join(f"<th>{_e(c)}</th>" for c in COLUMNS) + "</tr>"


# --- sections -------------------------------------------------------------------------------

def _charts(page: _Page, path: str, t: TargetResult) -> str:
    report = t.report
    b = t.benchmark
    sweep = report.batch_sweep if report else None
    breakdown = breakdown_of(b.compile_time) if b else None  # the cold child's frames: no compile of its own
    if report is None and b is None:
        return ""
    blocks = []
    if sweep and sweep.points:
        blocks.append('<figure>' + latency_chart(dataclasses.asdict(sweep)) + '<figcaption>'
                      f'{_e(sweep.workload)} on {_e(sweep.device)}; '
                      'median of each size, whiskers: interquartile range; compiled once with the batch '
                      'dimension dynamic' + ("" if sweep.dynamic else f" (it recompiled: {sweep.compiles} compiles)")
                      + '.</figcaption></figure>')
    else:
        why = next((n for n in (report.notes if report else []) if n.startswith("batch sweep:")), None)
        state = t.parts.get("batch_sweep")
        said = (why.split(":", 1)[1].strip() if why else
                part_words("batch_sweep", state).split(": ", 1)[1] if state else "not measured yet")
        blocks.append(f'<figure class="empty"><p class="muted">Latency vs batch size: {_e(said)}</p></figure>')
    cold = b.compile_s.cold if b else None
    warm = b.compile_s.warm if b else None
    if breakdown or cold is not None:
        caption = ("Stages from torch's compilation metrics of the cold compiles, frame by frame, in the fresh "
                   "processes (imports are not in them); cold and warm: the benchmark's first compiled call "
                   "in a fresh process") if breakdown else \
                  "The benchmark's first compiled call in a fresh process (no per-stage figures)"
        blocks.append('<figure>' + breakdown_chart(breakdown, cold, warm) + f'<figcaption>{_e(caption)}.</figcaption></figure>')
    kernels = report.kernels if report else None
    extra = ""
    if kernels is not None:
        extra = f'<p class="muted">Inductor generated {_plural(int(kernels), "kernel")} for the forward.</p>'
    return (f'<section class="card"><h3>{_e(t.name)} <span class="sub">{page.loc(path, t.line)}</span></h3>'
            f'<div class="charts">{"".join(blocks)}</div>{extra}{time_section(t)}</section>')


def _break_item(page: _Page, target: str, g: GraphBreak) -> str:
    gb = (f'<a class="gb" href="{_e(g.url)}">{_e(g.gb_id)}</a>' if g.url and g.gb_id
          else f'<span class="gb">{_e(g.gb_id or "graph break")}</span>')
    parts = [f'<li class="break"><div class="head">{gb} {page.loc(g.path, g.line, g.column)} '
             f'<strong>{_e(g.gb_type)}</strong> <span class="muted">in {_e(target)}</span></div>']
    if g.explanation:
        parts.append(f'<p>{_e(g.explanation)}</p>')
    if g.hints:
        parts.append("<ul class=\"hints\">" + "".join(f"<li>{_e(h)}</li>" for h in g.hints) + "</ul>")
    if g.loop is not None:  # GB7000: torch skips the frame the loop is in
        loop = g.loop
        loop_id = (f'<a class="gb" href="{_e(loop.url)}">{_e(loop.gb_id)}</a>' if loop.url and loop.gb_id
                   else _e(loop.gb_id or "graph break in loop"))
        parts.append(f'<p>{loop_id} inside the loop at {page.loc(loop.path, loop.line, loop.column)}: torch skips '
                     f'the whole <code>{_e(loop.function)}</code>, which runs eagerly</p>')
    if len(g.stack) > 1:
        chain = " → ".join(page.loc(f.path, f.line, label=f"{f.name} ({display_path(f.path, page.cwd)}:{f.line})")
                           for f in g.stack)
        parts.append(f'<p class="chain">call chain: {chain}</p>')
    parts.append("</li>")
    return "".join(parts)


def _not_built(reports: list[FileReport]) -> list[tuple[FileReport, Finding]]:
    """The modules and functions found but not traced (no inputs, constructor arguments), with why."""
    return [(r, f) for r in reports for f in r.findings if f.code == codes.TARGET]


def _breaks(page: _Page, reports: list[FileReport]) -> str:
    items = []
    for r in reports:
        for t in r.targets:
            if not t.graph_breaks:
                continue
            anchor = f"breaks-t-{_slug(r.path)}-{_slug(t.name)}"
            items.append(f'<h3 id="{anchor}">{_e(t.name)} <span class="sub">{_e(break_count_text(len(t.graph_breaks), t.graph_count))}</span></h3>'
                         '<ul class="breaks">' + "".join(_break_item(page, t.name, g) for g in t.graph_breaks) + "</ul>")
    if not items:
        targets = [t for r in reports for t in r.targets]
        if not targets and _not_built(reports):
            return ('<section><h2>Graph breaks</h2><p class="warn">No target was traced, so no graph break can be '
                    "ruled out: see Targets for which were not and why.</p></section>")
        untraced = [t for t in targets if phase_states(t)[0].status != "done"]
        missing = [f.data.get("target") or f.message.split("`")[1 if "`" in f.message else 0]
                   for _, f in _not_built(reports)]  # found but never built: not traced either
        if not untraced and not missing:
            return '<section><h2>Graph breaks</h2><p class="good">No graph breaks in the traced targets.</p></section>'
        traced = len(targets) - len(untraced)
        names = ", ".join([t.name for t in untraced] + missing)
        return (f'<section><h2>Graph breaks</h2><p class="warn">No graph breaks in the {_plural(traced, "traced target")}; '
                f'not traced: {_e(names)} (see the table).</p></section>')
    return "<section><h2>Graph breaks</h2>" + "".join(items) + "</section>"


def _recompiles(page: _Page, reports: list[FileReport]) -> str:
    rows = []
    for r in reports:
        for t in r.targets:
            # as the editor shows them: one row per input change and place, not one per compiled frame
            for f in recompile_findings(t, r.path):
                rows.append(f"<tr><td>{_e(t.name)}</td><td>{page.loc(f.path, f.line)}</td>"
                            f"<td>{_e(f.data.get('variation'))}</td><td>{_e(f.data.get('recompile_kind'))}</td>"
                            f"<td>{_e(f.message)}</td></tr>")
    if not rows:
        return ""
    return ("<section><h2>Recompiles</h2><div class=\"scroll\"><table><tr><th>Target</th><th>Line</th>"
            "<th>Input change</th><th>Kind</th><th>What recompiles, and torch's guard</th></tr>" + "".join(rows)
            + "</table></div></section>")


def _other_findings(page: _Page, reports: list[FileReport]) -> str:
    rows = []
    seen: set[tuple[Any, ...]] = set()
    for r in reports:
        for f in sorted(r.findings, key=lambda f: (f.path, f.line, f.column)):
            if codes.is_graph_break(f.code) or f.code in RECOMPILE_CODES:
                continue  # listed with their target in the graph-break and recompile sections
            key = (f.path, f.line, f.code, f.message)
            if key in seen:
                continue
            seen.add(key)
            rows.append(_finding_row(page, f))
        if r.error is not None:
            rows.append(f'<tr><td class="bad">error</td><td>{page.loc(r.error.path or r.path, r.error.line or 1)}</td>'
                        f"<td></td><td>{_e(r.error.message)}</td></tr>")
    if not rows:
        return ""
    return ("<section><h2>Other findings</h2><div class=\"scroll\"><table><tr><th>Severity</th><th>Where</th>"
            "<th>Code</th><th>Message</th></tr>" + "".join(rows) + "</table></div></section>")


def _finding_row(page: _Page, f: Finding) -> str:
    first = next((ln for ln in f.message.splitlines() if ln.strip()), f.code)
    sev = f.severity + (" (predicted)" if f.predicted else "")
    cls = {"error": "bad", "warning": "warn"}.get(f.severity, "muted")
    return (f'<tr><td class="{cls}">{_e(sev)}</td><td>{page.loc(f.path, f.line, f.column)}</td>'
            f"<td><code>{_e(f.code)}</code></td><td>{_e(first)}</td></tr>")


def _notes(reports: list[FileReport]) -> str:
    items = []
    for r in reports:
        for t in r.targets:
            notes = list(t.benchmark.notes if t.benchmark else []) + list(t.report.notes if t.report else [])
            if t.export and t.export.message:
                notes.append(f"torch.export: {t.export.message}")
            notes += [f"{part}: {why}" for part, why in t.unmeasured.items()]
            if notes:
                items.append(f"<h3>{_e(t.name)}</h3><ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    return "<section><h2>Notes</h2>" + "".join(items) + "</section>" if items else ""


# --- the page -------------------------------------------------------------------------------

def _summary(reports: list[FileReport]) -> str:
    targets = [t for r in reports for t in r.targets]
    measured = [t for t in targets if t.benchmark is not None]
    breaks = len({(g.path, g.line, g.gb_id) for t in targets for g in t.graph_breaks})  # a shared helper's break once
    graphs = [t.graph_count for t in targets if t.graph_count is not None and t.graph_count >= 0]
    recs = sum(len(recompile_findings(t, r.path)) for r in reports for t in r.targets)
    no_export = sum(1 for t in targets if t.export and not t.export.ok)
    falls = sum(1 for t in targets if any(o.kind == "fallback" for o in t.fallback_ops))
    pills = [_plural(len(reports), "file"), _plural(len(targets), "target"), f"{len(measured)} measured",
             break_count_text(breaks, sum(graphs) if graphs else None), _plural(recs, "recompile")]
    if no_export:
        pills.append(f"{no_export} not exportable")
    if falls:
        pills.append(f"{falls} with eager fallbacks")
    return '<div class="summary">' + "".join(f'<span class="pill">{_e(p)}</span>' for p in pills) + "</div>"


def render_report(reports: list[FileReport], *, title: str, torch_version: Optional[str], device: str,
                  cwd: str, for_webview: bool = False, nonce: Optional[str] = None,
                  generated_at: Optional[float] = None, banner: Optional[str] = None,
                  trial: Optional[TrialRecord] = None, trial_bill: Optional[Bill] = None,
                  trial_note: Optional[str] = None, torch_diff: Optional[dict[str, Any]] = None,
                  bill: Optional[CostInputs] = None, focus: Optional[str] = None) -> str:
    """The whole page. `nonce` (webview only) is the script's CSP nonce; one is made when not given.
    `banner`: a line shown above everything (e.g. results hidden because the file changed).
    `trial`: the workspace's saved `compile-lens trial` (trial.store) and `trial_bill` its bill;
    `trial_note`: why a saved trial is not shown (an older compile-lens's trial.json).
    `torch_diff`: what another torch changes (`torch_diff.compare`, `report --compare-with`).
    `bill`: the GPU bill's inputs (they price a restart in the levers section).
    `focus`: a target's name: the page opens at its details (a hover card's Details link)."""
    page = _Page(cwd, for_webview)
    head = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">']
    if for_webview:
        nonce = nonce or secrets.token_urlsafe(16)
        head.append('<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
                    f"style-src 'unsafe-inline'; img-src data:; script-src 'nonce-{_e(nonce)}';\">")
    head.append('<meta name="viewport" content="width=device-width, initial-scale=1">')
    head.append(f"<title>{_e(title)}</title>")
    head.append(f"<style>{WEBVIEW_PALETTE if for_webview else STANDALONE_PALETTE}{STYLE}</style></head>")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(generated_at or time.time()))
    devices = sorted({t.benchmark.device_name for r in reports for t in r.targets if t.benchmark})
    anchor = focus_of(reports, focus)
    body = [f'<body data-focus="{_e(anchor)}">' if anchor else "<body>", f"<h1>{_e(title)}</h1>",
            f'<p class="meta">torch {_e(torch_version or "?")} · {_e(device)}'
            + (f" ({_e(', '.join(devices))})" if devices else "") + f" · {_e(when)}</p>",
            _summary(reports)]
    if banner:
        body.append(f'<p class="banner">{_e(banner)}</p>')

    rows = [_target_row(page, r.path, t) for r in reports for t in sorted(r.targets, key=lambda t: t.line)]
    body.append("<section><h2>Targets</h2>")
    if rows:
        body.append(f'<div class="scroll"><table class="targets">{TABLE_HEAD}{"".join(rows)}</table></div>')
    elif _not_built(reports):
        body.append('<p class="warn">No target was traced: ' + "; ".join(
            f"{page.loc(r.path, f.line)}: {_e(f.message)}" for r, f in _not_built(reports)) + "</p>")
    else:
        body.append('<p class="muted">No targets: nothing in these files is compiled or an nn.Module.</p>')
    body.append("</section>")
    charts = [_charts(page, r.path, t) for r in reports for t in sorted(r.targets, key=lambda t: t.line)]
    charts = [c for c in charts if c]
    if charts:
        body.append("<section><h2>Speed and compile time</h2>" + "".join(charts) + "</section>")
    body.append(lines_section(page, reports))  # per line and per frame (report_lines)
    if torch_diff:
        body.append(compare_section(torch_diff))
    if trial:
        body.append(trial_section(page, trial, trial_bill))
    elif trial_note:
        body.append(old_trial_section(trial_note))
    body += [levers_section(page, reports, bill), _breaks(page, reports), _recompiles(page, reports),
             _other_findings(page, reports), _notes(reports), details_section(reports)]
    body.append(f"<footer>Compile Lens {_e(__version__)} · speedups are eager time / compiled time (above 1× is "
                "faster); the median ratio of paired eager/compiled rounds (torch.utils.benchmark), with its 95% interval, "
                "shown only when the interval is wholly above or below 1× (imprecise: wider than 20% of the ratio).</footer>")
    if for_webview:
        body.append(f'<script nonce="{_e(nonce)}">{SCRIPT}</script>')
    body.append("</body></html>")
    return "".join(head) + "\n".join(part for part in body if part) + "\n"


def file_reports_for(results: Iterable[tuple[str, list[TargetResult], list[Finding]]]) -> list[FileReport]:
    """(path, targets, findings) triples as FileReports (what the server holds per open file)."""
    return [FileReport(path=path, targets=list(targets), findings=list(findings)) for path, targets, findings in results]
