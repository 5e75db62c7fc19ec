"""The trial's units: the torchrun trial against a plain torchrun, a program compiling its own DDP model
against torch's logs, what keeping the FX-graph cache keys costs, and what `compile-lens record` adds
to a training loop. Each runs its module as its own process."""

from __future__ import annotations

from .. import Context, unit
from ..common import child_result, module_figures
from ..figures import Result, typed


@unit("trial_torchrun", "the torchrun trial's compiled run per rank within the plain torchrun's steady median "
      "(2 ranks, gloo, CPU)", "a plain torchrun of the same program compiling its own model (Module.compile)",
      timeout_s=1800, devices=("cpu",))
def trial_torchrun(ctx: Context) -> Result:
    return child_result(ctx, "trial.torchrun", "3" if ctx.small else "8", OMP_NUM_THREADS="1")


@unit("ddp_own_compile", "a program's own torch.compile(DDP(model)) under the trial: the frames the trial counts are "
      "the frames torch's log says it compiled, per rank", "plain torchrun with TORCH_LOGS=dynamo,graph_breaks",
      timeout_s=1800, devices=("cpu",))
def ddp_own_compile(ctx: Context) -> Result:
    return child_result(ctx, "trial.ddp_own_compile", "inductor", "2" if ctx.small else "3", OMP_NUM_THREADS="1")


@unit("trial_fx_keys", "keeping each compile's FX-graph cache key adds ≤ 5% to the trial's compiled run's compile time",
      "the same compiled run without the keys (torch's structured_logging_overhead_s)", timeout_s=1800, devices=("cpu",))
def trial_fx_keys(ctx: Context) -> Result:
    return child_result(ctx, "trial.fx_keys", "--runs", "1" if ctx.small else "3")


@unit("record_overhead", "`compile-lens record` adds ≤ 5% to a small training loop (9 recorded calls a step)",
      "the same script with the recorder's wrappers off (in one process, interleaved) and run plainly",
      timeout_s=900, devices=("cpu",))
def record_overhead(ctx: Context) -> Result:
    args = ["--runs", "1", "--steps", "100", "--rounds", "4"] if ctx.dry else \
        ["--runs", "3", "--steps", "1000", "--rounds", "20"] if ctx.quick else []
    return typed(module_figures(ctx, "trial.record", *args), {"interleaved_ratio": ("lower", 1.05)})
