"""Regional compilation: each repeated block compiled once and reused (`block.compile()`) against
`torch.compile(model)`: the cold and warm compile in fresh processes, the compiles counted (a block
that recompiles for each instance shows here), and the steady forward in paired rounds."""

from __future__ import annotations

from typing import Any, Callable

from ...protocol import Lever
from ..loader import BuiltTarget
from .blocks import Blocks
from .judge import compile_change, figures_words, forward_slower, seconds_pair
from .sides import compile_side
from .steady import timed


def change_words(blocks: Blocks) -> str:
    where = f"`{blocks.attribute}`" if blocks.attribute else "the model"
    return f"each {blocks.block_class} in {where} ({blocks.count}) compiled once and reused (block.compile())"


def measure(target: BuiltTarget, blocks: Blocks, *, path: str, root: str, device: str, mode: str,
            max_seconds: float, progress: Callable[..., None], steady_s: float, train: bool = False) -> Lever:
    sides = {}
    for name, variant in (("before", "default"), ("after", "regional")):
        progress(f"levers: compiling {'the whole model' if name == 'before' else f'each {blocks.block_class} once'}"
                 " in a fresh process…")
        sides[name] = compile_side(target, variant, path=path, root=root, device=device, mode=mode,
                                   max_seconds=max_seconds, progress=progress)
    progress("levers: timing the whole-model and the per-block compile…")
    forward, step = timed(target, "default", "regional", device=device, mode=mode, budget_s=steady_s, train=train)
    before, after = sides["before"], sides["after"]
    lever = Lever(
        "regional", change_words(blocks), "no change",
        compile_s={"before": _r(before["cold_s"]), "after": _r(after["cold_s"]),
                   # the CPU time of the same compiles: what load on the machine barely moves (`judge`)
                   "cpu_before": _r(before.get("cold_cpu_s")), "cpu_after": _r(after.get("cold_cpu_s"))},
        warm_compile_s={"before": _r(before["warm_s"]), "after": _r(after["warm_s"])},
        forward=forward, train_step=step,
        recompiles={"before": before["compiles"], "after": after["compiles"],
                    "recompiles_after": after["recompiles"]},
        data={"attribute": blocks.attribute, "block_class": blocks.block_class, "count": blocks.count,
              "names": blocks.names})
    busy = before.get("busy") or after.get("busy")
    ratio = compile_change(before, after, busy)
    cold = f"cold compile {seconds_pair(lever.compile_s)}"
    figures = figures_words(cold, forward, step)
    slower = forward_slower(forward) or forward_slower(step)
    if ratio is None:
        lever.verdict = "inconclusive"
        lever.why = f"{cold}, but {busy or 'the wall and CPU clocks of the two compiles disagree'} — re-run when idle"
    elif ratio <= 0.8 and not slower:
        lever.verdict = "better"
        lever.why = figures
        lever.action = f"Compile each {blocks.block_class} once: {figures}"
    elif ratio >= 1.25 or slower:
        lever.verdict = "worse"
        lever.why = figures
    else:
        lever.why = figures_words(f"{cold} (within the noise of one compile each)", forward, step)
    if after["recompiles"]:
        lever.why += f"; the blocks recompiled {after['recompiles']} time(s) across instances"
        limit = _recompile_limit()
        if limit is not None and after["recompiles"] + 1 >= limit:
            lever.why += (f", at torch's recompile limit ({limit}): further blocks run eagerly — the guard that "
                          "differs between instances is in the recompile check")
    return lever


def _recompile_limit() -> Any:
    import torch._dynamo

    config = torch._dynamo.config
    return getattr(config, "recompile_limit", None) or getattr(config, "cache_size_limit", None)


def _r(value: Any) -> Any:
    return round(value, 2) if isinstance(value, (int, float)) else value
