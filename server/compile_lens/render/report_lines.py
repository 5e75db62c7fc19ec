"""The compile report's "Where the time goes" section: per measured target, its lines sorted by cost
with an eager and a compiled bar per row, the cold compile by frame, and its Dynamo part by line
with a bar per row (`render.compile_lines`). Pure."""

from __future__ import annotations

from typing import Iterable, Optional

from ..protocol import CompileTime, FileReport, Lever, TargetResult, Timing
from . import compile_lines
from .html_parts import _e, _Page
from .line_costs import kernel_words, launch_bound, no_finding, share, us_text

BAR_W = 160  # px: the costliest line's bar
MAX_ROWS = 25  # a big model's long tail is not a table


def _bars(eager: Optional[float], compiled: Optional[float], top: float) -> str:
    def rect(y: int, us: Optional[float], cls: str) -> str:
        w = 0.0 if not us or top <= 0 else max(1.0, BAR_W * us / top)
        return f'<rect class="bar {cls}" x="0" y="{y}" width="{w:.1f}" height="6"/>'
    return (f'<svg width="{BAR_W}" height="14" role="img" aria-label="eager {_e(us_text(eager))}, compiled '
            f'{_e(us_text(compiled))}">{rect(0, eager, "s-eager")}{rect(8, compiled, "s-compiled")}</svg>')


def _table(page: _Page, t: Timing, label: str = "forward", levers: Iterable[Lever] = ()) -> str:
    if t.lines_note:
        return f'<p class="warn">Line costs: {_e(t.lines_note)}</p>'
    if not t.lines:
        return ""
    bound = launch_bound(t, label, levers)
    warn = f'<p class="warn">{_e(bound.replace("`", ""))}</p>' if bound else ""
    if t.lines_caveat:  # no eager → compiled ratio as a finding: where the time goes, by share only
        rows = "".join(f"<tr><td>{page.loc(ln.path, ln.line)}</td><td class=\"num\">{share(ln, t):.0%}</td></tr>"
                       for ln in t.lines[:MAX_ROWS])
        return (f'<p class="warn">Line costs: {_e(no_finding(t) or "")} — eager and compiled are not compared line '
                'by line; re-measure when the machine is idle.</p>' + warn
                + '<div class="scroll"><table><tr><th>Line</th><th>share of the profile</th></tr>' + rows + "</table></div>")
    top = max(max(ln.eager_us or 0.0, ln.compiled_us or 0.0) for ln in t.lines)
    rows = []
    for ln in t.lines[:MAX_ROWS]:
        compiled = us_text(ln.compiled_us) if ln.compiled_us is not None else (t.compiled_lines_note or "—")
        extra = kernel_words(ln) + (["fused with " + ", ".join(f"line {r.line}" for r in ln.fused_with)] if ln.fused_with else []) \
            + (["falls back"] if ln.fallback else [])
        rows.append(f"<tr><td>{page.loc(ln.path, ln.line)}</td><td class=\"num\">{_e(us_text(ln.eager_us))}</td>"
                    f"<td class=\"num\">{_e(compiled)}</td><td class=\"num\">{share(ln, t):.0%}</td>"
                    f"<td>{_bars(ln.eager_us, ln.compiled_us, top)}</td><td>{_e('; '.join(extra).replace('`', ''))}</td></tr>")
    more = f'<p class="muted">{len(t.lines) - MAX_ROWS} more lines below these.</p>' if len(t.lines) > MAX_ROWS else ""
    tail = []
    if t.unattributed_us:
        whys = "; ".join(f"{k} {us_text(v)}" for k, v in t.unattributed_why.items() if not k.startswith("eager: "))
        tail.append(f"Not on any line: {us_text(t.unattributed_us)} of the compiled {us_text(t.profile_us.get('compiled'))} ({whys}).")
    tail.append("Per call, from a profile taken after the timing rounds: eager ops' self time at the innermost "
                "workspace line that called them; compiled kernels at the lines Inductor's provenance names, a fused "
                "kernel's time split evenly among its lines.")
    return ('<div class="scroll"><table><tr><th>Line</th><th>eager</th><th>compiled</th><th>share</th>'
            '<th><span class="s-eager">■</span> eager <span class="s-compiled">■</span> compiled</th><th>kernels</th></tr>'
            + "".join(rows) + "</table></div>" + more + warn + "".join(f'<p class="muted">{_e(x)}</p>' for x in tail))


def _frames(page: _Page, ct: Optional[CompileTime]) -> str:
    if ct is None or not ct.frames:
        return f'<p class="muted">Compile time by frame: {_e(ct.note)}</p>' if ct and ct.note else ""
    names = ("dynamo", "aot_autograd", "inductor", "codegen_build", "autotune")
    rows = "".join(
        f"<tr><td>{_e(f.compile_id)}</td><td>{page.loc(f.path, f.line, label=f.function)}</td>"
        f"<td class=\"num\">{f.total_s:.2f} s</td>"
        + "".join(f"<td class=\"num\">{f.stages_s[k]:.2f} s</td>" if k in f.stages_s else "<td>—</td>" for k in names)
        + "</tr>" for f in ct.frames)
    return ("<h4>Cold compile by frame (fresh process)</h4><div class=\"scroll\"><table><tr><th>compile id</th>"
            "<th>frame</th><th>total</th><th>Dynamo</th><th>AOTAutograd</th><th>Inductor</th><th>code gen + build</th>"
            "<th>autotune</th></tr>" + rows + "</table></div>")


def _compile_lines(page: _Page, ct: Optional[CompileTime], result: TargetResult) -> str:
    """The cold compile's Dynamo part by line: seconds, share of the frame's Dynamo time, times traced,
    a bar (the costliest line's full width) and what the row is (an inlined call's loop, the def line's
    guards, a repeated block's lever)."""
    if ct is None or not ct.lines:
        return f'<p class="muted">Compile by line: not measured ({_e(ct.lines_note)})</p>' if ct and ct.lines_note else ""
    top = ct.lines[0].s
    rows = []
    for c in ct.lines[:MAX_ROWS]:
        frame = compile_lines.frame_of(ct, c)
        share = f"{c.s / compile_lines.dynamo_s(frame):.0%}" if frame is not None and compile_lines.dynamo_s(frame) else "—"
        w = 0.0 if top <= 0 else max(1.0, BAR_W * c.s / top)
        words = compile_lines.line_words(ct, c, page.cwd).split(" — ", 1)[-1]
        lever = compile_lines.loop_lever(ct, c, compile_lines.tried(result))
        rows.append(f"<tr><td>{page.loc(c.path, c.line)}</td><td class=\"num\">{_e(compile_lines.seconds(c.s))}</td>"
                    f"<td class=\"num\">{share}</td><td class=\"num\">{c.traced}×</td>"
                    f'<td><svg width="{BAR_W}" height="8" role="img" aria-label="{_e(compile_lines.seconds(c.s))}">'
                    f'<rect class="bar s-compiled" x="0" y="1" width="{w:.1f}" height="6"/></svg></td>'
                    f"<td>{_e((words + ('. ' + lever if lever else '')).replace('`', ''))}</td></tr>")
    more = f'<p class="muted">{len(ct.lines) - MAX_ROWS} more lines below these.</p>' if len(ct.lines) > MAX_ROWS else ""
    frames = "".join(f'<p class="muted">{_e(compile_lines.frame_words(f, ct))}.</p>' for f in ct.frames)
    return ("<h4>Cold compile by line (Dynamo; a line's seconds include the calls it inlines)</h4><div class=\"scroll\">"
            "<table><tr><th>Line</th><th>compile</th><th>of Dynamo</th><th>traced</th><th>"
            '<span class="s-compiled">■</span> seconds</th><th></th></tr>' + "".join(rows) + "</table></div>" + more + frames)


def lines_section(page: _Page, reports: list[FileReport]) -> str:
    parts = []
    for r in reports:
        for t in sorted(r.targets, key=lambda t: t.line):
            b = t.benchmark
            if b is None:
                continue
            body = _table(page, b.forward, levers=t.levers) + _frames(page, b.compile_time) + \
                _compile_lines(page, b.compile_time, t)
            if body:
                parts.append(f"<h3>{page.loc(r.path, t.line, label=t.name)} · forward</h3>{body}")
            train = _table(page, b.train_step, "train step", t.levers) if b.train_step is not None else ""
            if train:  # a line's train-step figures include its backward ("backward of line N")
                parts.append(f"<h3>{page.loc(r.path, t.line, label=t.name)} · train step (forward + backward)</h3>{train}")
    return "<section><h2>Where the time goes</h2>" + "".join(parts) + "</section>" if parts else ""
