"""The CLI's text and JSON output and its exit code (SARIF: `sarif.py`).

Pure functions: `FileReport`s in, a string or a JSON-safe dict out. No torch, no pygls.
Lines and columns stay 1-based, as in the records. Findings arrive already filtered for
`# compile-lens: ignore`; those a baseline holds (`data["baseline"]`) are not shown and do not fail.

A target's error is normally also one of the file's findings (the diagnostic on its class/def
line); when no error finding stands on that line, the renderers show the error themselves, so
nothing that failed is ever silent.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

from .. import codes
from ..protocol import (
    SCHEMA,
    Benchmark,
    FileReport,
    Finding,
    GraphBreak,
    Problem,
    Recompile,
    TargetResult,
    Timing,
)
from ..speed_words import direction, speed_words
from ..speed_words import rel_width as speed_words_rel_width
from . import line_costs, phases
from .findings import break_count_text, is_break_finding
from .levers_text import levers_json, levers_lines
from .precision import precision_words
from .units import SECONDS, duration

SOURCE = "Compile Lens"
SARIF_SRCROOT = "%SRCROOT%"


# --- shared helpers ---------------------------------------------------------------------------

def _is_under(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([os.path.abspath(path), os.path.abspath(root)]) == os.path.abspath(root)
    except ValueError:  # different drives (Windows)
        return False


def display_path(path: str, cwd: str) -> str:
    """`path` relative to `cwd` (with forward slashes) when it lies under it, else unchanged."""
    full = os.path.join(cwd, path)  # a relative path is taken relative to cwd
    if _is_under(full, cwd):
        return Path(os.path.relpath(os.path.abspath(full), os.path.abspath(cwd))).as_posix()
    return path


def _norm(path: str) -> str:
    return os.path.normcase(os.path.normpath(path))


def _shown(findings: list[Finding]) -> list[Finding]:
    """All but those the baseline holds."""
    return [f for f in findings if not f.data.get("baseline")]


def _sorted_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(_shown(findings), key=lambda f: (f.path, f.line, f.column, f.end_line, f.end_column, f.code))


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return " ".join(line.split())
    return ""


def _uncovered_target_errors(report: FileReport) -> list[tuple[TargetResult, Problem]]:
    """Target errors that no error finding of this report already shows on their line."""
    # an error finding, or the target-problem codes (CL001/CL003), already say it on that line
    error_lines = {(_norm(f.path), f.line) for f in report.findings
                   if f.severity == "error" or f.code in (codes.TARGET, codes.WORKER)}
    out = []
    for t in report.targets:
        problem = t.error
        if problem is None:
            if t.status != "error":
                continue
            problem = Problem(kind="error", message=f"{t.name} could not be analysed")
        path = problem.path or report.path
        line = problem.line or t.line
        if (_norm(path), line) not in error_lines and (_norm(report.path), t.line) not in error_lines:
            out.append((t, problem))
    return out


def _problem_location(problem: Problem, default_path: str, default_line: int) -> tuple[str, int]:
    return (problem.path or default_path, problem.line or default_line)


# A hint names the editor's setting; in a terminal the flag that sets it is what to change.
# The one map of it: the CLI's and the MCP server's messages (engine/finish.py) use it too.
CLI_FLAGS = {"compileLens.benchmark.maxSeconds": "--max-seconds", "compileLens.worker.timeoutSeconds": "--timeout",
             "benchmark.maxSeconds": "--max-seconds", "worker.timeoutSeconds": "--timeout",
             "compileLens.worker.memoryLimitMB": "--memory-limit", "compileLens.benchmark.mode": "--mode",
             "compileLens.device": "--device"}


def report_problems(report: FileReport) -> list[tuple[str, int, Problem]]:
    """The file's error and each target error no finding covers, with the path and line to show them at."""
    problems: list[tuple[str, int, Problem]] = []
    if report.error is not None:
        problems.append((*_problem_location(report.error, report.path, 1), report.error))
    for t, problem in _uncovered_target_errors(report):
        problems.append((*_problem_location(problem, report.path, t.line), problem))
    return problems


def cli_words(text: Optional[str]) -> Optional[str]:
    """`raise compileLens.benchmark.maxSeconds` → `raise --max-seconds` (longest names first)."""
    if not text:
        return text
    for setting in sorted(CLI_FLAGS, key=len, reverse=True):
        text = text.replace(setting, CLI_FLAGS[setting])
    return text


def _problem_text(problem: Problem) -> str:
    text = cli_words(_first_line(problem.message) or problem.kind)
    if problem.hint:
        text += f" (hint: {cli_words(_first_line(problem.hint))})"
    return text


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _finite(x: Any) -> Any:
    """JSON has no NaN or infinity: such figures become null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


# --- text -------------------------------------------------------------------------------------


def _speed(t: Timing) -> str:
    """`faster: 1.08–1.15× (median 1.12×)` (`speed_words`), or `inconclusive (95% CI 0.31–4.13×)`:
    never a bare noisy ratio."""
    if direction(t):
        return speed_words(t)
    ci = f" (95% CI {t.speedup_ci[0]:.2f}–{t.speedup_ci[1]:.2f}×)" if t.speedup_ci else ""
    return "inconclusive" + ci


def benchmark_summary(b: Benchmark) -> str:
    """The short figure: `forward 1.12× (95% CI …) · train step 0.94× (…) · compile 9.8 s cold / 1.7 s
    warm · ...`; an inconclusive timing says so, and why, instead of a ratio."""
    parts = [f"forward {_speed(b.forward)}"]
    if b.train_step is not None:
        parts.append(f"train step {_speed(b.train_step)}")
    cold, warm = b.compile_s.cold, b.compile_s.warm
    compile_parts = [f"{duration(v, SECONDS)} {label}" for label, v in (("cold", cold), ("warm", warm)) if v is not None]
    if b.compile_s.warm_remote is not None:
        compile_parts.append(f"{duration(b.compile_s.warm_remote, SECONDS)} warm-remote")
    if compile_parts:
        parts.append("compile " + " / ".join(compile_parts))
    main = b.train_step or b.forward
    if b.break_even_calls is not None:
        parts.append(f"pays back after {b.break_even_calls:,} calls")
    elif main.conclusive:
        parts.append("never pays back")
    text = " · ".join(parts) + f" ({b.device}{', ' + precision_words(b.precision) if b.precision else ''})"
    if not main.conclusive:
        why = b.verdict.partition(": ")[2].split("; ")[0] if b.verdict.startswith("inconclusive") else ""
        text += f" — inconclusive: {cli_words(why) or 're-measure when idle'}"
    return text


def _kind(f: Finding) -> str:
    if f.predicted:
        return "predicted break"
    if codes.is_graph_break(f.code):
        return "graph break"
    if f.code.startswith("CL2"):
        return "recompile"
    return "other"


def _count(level: str, kinds: dict[str, int], graphs: Optional[int] = None) -> str:
    """`3 warnings (2 graph breaks (torch: 4 graphs), 1 recompile)`; no detail when all are of no
    particular kind. Graph breaks read as everywhere else: beside torch's own graph count."""
    n = sum(kinds.values())
    head = f"{n} information" if level == "information" else _plural(n, level)
    detail = [break_count_text(k, graphs) if name == "graph break" else _plural(k, name) for name, k in kinds.items() if k]
    return head + (f" ({', '.join(detail)})" if any(kinds.get(k) for k in kinds if k != "other") else "")


def render_text(reports: list[FileReport], *, cwd: str, baselined: int = 0, not_run: tuple[str, ...] = ()) -> str:
    """One line per finding, `path:line:col: CODE message [severity]`, then benchmark figures and
    a summary line that counts errors, warnings and information apart (only the first two fail a
    build), and what was not run (`not_run`: "recompile check (--no-recompiles)"): an empty list
    of recompiles is then no answer. Paths are relative to `cwd` (the workspace root) when under it."""
    rows: list[tuple[str, int, int, int, str]] = []  # (path, line, column, order, text)
    levels: dict[str, dict[str, int]] = {"error": {}, "warning": {}, "information": {}}
    breaks: dict[str, set[tuple]] = {}  # per level: distinct breaks at distinct locations
    for report in reports:
        for f in _shown(report.findings):
            path = display_path(f.path, cwd)
            tags = f.severity + (", predicted" if f.predicted else "")
            rows.append((path, f.line, f.column, 1, f"{path}:{f.line}:{f.column}: {f.code} {_first_line(f.message)} [{tags}]"))
            level = "information" if f.severity in ("information", "hint") else f.severity
            if is_break_finding(f) and not f.predicted:  # a call-site copy is the same break
                where = f.data.get("break_at") or (f.path, f.line)
                breaks.setdefault(level, set()).add((os.path.realpath(where[0]), *where[1:], f.code))
                continue
            levels[level][_kind(f)] = levels[level].get(_kind(f), 0) + 1
        for ppath, pline, problem in report_problems(report):
            path = display_path(ppath, cwd)
            rows.append((path, pline, 1, 0, f"{path}:{pline}:1: error: {_problem_text(problem)}"))
            levels["error"]["other"] = levels["error"].get("other", 0) + 1
    rows.sort(key=lambda r: r[:4])
    lines = [r[4] for r in rows]

    bench = []  # by path, then line as a number (a text sort puts :15 before :9)
    for report in sorted(reports, key=lambda r: display_path(r.path, cwd)):
        for t in sorted(report.targets, key=lambda t: t.line):
            if t.benchmark is not None:
                bench.append(f"{display_path(report.path, cwd)}:{t.line}: {t.name}: {benchmark_summary(t.benchmark)}")
                bench.extend(line_costs.top_lines_text(t.benchmark, cwd, levers=t.levers))
            bench.extend(f"{display_path(report.path, cwd)}:{t.line}: {t.name}: lever {line}" for line in levers_lines(t))
            if t.status != "error" and _incomplete(t):  # a phase failed or was left out: say which, and why
                bench.append(f"{display_path(report.path, cwd)}:{t.line}: {t.name}: {phases.summary(t)}")
    if bench:
        if lines:
            lines.append("")
        lines.extend(bench)

    n_targets = sum(len(r.targets) for r in reports)
    where = f"in {_plural(len(reports), 'file')} ({_plural(n_targets, 'target')})"
    for level, found_breaks in breaks.items():
        levels[level]["graph break"] = len(found_breaks)
    graphs = [t.graph_count for r in reports for t in r.targets if t.graph_count is not None and t.graph_count >= 0]
    order = ("graph break", "recompile", "predicted break", "other")
    found = [_count(level, {k: kinds.get(k, 0) for k in order}, sum(graphs) if graphs else None)
             for level, kinds in levels.items() if kinds]
    if lines:
        lines.append("")
    summary = f"Found {', '.join(found)} {where}" if found else f"No problems found {where}"
    if baselined:
        summary += f"; {_plural(baselined, 'finding')} in the baseline not shown"
    if not_run:
        summary += f"; not run: {', '.join(not_run)}"
    lines.append(summary + ".")
    return "\n".join(lines) + "\n"


def _incomplete(t: TargetResult) -> bool:
    return any(p.status == "failed" or (p.status == "not-run" and p.error is not None) for p in phases.phase_states(t))


# --- JSON -------------------------------------------------------------------------------------

def _problem_json(p: Problem | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {"kind": p.kind, "message": p.message, "line": p.line, "hint": p.hint}


def _graph_break_json(g: GraphBreak) -> dict[str, Any]:
    return {
        "path": g.path, "line": g.line, "column": g.column, "end_line": g.end_line, "end_column": g.end_column,
        "gb_id": g.gb_id, "gb_type": g.gb_type, "explanation": g.explanation, "hints": list(g.hints),
        "url": g.url,
        "stack": [{"path": s.path, "line": s.line, "name": s.name} for s in g.stack],
        "reason": g.reason,
        "compile_id": g.compile_id,  # orders what happened: "frame/compile", as tlparse shows it
        # a break inside a loop: the loop's header, and the frame torch skips for it (GB7000)
        "loop": dataclasses.asdict(g.loop) if g.loop is not None else None,
    }


def _recompile_json(r: Recompile) -> dict[str, Any]:
    return {"line": r.line, "variation": r.variation, "kind": r.kind, "reason": r.reason,
            "changed": r.changed, "compile_s": _finite(r.compile_s), "compile_id": r.compile_id}


def _timing_json(t: Timing | None) -> dict[str, Any] | None:
    if t is None:
        return None
    found = {k: _finite(getattr(t, k)) for k in ("eager_ms", "compiled_ms", "speedup", "eager_iqr_ms", "compiled_iqr_ms")}
    found["speedup_ci"] = [_finite(v) for v in t.speedup_ci] if t.speedup_ci else None
    found["conclusive"] = bool(t.conclusive)  # the direction is certain (the interval excludes 1×, quiet machine)
    found["ci_rel_width"] = _finite(speed_words_rel_width(t))  # (hi - lo) / speedup; > 0.2: imprecise
    found["rounds"] = t.rounds
    if t.guard_us_per_call is not None:  # the forward, on a torch that can skip guards
        found["guard_us_per_call"] = _finite(t.guard_us_per_call)
        found["guard_us_ci"] = [_finite(v) for v in t.guard_us_ci] if t.guard_us_ci else None
        found["guard_share"] = _finite(t.guard_share)
    found.update(line_costs.timing_json(t))  # where the time goes, line by line
    return found


def _pick(d: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: _finite(d.get(k)) for k in keys}


def benchmark_json(b: Benchmark | None) -> dict[str, Any] | None:
    if b is None:
        return None
    return {
        "device": b.device, "device_name": b.device_name, "mode": b.mode,
        "precision": None if b.precision is None else dataclasses.asdict(b.precision),  # value, source, detail, asked
        "forward": _timing_json(b.forward), "train_step": _timing_json(b.train_step),
        # warm_remote only where a remote cache served the measurement
        "compile_s": {k: _finite(v) for k, v in dataclasses.asdict(b.compile_s).items()
                      if k != "warm_remote" or v is not None},
        "break_even_calls": b.break_even_calls,
        "peak_memory_bytes": {k: _finite(v) for k, v in dataclasses.asdict(b.peak_memory_bytes).items()},
        "max_abs_error": {k: _finite(v) for k, v in dataclasses.asdict(b.max_abs_error).items()},
        "max_rel_error": {k: _finite(v) for k, v in dataclasses.asdict(b.max_rel_error).items()},
        "verdict": b.verdict,
        "conclusive": bool(b.conclusive), "contention": b.contention.json() if b.contention else {},
        "torch": b.torch, "inputs": b.inputs, "measured_at": _finite(b.measured_at), "notes": list(b.notes),
        "guard_latency_us": _finite(b.guard_latency_us), "warm_cache": b.warm_cache,
        "unmeasured": dict(b.unmeasured),  # optional figures that could not be measured: why
        "compile_time": line_costs.compile_time_json(b.compile_time),
        "stages_s": {k: _finite(v) for k, v in b.stages_s.items()},  # where the measurement's time went
        # its name until 0.1.0, printed too until 0.2.0 (docs/cli.md): users' scripts read it
        "phases_s": {k: _finite(v) for k, v in b.stages_s.items()},
        # where a difference beyond tolerance starts (worker/measure/accuracy/drift.py); null: none found
        "accuracy_drift": None if b.accuracy_drift is None else {
            **dataclasses.asdict(b.accuracy_drift), "max_abs": _finite(b.accuracy_drift.max_abs),
            "max_rel": _finite(b.accuracy_drift.max_rel), "inputs_max_abs": _finite(b.accuracy_drift.inputs_max_abs)},
    }


def _target_json(t: TargetResult) -> dict[str, Any]:
    return {
        "name": t.name, "kind": t.kind, "line": t.line,
        "inputs": None if t.inputs is None else {"source": t.inputs.source, "text": t.inputs.text,
                                                 "origin": t.inputs.origin or None},
        "left_out": list(t.left_out),  # optional arguments the example call leaves out (e.g. labels)
        "status": t.status, "error": _problem_json(t.error),
        "graph_count": t.graph_count,
        "graph_breaks": [_graph_break_json(g) for g in t.graph_breaks],
        "recompiles": [_recompile_json(r) for r in t.recompiles],
        "benchmark": benchmark_json(t.benchmark),
        "export": None if t.export is None else dataclasses.asdict(t.export),
        "fallback_ops": [dataclasses.asdict(o) for o in t.fallback_ops or []],
        "unmeasured": dict(t.unmeasured),  # export, fallback ops, batch sweep…: why not measured
        # eager vs compiled latency across batch sizes (`deployment.batch_sweep`); null: not measured
        "batch_sweep": dataclasses.asdict(t.report.batch_sweep) if t.report and t.report.batch_sweep else None,
        # each part of the measurement: {"status": "pending" | "done" | "not-run" | "failed", "why", "seconds"}
        "parts": {name: dataclasses.asdict(state) for name, state in t.parts.items()},
        "parts_s": {k: _finite(v) for k, v in t.parts_s.items()},  # the deployment parts' wall seconds
        # each phase on its own: "done" | "failed" | "not-run", and why (null: not asked for)
        "phases": {p.name: {"status": p.status, "error": _problem_json(p.error)} for p in phases.phase_states(t)},
        "levers": levers_json(t),  # the levers phase (`check --levers`): each lever tried, measured
    }


def _diagnostic_json(f: Finding) -> dict[str, Any]:
    return {
        "line": f.line, "column": f.column, "end_line": f.end_line, "end_column": f.end_column,
        "severity": f.severity, "code": f.code, "source": SOURCE, "message": f.message,
        "url": f.url, "predicted": f.predicted,
        "related": [{"path": s.path, "line": s.line, "name": s.name, **({"note": s.note} if s.note else {})}
                    for s in f.related],
        "data": dict(f.data),
    }


def render_json(reports: list[FileReport], *, torch_version: str | None, device: str,
                checks: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """The `--format json` document (see the spine issue). A finding whose path is another file
    (a break inside a helper) is listed under that file, which gets an entry if it has none.
    `checks` (`{"graph_breaks": True, "recompiles": False, "benchmark": False}`), when given, says
    which phases ran: a target's empty `recompiles` means "none found" only where that one ran."""
    files: list[dict[str, Any]] = []
    by_path: dict[str, dict[str, Any]] = {}
    seen: dict[str, set[tuple[Any, ...]]] = {}

    def entry(path: str) -> dict[str, Any]:
        key = _norm(path)
        if key not in by_path:
            by_path[key] = {"path": path, "error": None, "targets": [], "diagnostics": []}
            seen[key] = set()
            files.append(by_path[key])
        return by_path[key]

    for report in reports:
        e = entry(report.path)
        if report.error is not None:
            e["error"] = _problem_json(report.error)
        e["targets"].extend(_target_json(t) for t in report.targets)
    for report in reports:
        for f in _sorted_findings(report.findings):
            e = entry(f.path or report.path)
            key = (f.line, f.column, f.end_line, f.end_column, f.code, f.message)
            if key in seen[_norm(e["path"])]:
                continue
            seen[_norm(e["path"])].add(key)
            e["diagnostics"].append(_diagnostic_json(f))
    for e in files:
        e["diagnostics"].sort(key=lambda d: (d["line"], d["column"], d["end_line"], d["end_column"], d["code"]))
    doc: dict[str, Any] = {"schema": SCHEMA, "torch": torch_version, "device": device}
    if checks is not None:
        doc["checks"] = dict(checks)
    doc["files"] = files
    return doc


# --- exit code --------------------------------------------------------------------------------

def exit_code(reports: list[FileReport]) -> int:
    """1 when a warning or an error is shown, or something could not be analysed; else 0.
    Information findings (a prediction, a recompile that settles, a target that needs inputs)
    and findings the baseline holds do not fail a build. (2, usage/internal, is the caller's.)"""
    for r in reports:
        if r.error is not None or _uncovered_target_errors(r):
            return 1
        if any(f.severity in ("error", "warning") for f in _shown(r.findings)):
            return 1
    return 0


def target_json(t: TargetResult) -> dict[str, Any]:
    """One target as the `--format json` document shows it (`check --stream`'s parts are read from it)."""
    return _target_json(t)


__all__ = [
    "render_text", "render_json", "exit_code", "benchmark_summary", "benchmark_json",
    "display_path", "target_json",
]
