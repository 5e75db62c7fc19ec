"""`compileLens.importTrace [path?]` and `compileLens.clearImportedTrace`: torch's structured trace
of a run made anywhere (`compile-lens import`), shown as diagnostics with their own source
("Compile Lens (imported trace)") and where each came from ("rank 1, compile 0/1"), kept apart
from the live results and never replacing them. Reading runs no code (allowed in an untrusted
workspace) and happens off the event loop: a 500 MB log never blocks the editor. The answer carries
what the CLI prints beside the findings (ranks that part, notes, unmapped paths and how many findings
lie there), which the client says (extension/src/importedTrace.ts)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ...ranks import parting_json
from ...render.lsp import uri_of
from ...render.profile_text import profiles_text
from ...trace_import.profiles import import_profiles, is_profile, profiles_json
from ...trace_import.report import NotATrace, divergence_text, import_trace, ranks_json
from ..state import CompileLensServer
from .diagnostics import republish

log = logging.getLogger("compile_lens")

IMPORT = "compileLens.importTrace"
CLEAR = "compileLens.clearImportedTrace"


async def import_command(ls: CompileLensServer, path: str) -> dict[str, Any]:
    if not path:
        return {"imported": False, "reason": "give a TORCH_TRACE folder or one dedicated_log_torch_trace_*.log"}
    if await asyncio.to_thread(is_profile, path):
        return await _import_profile(ls, path)
    try:
        imported = await asyncio.to_thread(import_trace, path, ls.root)
    except NotATrace as exc:
        return {"imported": False, "reason": str(exc)}
    shown: dict[str, list] = {}
    unmapped_findings = 0
    for report in imported.reports:
        if report.path in imported.unmapped:
            unmapped_findings += len(report.findings)  # not a workspace file: counted in the answer, not published
            continue
        shown.setdefault(uri_of(report.path), []).extend(report.findings)
    touched = set(ls.imported) | set(shown)
    ls.imported = shown
    for uri in touched:
        republish(ls, uri)
    log.info("imported torch trace %s: %d findings in %d files, %d in files not mapped onto the workspace", path,
             sum(map(len, shown.values())), len(shown), unmapped_findings)
    return {"imported": True, "files": sorted(shown), "diagnostics": sum(len(v) for v in shown.values()),
            "ranks": ranks_json(imported), "rank_divergence": [parting_json(p) for p in imported.rank_divergence],
            "divergence": [divergence_text(e) for e in imported.rank_divergence],
            "unmapped": [{"path": p, "why": why} for p, why in sorted(imported.unmapped.items())],
            "unmapped_findings": unmapped_findings,
            "notes": imported.notes}


async def _import_profile(ls: CompileLensServer, path: str) -> dict[str, Any]:
    """A profiler trace: each line's GPU time as a CL401 finding (`trace_import.profiles`), the ranks' figures in the answer."""
    try:
        imported = await asyncio.to_thread(import_profiles, path, ls.root)
    except (NotATrace, OSError) as exc:
        return {"imported": False, "reason": str(exc)}
    shown: dict[str, list] = {}
    for report in imported.reports:
        if report.path not in imported.unmapped:
            shown.setdefault(uri_of(report.path), []).extend(report.findings)
    touched = set(ls.imported) | set(shown)
    ls.imported = shown
    for uri in touched:
        republish(ls, uri)
    ls.refresh_views()  # the lines' inlay hints
    doc = profiles_json(imported)
    log.info("imported profile %s: %d ranks, %d lines in %d files", path, len(doc["ranks"]),
             sum(map(len, shown.values())), len(shown))
    return {"imported": True, "kind": "profile", "files": sorted(shown), "diagnostics": sum(len(v) for v in shown.values()),
            "ranks": doc["ranks"], "rank_divergence": [], "divergence": [], "unmapped": doc["unmapped"],
            "unmapped_findings": 0, "notes": doc["notes"],
            "summary": profiles_text(doc, lambda p: p).splitlines()}


def clear(ls: CompileLensServer) -> dict[str, Any]:
    touched, ls.imported = set(ls.imported), {}
    for uri in touched:
        republish(ls, uri)
    ls.refresh_views()
    return {"cleared": len(touched)}


def register(server: CompileLensServer) -> None:
    @server.command(IMPORT)
    async def import_trace_command(ls: CompileLensServer, *path: str) -> dict:
        # the path is optional (the palette asks for it client-side); pygls wants every declared argument
        return await import_command(ls, (path[0] if path else "") or "")

    @server.command(CLEAR)
    def clear_imported_trace_command(ls: CompileLensServer, *args: Any) -> dict:
        return clear(ls)
