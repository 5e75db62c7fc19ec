"""The measurement's parts, each a unit: the A/B against a user's own compile, the line-cost step's
cost, the guard cost per call, the levers phase and the restart paths lever, a worker tree's memory,
and Inductor's provenance leaving kernels alone. Each runs its module as its own process."""

from __future__ import annotations

import ast
import re
from typing import Any

from .. import REPO, Context, unit
from ..common import MODELS, module_figures

LEVERS = REPO / "tests" / "fixtures" / "levers"
_RATIO = re.compile(r"tool/fresh speedup ratio: ([0-9.]+)")
_PATHS = re.compile(r"\s*paths (\{.*?\});.*max abs error ([0-9.e+-]+)")
ERROR_SAID = 1e-4  # the lever's own limit on the loaded artifact's output (aot_artifact.ERROR_SAID; it imports torch)
_SAME = re.compile(r"identical without comments: (\d+) of (\d+) graphs")


@unit("speedup_ab", "the tool's compiled forward within ±10% of a user's torch.compile(model) in the same process and "
      "in a fresh one (paired rounds, 95% bootstrap interval)",
      "torch.compile(copy.deepcopy(model)) in process, and a fresh process compiling as a user's script does",
      timeout_s=1800, devices=("cpu", "cuda"))
def speedup_ab(ctx: Context) -> dict[str, Any]:
    rounds = "4" if ctx.dry else "8" if ctx.quick else "24"
    f = module_figures(ctx, "measure.ab", f"{MODELS}:TinyMLP", "--rounds", rounds)
    if f.get("ok") is False or not f.get("printed"):  # nothing printed: the A/B never reached the forward's timing
        return {"ok": False, **f, "error": f.get("error", "the A/B hook was never reached (no rounds printed)")}
    ratio = next((float(m.group(1)) for ln in f["printed"] if (m := _RATIO.match(ln))), None)
    busy = any("too few quiet rounds" in ln for ln in f["printed"])  # others took our cores: no verdict
    return {"ok": None if ratio is None or busy else abs(ratio - 1) <= 0.10, "tool_over_fresh_speedup": ratio,
            "busy": busy, **f}


@unit("line_costs_step", "the per-line costs add ≤ 25% to a measurement's wall time; lines + unattributed = the "
      "profile's total", "the same measurement with the line-cost step switched off (fresh processes)",
      timeout_s=1800, devices=("cpu",))
def line_costs_step(ctx: Context) -> dict[str, Any]:
    args = ["--max-seconds", "5", "--only", "Tiny"] if ctx.small else []
    f = module_figures(ctx, "measure.line_costs_step", *args)
    if f.get("ok") is False or "printed" in f:
        return f
    return {"ok": all(t["step_share_pct"] <= 25 for t in f.values()), **f}


@unit("guard_cost", "the forward's guard evaluation per call measured (µs, 95% interval) and its share of the compiled "
      "call", "the compiled forward with guards skipped, in the speedup's paired rounds", timeout_s=600, devices=("cpu",))
def guard_cost(ctx: Context) -> dict[str, Any]:
    f = module_figures(ctx, "measure.guard_cost", "5" if ctx.dry else "15" if ctx.quick else "30")
    return {"ok": None if f.get("ok") is not False else False, **f}


_PHASE = re.compile(r"^(\S+): levers phase ([0-9.]+) s, (\d+) lever")
_MEASURED = re.compile(r"^(\S+): measurement ([0-9.]+) s")


@unit("levers_phase", "the levers phase ≤ 3× the measurement's own wall time (BUDGET_FACTOR), each lever's verdict",
      "the measurement of the same target (run_benchmark) timed in the same process", timeout_s=2400, devices=("cpu",))
def levers_phase(ctx: Context) -> dict[str, Any]:
    target = f"{LEVERS / 'blocks.py'}:Stack"
    f = module_figures(ctx, "measure.levers", target, "--measure", "--max-seconds", "5" if ctx.small else "10")
    if f.get("ok") is False:
        return f
    out: dict[str, Any] = {"printed": f["printed"]}
    for line in f["printed"]:
        if m := _PHASE.match(line):
            out[m.group(1)] = {**out.get(m.group(1), {}), "phase_s": float(m.group(2)), "levers": int(m.group(3))}
        elif m := _MEASURED.match(line):
            out[m.group(1)] = {**out.get(m.group(1), {}), "measurement_s": float(m.group(2))}
    ratios = [v["phase_s"] / v["measurement_s"] for v in out.values() if isinstance(v, dict) and "measurement_s" in v]
    return {"ok": all(r <= 3 for r in ratios) if ratios else None, **out}


@unit("restart_paths", "the aot_artifact lever: every restart path (cold, warm, Mega-Cache, aot artifact) timed and "
      "the artifact's output within tolerance", "the default compile's own cold and warm restart in fresh processes",
      timeout_s=1800, devices=("cpu",))
def restart_paths(ctx: Context) -> dict[str, Any]:
    f = module_figures(ctx, "measure.restart", f"{REPO / 'tests' / 'fixtures' / 'remote' / 'mlp.py'}:MLP",
                       "--max-seconds", "10" if ctx.small else "60")
    if f.get("ok") is False:
        return f
    for line in f["printed"]:
        if m := _PATHS.match(line):  # `paths {...}; cpu A → B s; artifact N B, Mega-Cache M B, max abs error E`
            paths = ast.literal_eval(m.group(1))
            return {"ok": float(m.group(2)) <= ERROR_SAID, "restart_s": paths, "max_abs_error": float(m.group(2)),
                    "printed": f["printed"]}
    return {"ok": None, **f}


@unit("worker_memory", "a worker tree's summed USS/PSS against RSS while it measures nanoGPT (the memory cap reads "
      "what the tree holds)", "psutil's RSS per process (what a naive sum reads)", timeout_s=1800, devices=("cpu",))
def worker_memory(ctx: Context) -> dict[str, Any]:
    args = ["--target", "Block"] if ctx.small else []
    f = module_figures(ctx, "measure.memory", *args)
    return {"ok": None, **f} if f.get("ok") is not False else f


@unit("provenance_kernels", "Inductor's provenance tracking changes no kernel (0 differing graphs)",
      "the same compile with trace.provenance_tracking_level 0", timeout_s=1800, devices=("cpu",))
def provenance_kernels(ctx: Context) -> dict[str, Any]:
    f = module_figures(ctx, "measure.provenance_kernels", *(["--only", "matmuls"] if ctx.small else []))
    if f.get("ok") is False:
        return f
    same = next((m for ln in f["printed"] if (m := _SAME.match(ln))), None)
    if same is None:
        return {"ok": None, **f}
    return {"ok": same.group(1) == same.group(2), "identical_graphs": int(same.group(1)), "graphs": int(same.group(2)),
            "printed": f["printed"]}
