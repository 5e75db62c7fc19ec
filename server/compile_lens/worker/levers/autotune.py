"""max-autotune (on a GPU): `mode="max-autotune-no-cudagraphs"` against the default compile. Inductor
then benchmarks several kernel configurations (and Triton GEMM templates against cuBLAS) while it
compiles: the compile costs more, the forward may run faster. Both are measured as every lever's are:
the cold compile of each side in a fresh process with an empty cache (`sides.compile_side`), the
steady forward (and train step) in paired rounds (`steady`); the verdict weighs the extra compile
seconds against the time saved per call: the calls it takes to pay them back.

The CUDA-graphs half of `max-autotune` is the `cudagraphs` lever's: measured apart, so each figure
says what one change does. Not tried on the CPU, where max-autotune without freezing produces the
default's code at a dearer compile (the C++ GEMM template's ISA probe, then the template refused for
weights that are not frozen): tests/worker/test_levers_autotune.py measures it there all the same."""

from __future__ import annotations

from typing import Any, Callable, Optional

from ...protocol import Lever
from ..loader import BuiltTarget
from ..measure.workload.model import uses_cudagraphs
from .judge import busy_unsure, figures_words, forward_faster, forward_slower, seconds_pair
from .sides import compile_side
from .steady import timed

MODE = "max-autotune-no-cudagraphs"
CHANGE = f'torch.compile(..., mode="{MODE}")'


def applies(device: str, mode: str) -> bool:
    """On a GPU, when the measurement does not autotune already."""
    return device.startswith("cuda") and "autotune" not in (mode or "") and not uses_cudagraphs(mode)


def payback_calls(extra_s: Optional[float], before_ms: Optional[float], after_ms: Optional[float]) -> Optional[int]:
    """Calls of the forward that pay the extra compile seconds back; None when it saves nothing (or
    compiles no slower: nothing to pay back is 0 calls)."""
    if extra_s is None or before_ms is None or after_ms is None:
        return None
    if extra_s <= 0:
        return 0
    saved_s = (before_ms - after_ms) / 1e3
    if saved_s <= 0:
        return None
    return int(extra_s / saved_s) + 1


def measure(target: BuiltTarget, *, path: str, root: str, device: str, mode: str, max_seconds: float,
            progress: Callable[..., None], steady_s: float, train: bool = False) -> Lever:
    sides = {}
    for name, variant in (("before", "default"), ("after", "autotune")):
        progress(f"levers: compiling {'the default' if name == 'before' else 'with max-autotune'} in a fresh process…")
        sides[name] = compile_side(target, variant, path=path, root=root, device=device, mode=mode,
                                   max_seconds=max_seconds, progress=progress)
    progress("levers: timing the default and the max-autotune compile…")
    forward, step = timed(target, "default", "autotune", device=device, mode=mode, budget_s=steady_s, train=train)
    before, after = sides["before"], sides["after"]
    extra = after["cold_s"] - before["cold_s"]
    calls = payback_calls(extra, forward.eager_ms, forward.compiled_ms)
    lever = Lever("max_autotune", CHANGE, "no change",
                  compile_s={"before": _r(before["cold_s"]), "after": _r(after["cold_s"]),
                             "cpu_before": _r(before.get("cold_cpu_s")), "cpu_after": _r(after.get("cold_cpu_s"))},
                  forward=forward, train_step=step, data={"mode": MODE, "extra_compile_s": _r(extra),
                                                          "payback_calls": calls})
    cold = f"cold compile {seconds_pair(lever.compile_s)}"
    figures = figures_words(cold, forward, step)
    if forward_faster(forward) and not forward_slower(step):
        lever.verdict = "better"
        lever.why = figures + (f"; the {extra:.1f} s more compiling pays back after {calls:,} forward calls"
                               if calls and extra > 0 else "")
        lever.action = f'Autotune kernels (mode="{MODE}"): {lever.why} (measured)'
    elif forward_slower(forward) or forward_slower(step):
        lever.verdict, lever.why = "worse", figures
    elif busy_unsure(forward):
        lever.verdict, lever.why = "inconclusive", f"{figures} ({forward.busy})"
    else:
        lever.why = figures
    return lever


def _r(value: Any) -> Any:
    return round(value, 2) if isinstance(value, (int, float)) else value
