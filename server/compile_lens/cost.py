"""The GPU bill: what a measured speedup is worth per month, and when the migration pays back. Pure.

Inputs are the team's figures (price, GPUs, how much they train, restarts, migration effort) and
measured ones (eager and compiled seconds per step at steady state, whether the difference is
conclusive, compile seconds per process start). Definitions:

- eager hours per month H: `hours_per_month`, else `steps_per_run × runs_per_month × eager_step_s`;
- the same work compiled: `H × compiled_step_s / eager_step_s`, plus the compile paid at every
  process start, `compile_s × (1 + restarts_per_run) × runs_per_month` (left out, and said so,
  when runs per month is not known);
- GPU-hours saved per month: `(H − compiled hours) × gpus` (every GPU waits while one compiles);
- money saved: GPU-hours saved × price per GPU-hour;
- compile cost per restart: `compile_s / 3600 × gpus × price`, where `compile_s` is what a process
  start pays as measured (`compile_from`, said in the output: "warm-remote" — a fresh process served
  by the team's remote cache —, "artifact" — warmed by a cache artifact —, or "compiled run");
- payback of the migration: `migration_days × day_rate / money saved per month`, in months;
- a restart at the fastest path the levers phase measured (`restart_lines`: cold, warm, Mega-Cache,
  remote cache, `aot_compile` artifact, each a fresh process to its first call), priced like the
  compile at each start, beside the cold compile it replaces.

No figure comes from an inconclusive speedup; no money figure without a price.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Optional

DAYS_PER_MONTH = 30.0
# where a restart's compile seconds come from (`gpu_bill(compile_from=...)`), in the bill's words
COMPILE_SOURCES = {"warm-remote": "a fresh process served by the team's remote cache",
                   "artifact": "a fresh process warmed by the cache artifact",
                   "compiled run": "the compiled run's own compile",
                   # the levers phase's restart paths (`worker/levers/aot_artifact`), each a fresh process
                   "cold": "a cold compile, nothing cached",
                   "warm": "this machine's disk cache",
                   "mega_cache": "a fresh process loading the Mega-Cache artifact",
                   "warm_remote": "a fresh process served by the team's remote cache",
                   "aot_artifact": "a fresh process loading the aot_compile artifact"}


@dataclass(frozen=True)
class BillField:
    """One input of the bill, under each of its names: the flag, its setting key, the field."""

    flag: str  # `--flag` (underscores as dashes) and its argparse dest
    key: str  # compileLens.<key> and [tool.compile-lens] <key>
    cost: str  # the CostInputs field, which Settings inherits
    kind: type  # float or int
    optional: bool  # null / unset means not known
    words: str  # what a value must be, said when one is rejected
    help: str  # the flag's help


BILL_FIELDS: tuple[BillField, ...] = (
    BillField("gpu_price", "bill.gpuPricePerHour", "price_per_gpu_hour", float, True,
              "the price of one GPU-hour, a number above 0 (e.g. 2.5)", "price of one GPU-hour (bill.gpuPricePerHour)"),
    BillField("gpus", "bill.gpus", "gpus", int, False,
              "the GPUs one training run uses, a whole number from 1 (e.g. 8)", "GPUs a run uses (bill.gpus, default 1)"),
    BillField("hours_per_month", "bill.trainingHoursPerMonth", "hours_per_month", float, True,
              "the eager training hours per month, a number above 0 (e.g. 300)",
              "training hours per month, eager (bill.trainingHoursPerMonth)"),
    BillField("steps_per_run", "bill.stepsPerRun", "steps_per_run", float, True,
              "the steps of one training run, a number above 0 (e.g. 20000)",
              "steps of one training run, with --runs-per-month (bill.stepsPerRun)"),
    BillField("runs_per_month", "bill.runsPerMonth", "runs_per_month", float, True,
              "the training runs started per month, a number above 0 (e.g. 40)",
              "training runs started per month (bill.runsPerMonth)"),
    BillField("restarts_per_run", "bill.restartsPerRun", "restarts_per_run", float, False,
              "the restarts of one run (each compiles again), a number from 0 (e.g. 1)",
              "restarts (each compiles again) per run (bill.restartsPerRun, default 0)"),
    BillField("migration_days", "bill.migrationDays", "migration_days", float, True,
              "the engineer-days the migration takes, a number above 0 (e.g. 10)",
              "engineer-days to migrate to torch.compile (bill.migrationDays)"),
    BillField("day_rate", "bill.engineerDayRate", "day_rate", float, True,
              "the cost of one engineer-day, a number above 0 (e.g. 800)", "cost of one engineer-day (bill.engineerDayRate)"),
)


@dataclass
class CostInputs:
    """The bill's inputs; `settings.Settings` inherits these fields, so a setting and its input are one field."""

    price_per_gpu_hour: Optional[float] = None
    gpus: int = 1
    hours_per_month: Optional[float] = None
    steps_per_run: Optional[float] = None
    runs_per_month: Optional[float] = None
    restarts_per_run: float = 0.0
    migration_days: Optional[float] = None
    day_rate: Optional[float] = None

    @classmethod
    def from_settings(cls, settings: Any) -> CostInputs:
        """The `bill.*` settings (compile_lens.settings.Settings): editor, pyproject or flags."""
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls)})

    def given(self) -> bool:
        return any(v is not None for v in (self.price_per_gpu_hour, self.hours_per_month, self.steps_per_run,
                                           self.runs_per_month, self.migration_days))


@dataclass
class Bill:
    """What the team's figures and the measured step times come to: each figure None when its inputs
    are missing; `lines` say what was left out and why (the text every view shows)."""

    inputs: CostInputs
    eager_hours_per_month: Optional[float] = None
    compiled_hours_per_month: Optional[float] = None  # the compile at every start included, where runs per month are set
    compile_hours_per_month: Optional[float] = None
    gpu_hours_saved_per_month: Optional[float] = None  # negative: compiled costs more
    money_saved_per_month: Optional[float] = None
    compile_cost_per_restart: Optional[float] = None
    compile_gpu_hours_per_restart: Optional[float] = None
    compile_source: Optional[str] = None  # which run's compile time (`COMPILE_SOURCES`)
    migration_cost: Optional[float] = None
    payback_months: Optional[float] = None
    lines: list[str] = field(default_factory=list)
    device: Optional[str] = None  # where the step times were measured ("cuda", "cpu"; None: not said)


def gpu_bill(inputs: CostInputs, *, eager_step_s: Optional[float], compiled_step_s: Optional[float],
             verdict: Optional[str], compile_s: Optional[float], compile_from: Optional[str] = None) -> Bill:
    """The figures, each None when its inputs are missing, and `lines` that say what was left out and why."""
    out = Bill(inputs, compile_source=compile_from if compile_s is not None else None)
    lines = out.lines
    price, gpus = inputs.price_per_gpu_hour, max(1, int(inputs.gpus))
    if compile_s is not None:
        out.compile_gpu_hours_per_restart = compile_s / 3600 * gpus
        if price is not None:
            out.compile_cost_per_restart = out.compile_gpu_hours_per_restart * price
    if inputs.migration_days is not None and inputs.day_rate is not None:
        out.migration_cost = inputs.migration_days * inputs.day_rate
    if eager_step_s is None or compiled_step_s is None or verdict not in ("faster", "slower"):
        lines.append("GPU bill: no figure: the measured speedup is " + (verdict or "missing")
                     + " (more steps, or a quieter machine, may settle it)")
        return out
    hours = inputs.hours_per_month
    if hours is None and inputs.steps_per_run is not None and inputs.runs_per_month is not None:
        hours = inputs.steps_per_run * inputs.runs_per_month * eager_step_s / 3600
    if hours is None:
        lines.append("GPU bill: set the training hours per month (or steps per run and runs per month)")
        return out
    compiled_hours = hours * compiled_step_s / eager_step_s
    if compile_s is not None and inputs.runs_per_month is not None:
        out.compile_hours_per_month = compile_s * (1 + inputs.restarts_per_run) * inputs.runs_per_month / 3600
        compiled_hours += out.compile_hours_per_month
    elif compile_s is not None:
        lines.append("GPU bill: compile time at each start is not counted in the month: set runs per month")
    saved = (hours - compiled_hours) * gpus
    out.eager_hours_per_month, out.compiled_hours_per_month, out.gpu_hours_saved_per_month = hours, compiled_hours, saved
    what = "saved" if saved >= 0 else "added"
    text = f"GPU bill: {abs(saved):.1f} GPU-hours {what} per month ({hours:.1f} h eager vs {compiled_hours:.1f} h compiled × {gpus} GPUs)"
    if price is None:
        lines.append(text + "; set a GPU price per hour for money figures")
        return out
    money = saved * price
    out.money_saved_per_month = money
    lines.append(text + f" = {abs(money):,.2f} {what} per month")
    if out.compile_cost_per_restart is not None:
        source = f" ({COMPILE_SOURCES[compile_from]})" if compile_from in COMPILE_SOURCES else ""
        lines.append(f"GPU bill: each start compiles for {compile_s:.1f} s{source} on {gpus} GPUs = "
                     f"{out.compile_cost_per_restart:,.2f}")
    if out.migration_cost is not None:
        if money > 0:
            out.payback_months = out.migration_cost / money
            lines.append(f"GPU bill: the migration ({out.migration_cost:,.2f}) pays back in "
                         f"{out.payback_months:.2f} months ({out.payback_months * DAYS_PER_MONTH:.0f} days)")
        else:
            lines.append("GPU bill: the migration does not pay back: compiled costs more per month")
    return out


def restart_lines(paths: dict[str, Optional[float]], inputs: CostInputs) -> list[str]:
    """`GPU bill: the fastest restart measured is …`: the quickest of the measured restart paths
    (seconds from a fresh process to its first call), with its cost per restart when a price is set;
    when that is this machine's own disk cache ("warm"), also the quickest a fresh machine can have."""
    measured = {k: v for k, v in paths.items() if v is not None}
    if not measured:
        return []
    gpus = max(1, int(inputs.gpus))
    price = inputs.price_per_gpu_hour

    def priced(seconds: float) -> str:
        return f" = {seconds / 3600 * gpus * price:,.2f}" if price is not None else ""

    best = min(measured, key=lambda k: measured[k])
    text = f"GPU bill: the fastest restart measured is {measured[best]:.1f} s ({COMPILE_SOURCES.get(best, best)})"
    text += f" on {gpus} GPUs{priced(measured[best])} per restart" if price is not None else ""
    fresh = {k: v for k, v in measured.items() if k != "warm"}
    if best == "warm" and fresh:
        other = min(fresh, key=lambda k: fresh[k])
        text += f"; on a fresh machine {fresh[other]:.1f} s ({COMPILE_SOURCES.get(other, other)}){priced(fresh[other])}"
    cold = measured.get("cold")
    if cold is not None and best != "cold":
        text += f" (cold: {cold:.1f} s{priced(cold)})"
    if price is None:
        text += "; set a GPU price per hour for money figures"
    return [text]
