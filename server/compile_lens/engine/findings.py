"""A file's findings from what ran on it: the trace's own (breaks, recompiles, figures' warnings),
the lines that traced cleanly (a lint there predicted a break that is not), the static ones, merged
(`render.assembly`). `traced_part` is the step the engine's `check` and the editor's diagnostics
share; the rest is the batch's (the editor merges against its buffer: `lsp/features/diagnostics.py`).
"""

from __future__ import annotations

from typing import Iterable, Optional

from ..discovery import Discovery
from ..jobs.analysis import safe_lint
from ..protocol import Benchmark, FileReport, Finding, TargetResult, TargetSpec
from ..render import assembly

# the trace's findings in this file, by path those in other workspace files (helpers), and the lines traced cleanly
Traced = tuple[list[Finding], dict[str, list[Finding]], list[tuple[int, int]]]


def traced_part(results: Iterable[TargetResult], specs: Iterable[TargetSpec], path: str, root: str,
                figures: Optional[dict[str, Benchmark]] = None) -> Traced:
    """What the results say about the file at `path` (and the workspace files its targets broke in),
    and the lines of `specs` whose targets traced cleanly. `figures`: measurements kept apart from
    the results (the editor's), shown with them."""
    shown = list(results)
    here, elsewhere = assembly.traced_findings(shown, path, root, figures)
    return here, elsewhere, assembly.covered_lines(specs, {r.name: r for r in shown})


def static_part(source: str, path: str, chosen: list[TargetSpec], discovery: Discovery,
                picked: Optional[set[str]]) -> tuple[list[Finding], list[Finding]]:
    """The lints and the findings about targets that need no torch; with --target, only inside the picked ones."""
    lints = safe_lint(source, path) or []
    statics = assembly.static_findings(path, chosen, discovery.errors)
    if picked is not None:  # only what lies in the picked targets
        spans = [(t.line, max(t.end_line, t.line)) for t in chosen]
        lints, statics = ([f for f in found if any(a <= f.line <= b for a, b in spans)]
                          for found in (lints, statics))
    return lints, statics


def fill(report: FileReport, discovery: Discovery, results: dict[str, TargetResult], runnable: list[TargetSpec],
         lints: list[Finding], statics: list[Finding], file_root: str) -> None:
    """The report's targets and every finding of the file, the traced ones with the static ones they confirm."""
    path = report.path
    report.targets = [results[t.name] for t in discovery.targets  # not an nn.Module after all: dropped
                      if t.name in results and results[t.name].status != "skipped"]
    here, elsewhere, covered = traced_part(report.targets, runnable, path, file_root)
    traced = here + [f for found in elsewhere.values() for f in found]  # a helper's break: in this report
    report.findings = assembly.file_findings(lints, statics, traced, covered)


def syntax_error(source: str, path: str) -> list[Finding]:
    """The file's syntax error, as a finding (none: it parses)."""
    try:
        compile(source, path, "exec")
    except SyntaxError as exc:
        line = exc.lineno or 1
        return [Finding(path, line, exc.offset or 1, line, (exc.offset or 1) + 1, "error", "syntax-error",
                        f"cannot parse: {exc.msg}")]
    return []
