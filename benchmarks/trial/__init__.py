"""The trial's units: the torchrun trial against a plain torchrun, a program compiling its own DDP model
against torch's logs, what keeping the FX-graph cache keys costs, and what `compile-lens record` adds
to a training loop. Each runs its module as its own process."""

from __future__ import annotations

import re
from typing import Any

from .. import Context, unit
from ..common import module_figures

_MEDIANS = re.compile(r"keys (on|off)\s*: compile median ([0-9.]+) s .*structured logging median ([0-9.]+) s")


@unit("trial_torchrun", "the torchrun trial's compiled run per rank within the plain torchrun's steady median "
      "(2 ranks, gloo, CPU)", "a plain torchrun of the same program compiling its own model (Module.compile)",
      timeout_s=1800, devices=("cpu",))
def trial_torchrun(ctx: Context) -> dict[str, Any]:
    f = module_figures(ctx, "trial.torchrun", "3" if ctx.small else "8", OMP_NUM_THREADS="1")
    return {"ok": None, **f} if f.get("ok") is not False else f


@unit("ddp_own_compile", "a program's own torch.compile(DDP(model)) under the trial: the frames the trial counts are "
      "the frames torch's log says it compiled, per rank", "plain torchrun with TORCH_LOGS=dynamo,graph_breaks",
      timeout_s=1800, devices=("cpu",))
def ddp_own_compile(ctx: Context) -> dict[str, Any]:
    f = module_figures(ctx, "trial.ddp_own_compile", "inductor", "2" if ctx.small else "3", OMP_NUM_THREADS="1")
    if f.get("ok") is False:
        return f
    rows = [ln for ln in f["printed"] if ln.startswith("| ") and not ln.startswith(("| rank", "|---"))]
    return {"ok": all("| yes |" in r for r in rows) if rows else None, **f}


@unit("trial_fx_keys", "keeping each compile's FX-graph cache key adds ≤ 5% to the trial's compiled run's compile time",
      "the same compiled run without the keys (torch's structured_logging_overhead_s)", timeout_s=1800, devices=("cpu",))
def trial_fx_keys(ctx: Context) -> dict[str, Any]:
    f = module_figures(ctx, "trial.fx_keys", "--runs", "1" if ctx.small else "3")
    if f.get("ok") is False:
        return f
    got = {m.group(1): {"compile_median_s": float(m.group(2)), "structured_logging_median_s": float(m.group(3))}
           for line in f["printed"] if (m := _MEDIANS.match(line))}
    if set(got) != {"on", "off"}:
        return {"ok": None, **f}
    # the compile times of two runs differ by more than the keys on a shared machine: torch's own
    # count of its structured logging is the figure the limit reads
    share = got["on"]["structured_logging_median_s"] / got["on"]["compile_median_s"]
    return {"ok": share <= 0.05, "keys_on": got["on"], "keys_off": got["off"], "logging_share_pct": round(100 * share, 2)}


@unit("record_overhead", "`compile-lens record` adds ≤ 5% to a small training loop (9 recorded calls a step)",
      "the same script with the recorder's wrappers off (in one process, interleaved) and run plainly",
      timeout_s=900, devices=("cpu",))
def record_overhead(ctx: Context) -> dict[str, Any]:
    args = ["--runs", "1", "--steps", "100", "--rounds", "4"] if ctx.dry else \
        ["--runs", "3", "--steps", "1000", "--rounds", "20"] if ctx.quick else []
    f = module_figures(ctx, "trial.record", *args)
    if f.get("ok") is False:
        return f
    return {"ok": f["interleaved_ratio"] <= 1.05, **f}
