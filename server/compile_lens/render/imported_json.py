"""`compile-lens import --format json`'s document (the MCP server's `import` returns it too): the
imported trace's reports as `check` writes them, with each rank, where ranks part, and the files
that could not be put on the workspace's lines."""

from __future__ import annotations

from typing import Any

from ..ranks import parting_json
from ..trace_import.report import SOURCE, Imported, ranks_json
from .cli_output import render_json

# what `check` measures and a recorded frame does not have: null in the JSON, not "none"
NOT_RECORDED = ("inputs", "benchmark", "export", "fallback_ops", "left_out")


def import_json(imported: Imported) -> dict[str, Any]:
    doc = render_json(imported.reports, torch_version=next((t.torch_version for t in imported.traces if t.torch_version), None),
                      device=None, checks={"graph_breaks": True, "recompiles": True, "benchmark": False})  # type: ignore[arg-type]
    by_path = {e["path"]: e for e in doc["files"]}
    for report in imported.reports:
        entry = by_path.get(report.path)
        if entry is None:
            continue
        entry["mapped"] = report.path not in imported.unmapped
        for target, extra in zip(entry["targets"], imported.target_extras.get(report.path, [])):
            target.update(extra)
            target.update({k: None for k in NOT_RECORDED})
            target["phases"] = None
    for entry in doc["files"]:
        for diagnostic in entry["diagnostics"]:
            diagnostic["source"] = SOURCE
    doc["ranks"] = ranks_json(imported)
    doc["rank_divergence"] = [parting_json(p) for p in imported.rank_divergence]
    doc["unmapped"] = [{"path": p, "why": why} for p, why in sorted(imported.unmapped.items())]
    doc["notes"] = list(imported.notes)
    return doc
