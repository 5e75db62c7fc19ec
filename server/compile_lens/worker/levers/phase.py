"""The levers phase of one target: which levers apply, each measured on its own within the phase's
budget (at most `BUDGET_FACTOR` times what the target's measurement took), each failure its own.

A lever that does not apply is not tried and not shown; one the budget left out says so."""

from __future__ import annotations

import time
from typing import Callable, Optional

import torch

from ...protocol import Benchmark, Lever, TargetResult
from ..loader import BuiltTarget
from . import aot_artifact, autotune, cudagraphs, dynamic, guards, regional
from .blocks import already_regional, repeated_blocks
from .isolated import isolated
from .variants import guard_filters

BUDGET_FACTOR = 3.0  # the phase costs at most this many measurements of the same target
STEADY_SHARE = 0.25  # of benchmark.maxSeconds: each lever's paired rounds
MIN_STEADY_S = 4.0


def measurement_s(bench: Optional[Benchmark], max_seconds: float) -> float:
    """What one measurement of the target took (its own wall time), else its budget."""
    total = (bench.stages_s or {}).get("total") if bench else None
    return float(total) if total else max_seconds


def run_levers(result: TargetResult, target: BuiltTarget, *, path: str, root: str, device: str, mode: str,
               max_seconds: float, progress: Callable[..., None]) -> list[Lever]:
    from ..measure.compile.cold import cold_limit
    from ..measure.workload.devices import resolve_device

    device, _ = resolve_device(device)
    silent_s = cold_limit(max_seconds)  # a lever compiles in this process too: a hang guard, as the cold compile's
    told = progress

    def say(stage: str, **kw: object) -> None:  # every stage may be silent that long
        told(stage, limit_s=kw.get("limit_s") or silent_s)

    started = time.monotonic()
    budget_s = BUDGET_FACTOR * measurement_s(result.benchmark, max_seconds)
    steady_s = max(MIN_STEADY_S, STEADY_SHARE * max_seconds)
    cold = result.benchmark.compile_s.cold if result.benchmark else None
    train = bool(result.benchmark and result.benchmark.train_step)  # the measurement timed a train step: so does each lever

    def fits(compiles: int) -> Optional[str]:
        """None when a lever of `compiles` cold compiles (and its rounds) fits what is left, else why not."""
        left = budget_s - (time.monotonic() - started)
        need = compiles * (cold or 0.0) + steady_s * (2 if train else 1)
        if need > left:
            return (f"not measured: the phase's budget ({budget_s:.0f} s, {BUDGET_FACTOR:g}× the measurement) "
                    f"has {max(left, 0):.0f} s left and this lever needs about {need:.0f} s")
        return None

    levers: list[Lever] = []
    obj = target.make()
    blocks = repeated_blocks(obj) if isinstance(obj, torch.nn.Module) else None
    if blocks is not None and not already_regional(obj, blocks):
        change = regional.change_words(blocks)
        why = fits(2)
        levers.append(Lever("regional", change, "not measured", why) if why else isolated(
            "regional", change, lambda: regional.measure(
                target, blocks, path=path, root=root, device=device, mode=mode, max_seconds=max_seconds,
                progress=say, steady_s=steady_s, train=train)))
    shapes = dynamic.size_shapes(result.recompiles)
    if shapes and not (target.spec.compile_options or {}).get("dynamic"):
        change = "torch.compile(..., dynamic=True)"
        why = fits(2)
        levers.append(Lever("dynamic", change, "not measured", why) if why else isolated(
            "dynamic", change, lambda: dynamic.measure(
                target, shapes, path=path, root=root, device=device, mode=mode, max_seconds=max_seconds,
                progress=say, steady_s=steady_s, train=train, recompiles=result.recompiles)))
    share = result.benchmark.forward.guard_share if result.benchmark else None
    if share is not None and share > guards.SHARE:
        for name, assumption in guard_filters().items():
            change = f"guard_filter_fn=torch.compiler.{name}"
            why = fits(0)
            say(f"levers: timing the forward with {name}…")
            levers.append(Lever("guard_filter", change, "not measured", why, data={"filter": name}) if why else isolated(
                "guard_filter", change, lambda n=name, a=assumption: guards.measure(
                    target, n, a, device=device, mode=mode, steady_s=steady_s, train=train), data={"filter": name}))
    levers += _restart_and_graphs(result, target, obj, fits, path=path, root=root, device=device, mode=mode,
                                  max_seconds=max_seconds, progress=say, steady_s=steady_s, train=train)
    return levers


def _restart_and_graphs(result: TargetResult, target: BuiltTarget, obj: object, fits: Callable[[int], Optional[str]],
                        *, path: str, root: str, device: str, mode: str, max_seconds: float,
                        progress: Callable[..., None], steady_s: float, train: bool = False) -> list[Lever]:
    """CUDA graphs and max-autotune (on a GPU), and the aot_compile restart path (one graph), where they apply."""
    levers: list[Lever] = []
    if cudagraphs.applies(device, mode):
        why = fits(0)
        progress("levers: timing the forward with CUDA graphs (mode=\"reduce-overhead\")…")
        levers.append(Lever("cudagraphs", cudagraphs.CHANGE, "not measured", why) if why else isolated(
            "cudagraphs", cudagraphs.CHANGE, lambda: cudagraphs.measure(
                target, root=root, device=device, mode=mode, steady_s=steady_s)))
    if autotune.applies(device, mode):
        why = fits(2)
        levers.append(Lever("max_autotune", autotune.CHANGE, "not measured", why) if why else isolated(
            "max_autotune", autotune.CHANGE, lambda: autotune.measure(
                target, path=path, root=root, device=device, mode=mode, max_seconds=max_seconds,
                progress=progress, steady_s=steady_s, train=train)))
    if aot_artifact.applies(result, obj):
        why = aot_artifact.missing() or fits(aot_artifact.CHILDREN)
        lever = Lever("aot_artifact", aot_artifact.CHANGE, "not measured", why) if why else isolated(
            "aot_artifact", aot_artifact.CHANGE, lambda: aot_artifact.measure(
                result, target, path=path, root=root, device=device, mode=mode, max_seconds=max_seconds,
                progress=progress))
        if not aot_artifact.dropped(lever):
            levers.append(lever)
    return levers
