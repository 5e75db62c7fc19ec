"""The measurement's parts, each a unit: the A/B against a user's own compile, the line-cost step's
cost, the guard cost per call, the levers phase and the restart paths lever, a worker tree's memory,
and Inductor's provenance leaving kernels alone. Each runs its module as its own process."""

from __future__ import annotations

from .. import REPO, Context, unit
from ..common import MODELS, child_result, module_figures
from ..figures import Result, typed

LEVERS = REPO / "tests" / "fixtures" / "levers"


@unit("speedup_ab", "the tool's compiled forward within ±10% of a user's torch.compile(model) in the same process and "
      "in a fresh one (paired rounds, 95% bootstrap interval)",
      "torch.compile(copy.deepcopy(model)) in process, and a fresh process compiling as a user's script does",
      timeout_s=1800, devices=("cpu", "cuda"))
def speedup_ab(ctx: Context) -> Result:
    # the child's figure `TinyMLP.tool_over_fresh` carries the ±10% goal, read on the quiet rounds only
    # (none when others held our cores: no verdict, its value None)
    rounds = "4" if ctx.dry else "8" if ctx.quick else "24"
    return child_result(ctx, "measure.ab", f"{MODELS}:TinyMLP", "--rounds", rounds)


@unit("line_costs_step", "the per-line costs add ≤ 25% to a measurement's wall time; lines + unattributed = the "
      "profile's total", "the same measurement with the line-cost step switched off (fresh processes)",
      timeout_s=1800, devices=("cpu",))
def line_costs_step(ctx: Context) -> Result:
    args = ["--max-seconds", "5", "--only", "Tiny"] if ctx.small else []
    f = module_figures(ctx, "measure.line_costs_step", *args)
    if f.get("ok") is False or "printed" in f:
        return typed(f, ok=False)
    # per target: the step's share of the measurement's wall time holds the goal
    return typed(f, {f"{t}.step_share_pct": ("lower", 25.0) for t in f})


@unit("guard_cost", "the forward's guard evaluation per call measured (µs, 95% interval) and its share of the compiled "
      "call", "the compiled forward with guards skipped, in the speedup's paired rounds", timeout_s=600, devices=("cpu",))
def guard_cost(ctx: Context) -> Result:
    return child_result(ctx, "measure.guard_cost", "5" if ctx.dry else "15" if ctx.quick else "30")


@unit("levers_phase", "the levers phase ≤ 3× the measurement's own wall time (BUDGET_FACTOR), each lever's verdict",
      "the measurement of the same target (run_benchmark) timed in the same process", timeout_s=2400, devices=("cpu",))
def levers_phase(ctx: Context) -> Result:
    target = f"{LEVERS / 'blocks.py'}:Stack"
    return child_result(ctx, "measure.levers", target, "--measure", "--max-seconds", "5" if ctx.small else "10")


@unit("restart_paths", "the aot_artifact lever: every restart path (cold, warm, Mega-Cache, aot artifact) timed and "
      "the artifact's output within tolerance", "the default compile's own cold and warm restart in fresh processes",
      timeout_s=1800, devices=("cpu",))
def restart_paths(ctx: Context) -> Result:
    return child_result(ctx, "measure.restart", f"{REPO / 'tests' / 'fixtures' / 'remote' / 'mlp.py'}:MLP",
                        "--max-seconds", "10" if ctx.small else "60")


@unit("worker_memory", "a worker tree's summed USS/PSS against RSS while it measures nanoGPT (the memory cap reads "
      "what the tree holds)", "psutil's RSS per process (what a naive sum reads)", timeout_s=1800, devices=("cpu",))
def worker_memory(ctx: Context) -> Result:
    args = ["--target", "Block"] if ctx.small else []
    return typed(module_figures(ctx, "measure.memory", *args))  # measured, no limit


@unit("provenance_kernels", "Inductor's provenance tracking changes no kernel (0 differing graphs)",
      "the same compile with trace.provenance_tracking_level 0", timeout_s=1800, devices=("cpu",))
def provenance_kernels(ctx: Context) -> Result:
    return child_result(ctx, "measure.provenance_kernels", *(["--only", "matmuls"] if ctx.small else []))
