"""`workspace/executeCommand compileLens.reportHtml [uri | null, target?]`: the compile report of open
files; with a target, the page opens at its details (a hover card's Details link).

Answers `{"html": "<!DOCTYPE html>…", "files": N, "targets": N}` for the extension's report webview
(`for_webview=True`: VS Code theme colours, a strict CSP, locations as "open file at line" links).
Built only from what the server already holds for each open document — the trace results
(`DocState.traced`), the measurements (`DocState.benchmarks`, merged into their target) and the
published findings — so it costs no worker time. Results of older code than the buffer's (the
file was edited since the last save) are left out, as the hover leaves them out, and the page
says so.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Callable, Optional

from ...cost import CostInputs
from ...positions import remap_result, same_file
from ...protocol import FileReport, Finding, TargetResult
from ...render.report_html import render_report
from ...trial import store
from ...trial.figures import TrialRecord
from ..state import CompileLensServer, DocState
from ..trial_feed import bill_of, bill_settings
from .diagnostics import findings_for

log = logging.getLogger("compile_lens")

COMMAND = "compileLens.reportHtml"

FindingsOf = Callable[[DocState], list[Finding]]


def _remap(ls: CompileLensServer, state: DocState, result: TargetResult) -> TargetResult:
    """Move a result of the saved code into the buffer's coordinates (comment-only edits)."""
    mapping = ls.buffer_map(state)
    if mapping is None:
        return result
    moved = remap_result(result, mapping, state.path)
    export = moved.export
    if export and export.line and same_file(export.path, state.path):
        moved = dataclasses.replace(moved, export=dataclasses.replace(export, line=mapping.line(export.line)))
    return moved


def file_report(ls: CompileLensServer, uri: str, findings_of: FindingsOf) -> tuple[Optional[FileReport], bool]:
    """The report of one open document, and whether its results were left out as stale."""
    state = ls.docs.get(uri)
    if state is None:
        return None, False
    current = ls.is_current(state)
    discovery = state.discovery or (state.saved.discovery if state.saved else None)
    specs = list(discovery.targets) if discovery else []
    targets: list[TargetResult] = []
    for spec in specs:
        result = state.traced.get(spec.name) if current else None
        if (result is not None and result.status == "skipped") or (result is None and spec.maybe_module):
            continue  # not an nn.Module after all, or not known to be one yet
        if result is not None:
            result = _remap(ls, state, result)
        else:
            result = TargetResult(spec.name, spec.kind, spec.line, inputs=spec.inputs)
        bench = state.benchmarks.get(spec.name) if current else None
        if bench is not None:
            result = dataclasses.replace(result, benchmark=bench)
        targets.append(result)
    findings: list[Finding] = []
    try:
        findings = list(findings_of(state))
    except Exception:  # noqa: BLE001 - the report still shows the targets
        log.exception("report: findings of %s", state.path)
    stale = not current and bool(state.traced)
    return FileReport(state.path, targets=targets, findings=findings, error=state.problem), stale


def _trial(ls: CompileLensServer, reports: list[FileReport]) -> tuple[Optional[TrialRecord], Optional[dict], Optional[str]]:
    """The saved `compile-lens trial` of the first report's workspace root, its bill with the settings, and
    why it is not shown when trial.json is an older compile-lens's."""
    if not reports:
        return None, None, None
    root = ls.root_for(reports[0].path)
    trial, note = store.load(root)
    if trial is None:
        return None, None, note
    return trial, bill_of(trial, bill_settings(reports[0].path, root, ls.settings)), None


def _restart_bill(ls: CompileLensServer, reports: list[FileReport]) -> Optional[CostInputs]:
    """The bill's inputs that price a restart in the levers section, when a restart lever was measured."""
    if not any(lever.data.get("paths") for r in reports for t in r.targets for lever in t.levers):
        return None
    return CostInputs.from_settings(bill_settings(reports[0].path, ls.root_for(reports[0].path), ls.settings))


def report_html(ls: CompileLensServer, uri: Optional[str], findings_of: Optional[FindingsOf] = None,
                target: Optional[str] = None) -> dict[str, Any]:
    """The page for `uri`, or for every open document when `uri` is None. `findings_of`: what the
    diagnostics feature publishes for a document (default). `target`: the page opens at its details."""
    findings_of = findings_of or (lambda state: findings_for(ls, state))
    uris = [uri] if uri else sorted(ls.docs, key=lambda u: ls.docs[u].path)
    reports: list[FileReport] = []
    stale: list[str] = []
    for one in uris:
        report, old = file_report(ls, one, findings_of)
        if report is not None:
            reports.append(report)
            if old:
                stale.append(os.path.basename(report.path))
    runtime = ls.runtime or {}
    device = "cuda" if runtime.get("cuda") and ls.settings.device != "cpu" else "cpu"
    if len(reports) == 1:
        title = f"Compile report: {os.path.basename(reports[0].path)}"
    else:
        title = f"Compile report: {len(reports)} open files"
    banner = None
    if stale:
        banner = (f"{', '.join(stale)} changed since the last analysis: save to analyse again "
                  "(figures of the older code are not shown).")
    elif uri and not reports:
        banner = "This file is not open in the editor, or Compile Lens has not seen it yet."
    trial, trial_bill, trial_note = _trial(ls, reports)
    bill = _restart_bill(ls, reports)
    page = render_report(reports, title=title, torch_version=runtime.get("torch") or ls.torch_version,
                         device=device, cwd=ls.root, for_webview=True, banner=banner,
                         trial=trial, trial_bill=trial_bill, trial_note=trial_note, bill=bill, focus=target)
    return {"html": page, "files": len(reports), "targets": sum(len(r.targets) for r in reports)}


def register(server: CompileLensServer) -> None:
    @server.command(COMMAND)
    def report_html_command(ls: CompileLensServer, *args: Any) -> dict[str, Any]:
        uri = args[0] if args and isinstance(args[0], str) else None
        target = args[1] if len(args) > 1 and isinstance(args[1], str) else None  # a card's Details link
        return report_html(ls, uri, target=target)
