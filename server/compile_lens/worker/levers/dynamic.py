"""Dynamic or static: where the recompile sweep found size recompiles, `dynamic=True` against the
default, over the sweep's own shapes (compile time and compiles, fresh processes) and at the user's
shapes (steady forward, paired rounds). Where the dynamic kernels are slower, the static side is
what is offered: `dynamic=False`, each shape its own specialised graph."""

from __future__ import annotations

from typing import Callable

from ...protocol import Lever, Recompile
from ..loader import BuiltTarget
from .judge import compile_change, forward_faster, forward_slower, ratio_words
from .sides import compile_side
from .steady import forward_pair
from .variants import shape_label_ok


def size_shapes(recompiles: list[Recompile]) -> list[str]:
    """The sweep's variations that recompiled on a size ("batch 16", "sequence 7")."""
    return list(dict.fromkeys(r.variation for r in recompiles
                              if shape_label_ok(r.variation) and "size mismatch" in (r.reason or "")))


def measure(target: BuiltTarget, shapes: list[str], *, path: str, root: str, device: str, mode: str,
            max_seconds: float, progress: Callable[..., None], steady_s: float) -> Lever:
    sides = {}
    for name, variant in (("before", "default"), ("after", "dynamic")):
        progress(f"levers: compiling {variant} over {len(shapes) + 1} shapes in a fresh process…")
        sides[name] = compile_side(target, variant, path=path, root=root, device=device, mode=mode,
                                   max_seconds=max_seconds, progress=progress, shapes=shapes)
    forward = forward_pair(target, "default", "dynamic", device=device, mode=mode, budget_s=steady_s)
    before, after = sides["before"], sides["after"]
    over = f"compiles over {len(shapes) + 1} shapes {before['cold_s']:.1f} s → {after['cold_s']:.1f} s " \
           f"({before['compiles']} → {after['compiles']} compiles)"
    fwd = ratio_words(forward)
    lever = Lever("dynamic", "torch.compile(..., dynamic=True)", "no change",
                  compile_s={"before": round(before["cold_s"], 2), "after": round(after["cold_s"], 2),
                             "cpu_before": before.get("cold_cpu_s"), "cpu_after": after.get("cold_cpu_s")},
                  warm_compile_s={"before": round(before["warm_s"], 2), "after": round(after["warm_s"], 2)},
                  forward=forward, recompiles={"before": before["compiles"], "after": after["compiles"]},
                  data={"shapes": shapes})
    ratio = compile_change(before, after, before.get("busy") or after.get("busy"))
    if forward_slower(forward):  # the dynamic kernels are slower: the static side is the lever
        lever.lever, lever.change = "static", "torch.compile(..., dynamic=False)"
        lever.verdict = "better" if ratio is None or ratio >= 1.0 else "inconclusive"
        lever.why = f"dynamic kernels are slower at your shapes ({fwd}); {over}"
        if lever.verdict == "better":
            lever.action = f"Keep shapes static (dynamic=False): dynamic would be {fwd} (measured)"
    elif ratio is None:
        lever.verdict, lever.why = "inconclusive", f"{over}; the compile clocks disagree or the machine was busy"
    elif ratio <= 0.8 or (after["compiles"] < before["compiles"] and not forward_slower(forward)):
        lever.verdict, lever.why = "better", f"{over}, {fwd}"
        lever.action = f"Mark shapes dynamic (dynamic=True): {over}, {fwd} (measured)"
    elif ratio >= 1.25 and not forward_faster(forward):
        lever.verdict, lever.why = "worse", f"{over}, {fwd}"
    else:
        lever.why = f"{over}, {fwd}"
    return lever
