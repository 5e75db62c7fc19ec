"""The recordings' units: torch's own output kept for the tests that replay it (its cudagraph skip
messages, a provenance TORCH_TRACE, an older torch's log records) and which torch has each API the
worker reads. Each records into the run's own folder, never over tests/data (commit by hand)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .. import REPO, Context, unit
from ..common import module_figures, not_run
from ..figures import Figure, Result, typed


@unit("cudagraph_skips", "torch's own cudagraph skip messages, recorded again on this torch, equal the committed samples "
      "the CUDA-graphs lever's replay tests read", "torch._inductor.cudagraph_utils's own formatters on a real Dynamo graph",
      timeout_s=300, devices=("cpu",))
def cudagraph_skips(ctx: Context) -> Result:
    out = ctx.out / "cudagraph_skips"
    f = module_figures(ctx, "recordings.cudagraph_skips", "--out", str(out))
    if f.get("ok") is False:
        return typed(f)
    [made] = sorted(out.glob("torch-*.json"))
    committed = REPO / "tests" / "data" / "cudagraph_skips" / made.name
    messages = json.loads(made.read_text())["messages"]
    if not committed.exists():  # a torch with no committed sample: recorded, nothing to compare
        return Result({"messages": Figure(len(messages), "count")}, notes={"recorded": made.name, "committed": None})
    same = messages == json.loads(committed.read_text())["messages"]
    return Result({"messages": Figure(len(messages), "count"),
                   "differs_from_committed": Figure(int(not same), "count", "lower", 0)}, notes={"recorded": made.name})


@unit("provenance_trace", "a real TORCH_TRACE with Inductor's provenance, kept small for the import tests (≤ 200 KB "
      "gzipped) with every record kind `compile-lens import` reads", "torch's whole TORCH_TRACE of the same 2-step run",
      timeout_s=900, devices=("cpu",))
def provenance_trace(ctx: Context) -> Result:
    f = module_figures(ctx, "recordings.provenance_trace", "--out", str(ctx.out / "provenance_trace"))
    if f.get("ok") is False:
        return typed(f)
    return typed(f, {"gz_bytes": ("lower", 200_000)}, ok=False if f["kinds_missing"] else None)


@unit("old_torch_logs", "an older torch's log records (trace and sweep of examples/) recorded for the text readers' "
      "replay tests", "the older torch's own logger records (COMPILE_LENS_OTHER_PYTHON)", timeout_s=1200, devices=("cpu",))
def old_torch_logs(ctx: Context) -> Result | dict[str, Any]:
    other = os.environ.get("COMPILE_LENS_OTHER_PYTHON")
    if not other:
        return not_run("set COMPILE_LENS_OTHER_PYTHON to another torch's python (tests/worker/test_old_torch_logs.py)")
    from ..common import printed, run, tail

    files = [str(REPO / "examples" / n) for n in ("item_scale.py", "branching.py", "logged.py")]
    module = "recordings.old_torch_logs"  # run by the other torch's interpreter, not this one
    proc = run(ctx, [other, "-m", f"benchmarks.{module}", *files, "--out", str(ctx.out / "torch_logs")],
               PYTHONPATH=f"{REPO / 'server'}{os.pathsep}{REPO}")
    # a recording: no figure, its lines for people
    return Result(ok=proc.returncode == 0, notes={"printed": printed(proc), **({} if proc.returncode == 0 else
                                                                              {"error": tail(proc)})})


@unit("torch_apis", "every torch API the worker reads is in this torch's sources, or the fallback docs/torch-apis.md "
      "names for it is", "torch's own source files (read, not imported); COMPILE_LENS_TORCH_WHEELS: every release's",
      timeout_s=300, devices=("cpu",))
def torch_apis(ctx: Context) -> Result:
    f = module_figures(ctx, "recordings.torch_apis", "--installed")
    if f.get("ok") is False:
        return typed(f)
    wheels = os.environ.get("COMPILE_LENS_TORCH_WHEELS")
    if wheels and Path(wheels).is_dir():
        f["releases"] = module_figures(ctx, "recordings.torch_apis", wheels).get("printed")
    return typed({**f, "apis_missing_without_a_fallback": len(f["missing_without_a_fallback"])},
                 {"apis_missing_without_a_fallback": ("lower", 0)})
