"""`workspace/executeCommand compileLens.reportHtml [uri | null]`: the compile report of open files.

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
from typing import Any, Optional

from ..protocol import FileReport, TargetResult
from ..render.report_html import render_report

log = logging.getLogger("compile_lens")

COMMAND = "compileLens.reportHtml"


def _remap(ls: Any, state: Any, result: TargetResult) -> TargetResult:
    """Move a result of the saved code into the buffer's coordinates (comment-only edits)."""
    buffer_map = getattr(ls, "_buffer_map", None)
    mapping = buffer_map(state) if callable(buffer_map) else None
    if mapping is None:
        return result
    from ..positions import remap_result
    from ..render.findings import same_file

    def here(path: Optional[str]) -> bool:
        return same_file(path, state.path)

    moved = remap_result(result, mapping, here)
    export = moved.export
    if export and export.get("line") and here(export.get("path")):
        moved = dataclasses.replace(moved, export={**export, "line": mapping.line(export["line"])})
    return moved


def file_report(ls: Any, uri: str) -> tuple[Optional[FileReport], bool]:
    """The report of one open document, and whether its results were left out as stale."""
    state = getattr(ls, "docs", {}).get(uri)
    if state is None:
        return None, False
    is_current = getattr(ls, "_is_current", None)
    current = bool(is_current(state)) if callable(is_current) else True
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
    findings: list[Any] = []
    findings_for = getattr(ls, "findings_for", None)
    if callable(findings_for):
        try:
            findings = list(findings_for(state))
        except Exception:  # noqa: BLE001 - the report still shows the targets
            log.exception("report: findings of %s", state.path)
    stale = not current and bool(state.traced)
    return FileReport(state.path, targets=targets, findings=findings, error=state.problem), stale


def report_html(ls: Any, uri: Optional[str]) -> dict[str, Any]:
    """The page for `uri`, or for every open document when `uri` is None."""
    uris = [uri] if uri else sorted(getattr(ls, "docs", {}), key=lambda u: getattr(ls.docs[u], "path", u))
    reports: list[FileReport] = []
    stale: list[str] = []
    for one in uris:
        report, old = file_report(ls, one)
        if report is not None:
            reports.append(report)
            if old:
                stale.append(os.path.basename(report.path))
    runtime = getattr(ls, "runtime", {}) or {}
    settings = getattr(ls, "settings", None)
    device = "cuda" if runtime.get("cuda") and getattr(settings, "device", "auto") != "cpu" else "cpu"
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
    page = render_report(reports, title=title, torch_version=runtime.get("torch") or getattr(ls, "torch_version", None),
                         device=device, cwd=getattr(ls, "root", os.getcwd()), for_webview=True, banner=banner)
    return {"html": page, "files": len(reports), "targets": sum(len(r.targets) for r in reports)}


def register(server: Any) -> None:
    """Add the command to `server` (a pygls LanguageServer). Calling it twice does nothing."""
    if COMMAND in server.protocol.fm.commands:
        return

    @server.command(COMMAND)
    def report_html_command(ls: Any, *args: Any) -> dict[str, Any]:
        uri = args[0] if args and isinstance(args[0], str) else None
        return report_html(ls, uri)
