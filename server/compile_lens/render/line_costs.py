"""Per-line costs (`Timing.lines`) and the cold compile per frame (`Benchmark.compile_time`) → words,
JSON, inlay-hint labels and hover text. Pure: one place for every surface (CLI, editor, report)."""

from __future__ import annotations

import math
import os
from typing import Any, Iterable, Optional

from ..protocol import Benchmark, CompileTime, Lever, LineCost, Timing
from . import compile_lines

HINT_SHARE = 0.03  # a line gets an inlay hint only above this share of its side's time: a file is not painted
TOP_LINES = 5  # the CLI text shows this many costliest lines
LAUNCH_BOUND = 0.30  # the GPU idle this share of the compiled call: launch-bound, CUDA graphs are the lever


def us_text(us: Optional[float]) -> str:
    """`0.81 ms`, `4.2 µs`; a column not measured says so."""
    if us is None:
        return "—"
    return f"{us / 1000:.2f} ms" if us >= 10 else f"{us:.1f} µs"


def share(line: LineCost, t: Timing) -> float:
    """The line's largest share of a side's profile total (eager or compiled)."""
    shares = []
    for us, total in ((line.eager_us, t.profile_us.get("eager")), (line.compiled_us, t.profile_us.get("compiled"))):
        if us is not None and total:
            shares.append(us / total)
    return max(shares, default=0.0)


def costly(t: Optional[Timing], minimum: float = HINT_SHARE) -> list[LineCost]:
    """The lines worth a hint: above `minimum` of their side's time, costliest first."""
    if t is None or t.lines_note:
        return []
    return [ln for ln in t.lines if share(ln, t) >= minimum]


def compiled_text(line: LineCost, t: Timing) -> str:
    if line.compiled_us is None:
        return t.compiled_lines_note or "not measured"
    return us_text(line.compiled_us)


def launch_bound(t: Optional[Timing], label: str = "forward", levers: Iterable[Lever] = ()) -> Optional[str]:
    """One line when the GPU sat idle for more than LAUNCH_BOUND of the compiled call (CUDA only):
    the call is launch-bound, and its action is the CUDA-graphs lever (`mode="reduce-overhead"`
    launches the kernels at once). Where the target's `levers` has it, what it measured — the same
    idle figure before and after; else how to measure it."""
    if t is None or t.gpu_idle_share is None or t.gpu_idle_share <= LAUNCH_BOUND:
        return None
    head = f"launch-bound: the GPU sat idle {t.gpu_idle_share:.0%} of the compiled {label}"
    lever = graphs_lever(levers)
    if lever is None:
        return (f"{head} — its action is CUDA graphs (`torch.compile(mode=\"reduce-overhead\")` launches its "
                "kernels at once): measure the lever with Try levers (`check --levers`)")
    what = 'its action, CUDA graphs (`mode="reduce-overhead"`)'
    if lever.verdict == "not measured":
        return f"{head} — {what}: {lever.why or 'not measured'}"
    offered = " (offered as an edit)" if lever.verdict == "better" and lever.action else ""
    return f"{head} — {what}, measured {lever.verdict}: {lever.why}{offered}"


def graphs_lever(levers: Iterable[Lever]) -> Optional[Lever]:
    """The CUDA-graphs lever among a target's levers, where it was tried."""
    return next((lv for lv in levers if lv.lever == "cudagraphs"), None)


def no_finding(t: Timing) -> Optional[str]:
    """`no finding (machine busy while profiling: …)` for a table whose figures are not compared
    (`Timing.lines_caveat`), else None."""
    return f"no finding ({t.lines_caveat})" if t.lines_caveat else None


def _short_caveat(t: Timing) -> str:
    return "machine busy" if (t.lines_caveat or "").startswith("machine busy") else "profile off its timing"


def hint_label(line: LineCost, t: Timing) -> str:
    """`0.81 ms → 0.20 ms · fused ×3 · falls back`; a train step's figures say so (`train 2.4 ms → 0.9 ms`).
    A table that is no finding (`lines_caveat`) shows the line's share only, never a ratio."""
    if t.lines_caveat:
        return f"{share(line, t):.0%} of the profile · no finding ({_short_caveat(t)})"
    compiled = compiled_text(line, t) if line.compiled_us is not None else \
        "not on this torch" if (t.compiled_lines_note or "").startswith("not on this torch") else "not measured"
    parts = [f"{'train ' if is_train_step(t) else ''}{us_text(line.eager_us)} → {compiled}"]
    if line.fused_with:
        parts.append(f"fused ×{len(line.fused_with) + 1}")
    if line.fallback:
        parts.append("falls back")
    return " · ".join(parts)


def _where(path: str, line: int, cwd: Optional[str] = None) -> str:
    shown = os.path.relpath(path, cwd) if cwd and os.path.isabs(path) and path.startswith(cwd) else os.path.basename(path)
    return f"{shown}:{line}"


def kernel_words(line: LineCost) -> list[str]:
    """One entry per kernel: `cpp_fused_mul_relu_0 (fused from 3 lines, 0.12 ms)`, `extern_kernels.addmm (extern)`;
    a train step's backward kernel says whose: `extern_kernels.mm (backward of line 15, extern kernel, 6.1 ms)`."""
    out = []
    for k in line.kernels:
        what = {"generated": "generated", "extern": "extern kernel", "fallback": "falls back to eager"}.get(k.kind, k.kind)
        if k.kind == "generated" and k.lines > 1:
            what = f"fused from {k.lines} lines, time split evenly"
        if k.backward:
            what = f"backward of line {line.line}, {what}"
        out.append(f"`{k.name}` ({what}{', ' + us_text(k.us) if k.us is not None else ''})")
    return out


def is_train_step(t: Timing) -> bool:
    """A train step's lines: backward kernels, or the SGD step the eager side could not give a line."""
    return any(k.backward for ln in t.lines for k in ln.kernels) or any("SGD step" in why for why in t.unattributed_why)


def hover_markdown(line: LineCost, t: Timing, label: Optional[str] = None, levers: Iterable[Lever] = ()) -> str:
    """The hover on a costly line: eager vs compiled, share, kernels, the lines fused with it; a
    launch-bound call's lever, with what it measured where its target's `levers` has it."""
    label = label or ("train step (forward + backward)" if is_train_step(t) else "forward")
    if t.lines_caveat:
        rows = [f"**Compile Lens · this line's {label} cost:** {share(line, t):.0%} of the profiled time",
                f"⚠ Not a finding — {t.lines_caveat}: eager and compiled are not compared line by line. "
                "Re-measure when the machine is idle."]
    else:
        rows = [f"**Compile Lens · this line's {label} cost:** eager {us_text(line.eager_us)} → compiled "
                f"{compiled_text(line, t)} per call ({share(line, t):.0%} of the profiled time)"]
    kernels = kernel_words(line)
    if kernels:
        rows.append("Kernels: " + ", ".join(kernels))
    if line.fused_with:
        rows.append("Fused with: " + ", ".join(f"line {r.line}" if r.path == line.path else _where(r.path, r.line)
                                               for r in line.fused_with))
    if line.fallback:
        rows.append("Falls back: Inductor did not lower an op on this line; it runs the aten op eagerly.")
    bound = launch_bound(t, label, levers)
    if bound:
        rows.append("⚠ " + bound)
    return "\n\n".join(rows)


def top_lines_text(b: Benchmark, cwd: Optional[str], n: int = TOP_LINES, levers: Iterable[Lever] = ()) -> list[str]:
    """The CLI's lines after the figures: `  line costs (forward): model.py:17 0.81 ms → 0.20 ms · fused ×3`."""
    out: list[str] = []
    for label, t in (("forward", b.forward), ("train step", b.train_step)):
        if t is None:
            continue
        if t.lines_note:
            out.append(f"  line costs ({label}): {t.lines_note}")
            continue
        if not t.lines:
            continue
        if t.lines_caveat:  # where the time goes, by share only: no eager → compiled ratio as a finding
            out.append(f"  where the {label} time goes: {no_finding(t)}; costliest lines by share of the profile: "
                       + ", ".join(f"{_where(ln.path, ln.line, cwd)} {share(ln, t):.0%}" for ln in t.lines[:n]))
        else:
            out.append(f"  where the {label} time goes (eager → compiled per call, {n} costliest lines):")
            for ln in t.lines[:n]:
                out.append(f"    {_where(ln.path, ln.line, cwd)}  {hint_label(ln, t)}")
            if t.unattributed_us:
                out.append(f"    not on a line: {us_text(t.unattributed_us)} compiled ({_why(t)})")
        if t.compiled_lines_note:
            out.append(f"    compiled column: {t.compiled_lines_note}")
        bound = launch_bound(t, label, levers)
        if bound:
            out.append(f"  {bound}")
    ct = b.compile_time
    if ct is not None and ct.frames and len(ct.frames) > 1:
        frames = sorted(ct.frames, key=lambda f: -f.total_s)
        out.append("  cold compile by frame: " + ", ".join(
            f"{f.compile_id} {f.function} ({_where(f.path, f.line, cwd)}) {f.total_s:.1f} s" for f in frames[:3]))
    out.extend(compile_lines.top_text(ct, cwd))  # Dynamo's part of it, line by line
    return out


def _why(t: Timing) -> str:
    whys = [f"{k} {us_text(v)}" for k, v in t.unattributed_why.items() if not k.startswith("eager: ")]
    return "; ".join(whys[:3]) or "—"


def _num(x: Any) -> Any:
    return x if not isinstance(x, float) or math.isfinite(x) else None


def timing_json(t: Timing) -> dict[str, Any]:
    """The per-line fields of a timing's JSON (`benchmark.forward.lines[]` and the rest)."""
    return {
        "lines": [{"path": ln.path, "line": ln.line, "eager_us": _num(ln.eager_us), "compiled_us": _num(ln.compiled_us),
                   "kernels": [{"name": k.name, "kind": k.kind, "us": _num(k.us), "lines": k.lines,
                                "backward": k.backward} for k in ln.kernels],
                   "fused_with": [{"path": r.path, "line": r.line} for r in ln.fused_with],
                   "fallback": ln.fallback} for ln in t.lines],
        "unattributed_us": _num(t.unattributed_us),
        "unattributed_why": dict(t.unattributed_why),
        "profile_us": dict(t.profile_us),
        "lines_note": t.lines_note,
        "compiled_lines_note": t.compiled_lines_note,
        "gpu_idle_share": _num(t.gpu_idle_share),
        "lines_caveat": t.lines_caveat,
    }


def compile_time_json(ct: Optional[CompileTime]) -> Optional[dict[str, Any]]:
    if ct is None:
        return None
    return {"frames": [{"compile_id": f.compile_id, "function": f.function, "path": f.path, "line": f.line,
                        "total_s": _num(f.total_s), "stages_s": dict(f.stages_s),
                        "phases_s": dict(f.stages_s),  # the old name, printed too until 0.2.0 (docs/line-costs.md)
                        "traced_s": _num(f.traced_s),
                        "guards_s": _num(f.guards_s)}
                       for f in ct.frames],
            "note": ct.note,
            "lines": compile_lines.lines_json(ct), "lines_note": ct.lines_note}  # Dynamo's tracing by line


def _same(a: str, b: str) -> bool:
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def costly_in_file(benchmarks: Any, path: str, minimum: float = HINT_SHARE) -> list[tuple[LineCost, Timing]]:
    """The costly lines of `path` across a file's measured targets (`{name: Benchmark}`), one per line
    (the costliest measurement's when two targets share a line): the forward's figures, the train
    step's on a line only the train step makes costly (its backward)."""
    best: dict[int, tuple[LineCost, Timing]] = {}
    for workload in ("forward", "train_step"):
        taken = set(best)
        for b in benchmarks.values():
            t = getattr(b, workload)
            for ln in costly(t, minimum):
                if _same(ln.path, path) and ln.line not in taken and (
                        ln.line not in best or share(ln, t) > share(*best[ln.line])):
                    best[ln.line] = (ln, t)  # type: ignore[assignment]
    return [best[k] for k in sorted(best)]


def line_at(benchmarks: Any, path: str, line: int) -> Optional[tuple[LineCost, Timing]]:
    """The measured line at `path:line`, when it is a costly one."""
    return next((found for found in costly_in_file(benchmarks, path) if found[0].line == line), None)


def measured_by(benchmarks: Any, t: Timing) -> Optional[str]:
    """The target (`{name: Benchmark}`) whose forward or train step `t` is."""
    return next((name for name, b in benchmarks.items() if t is b.forward or t is b.train_step), None)
