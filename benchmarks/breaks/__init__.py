"""The graph-break units: the lines the tool reports against torch's own report, the collector's cost
(torch's data against its log text), which logging lever clears a logging break, and what another
torch finds in the same files. Each runs its module as its own process."""

from __future__ import annotations

import os
import re
from typing import Any

from .. import REPO, Context, unit
from ..common import last_json, module_figures, not_run, py, run, tail

TRUTH = [*sorted(str(p) for p in (REPO / "examples").glob("*.py") if p.name != "helpers.py"),
         *sorted(str(p) for p in (REPO / "tests" / "fixtures" / "loops").glob("*.py")),
         *sorted(str(p) for p in (REPO / "tests" / "fixtures" / "truth").glob("*.py"))]


@unit("breaks_against_torch", "0 targets whose graph-break lines differ from torch's own",
      "torch._dynamo.explain's break reasons joined with torch's graph_breaks log, in a fresh process per file",
      timeout_s=1800, devices=("cpu",))
def breaks_against_torch(ctx: Context) -> dict[str, Any]:
    files = [str(REPO / "examples" / "item_scale.py")] if ctx.dry else \
        [f for f in TRUTH if "examples" in f][:4] if ctx.quick else TRUTH
    proc = run(ctx, py("breaks.against_torch", *files))
    got = last_json(proc)
    if not isinstance(got, dict):
        return {"ok": False, "error": f"rc {proc.returncode}: {tail(proc)}"}
    diff = [ln for ln in (proc.stdout or "").splitlines() if ln.startswith("DIFF")]
    return {"ok": got["differ"] == 0, "files": len(files), **got, **({"differences": diff} if diff else {})}


_COST = re.compile(r"^(data|text): (\d+) records, median ([0-9.]+) µs, total ([0-9.]+) ms")


@unit("collector_cost", "reading torch's data costs no more per record than the old text readers",
      "the same trace and sweep read from torch's log text (collector.STRUCTURED = False), alternating rounds",
      timeout_s=900, devices=("cpu",))
def collector_cost(ctx: Context) -> dict[str, Any]:
    files = [str(REPO / "examples" / "item_scale.py")] if ctx.small else \
        [str(REPO / "examples" / n) for n in ("item_scale.py", "branching.py", "logged.py", "compiled_fn.py")]
    f = module_figures(ctx, "breaks.collector", *files)
    if f.get("ok") is False:
        return f
    out: dict[str, Any] = {}
    for line in f["printed"]:
        if m := _COST.match(line):
            out[m.group(1)] = {"records": int(m.group(2)), "median_us": float(m.group(3)), "total_ms": float(m.group(4))}
    ok = out["data"]["median_us"] <= out["text"]["median_us"] if {"data", "text"} <= set(out) else False
    return {"ok": ok, **out}


@unit("logging_levers", "which torch._dynamo.config lever clears each logging break, and whether the message still "
      "reaches the user (a table, no limit)", "torch's own graph_breaks log and fullgraph=True on the same module",
      timeout_s=600, devices=("cpu",))
def logging_levers(ctx: Context) -> dict[str, Any]:
    proc = run(ctx, py("breaks.logging_levers"))
    if proc.returncode != 0:
        return {"ok": False, "error": f"rc {proc.returncode}: {tail(proc)}"}
    rows = [ln for ln in (proc.stdout or "").splitlines() if ln.startswith("| `")]
    cleared = sum(1 for r in rows if r.split("|")[3].strip().startswith("0"))
    return {"ok": None, "cases_x_levers": len(rows), "cleared": cleared, "torch": (proc.stdout or "").splitlines()[0]}


@unit("torch_versions", "the graph breaks and recompiles another torch finds in examples/ beside today's (breaks at the "
      "same lines)", "compile-lens check run by another torch's interpreter (COMPILE_LENS_OTHER_PYTHON)",
      timeout_s=1800, devices=("cpu",))
def torch_versions(ctx: Context) -> dict[str, Any]:
    other = os.environ.get("COMPILE_LENS_OTHER_PYTHON")
    if not other:
        return not_run("set COMPILE_LENS_OTHER_PYTHON to another torch's python (docs/torch-apis.md)")
    f = module_figures(ctx, "breaks.torch_versions", other, *(["examples"] if ctx.small else []))
    if f.get("ok") is False:
        return f
    lines = f["printed"]
    return {"ok": not any("same lines: NO" in ln for ln in lines), "printed": lines}
