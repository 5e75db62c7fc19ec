"""The graph-break units: the lines the tool reports against torch's own report, the collector's cost
(torch's data against its log text), which logging lever clears a logging break, and what another
torch finds in the same files. Each runs its module as its own process."""

from __future__ import annotations

import os
from typing import Any

from .. import REPO, Context, unit
from ..common import child_result, not_run
from ..figures import Result

TRUTH = [*sorted(str(p) for p in (REPO / "examples").glob("*.py") if p.name != "helpers.py"),
         *sorted(str(p) for p in (REPO / "tests" / "fixtures" / "loops").glob("*.py")),
         *sorted(str(p) for p in (REPO / "tests" / "fixtures" / "truth").glob("*.py"))]


@unit("breaks_against_torch", "0 targets whose graph-break lines differ from torch's own",
      "torch._dynamo.explain's break reasons joined with torch's graph_breaks log, in a fresh process per file",
      timeout_s=1800, devices=("cpu",))
def breaks_against_torch(ctx: Context) -> Result:
    files = [str(REPO / "examples" / "item_scale.py")] if ctx.dry else \
        [f for f in TRUTH if "examples" in f][:4] if ctx.quick else TRUTH
    return child_result(ctx, "breaks.against_torch", *files)


@unit("collector_cost", "reading torch's data costs no more per record than the old text readers",
      "the same trace and sweep read from torch's log text (collector.STRUCTURED = False), alternating rounds",
      timeout_s=900, devices=("cpu",))
def collector_cost(ctx: Context) -> Result:
    files = [str(REPO / "examples" / "item_scale.py")] if ctx.small else \
        [str(REPO / "examples" / n) for n in ("item_scale.py", "branching.py", "logged.py", "compiled_fn.py")]
    return child_result(ctx, "breaks.collector", *files)


@unit("logging_levers", "which torch._dynamo.config lever clears each logging break, and whether the message still "
      "reaches the user (a table, no limit)", "torch's own graph_breaks log and fullgraph=True on the same module",
      timeout_s=600, devices=("cpu",))
def logging_levers(ctx: Context) -> Result:
    return child_result(ctx, "breaks.logging_levers")


@unit("torch_versions", "the graph breaks and recompiles another torch finds in examples/ beside today's (breaks at the "
      "same lines)", "compile-lens check run by another torch's interpreter (COMPILE_LENS_OTHER_PYTHON)",
      timeout_s=1800, devices=("cpu",))
def torch_versions(ctx: Context) -> Result | dict[str, Any]:
    other = os.environ.get("COMPILE_LENS_OTHER_PYTHON")
    if not other:
        return not_run("set COMPILE_LENS_OTHER_PYTHON to another torch's python (docs/torch-apis.md)")
    return child_result(ctx, "breaks.torch_versions", other, *(["examples"] if ctx.small else []))
