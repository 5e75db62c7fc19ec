"""Two sides of a lever timed in the steady state, as the speedup is: paired rounds of the default
compile and the lever, the ratio default/lever with its 95% interval (`measure/timing/rounds`), rounds
the busy rule calls busy left out (`busy/`, the benchmark's rule), and "inconclusive"
when it cannot tell.

The forward (eval, no_grad) always; the train step too where the measurement timed one (`train`:
forward, loss, backward and an eager SGD step — `measure/workload/model.Model.train_step`, the step the
benchmark times), each side compiled again in train mode so its timed calls compile nothing."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, ContextManager, Optional

import torch

from ...measured import Timing
from ..loader import BuiltTarget
from ..measure.timing.rounds import Contention, busy_words, paired_rounds, settle, timer, timing_of
from ..measure.workload.devices import to_device
from ..measure.workload.model import Model, compile_kwargs
from .variants import compile_variant

WORKLOADS = {"forward": "forward", "train": "train step"}


def forward_pair(target: BuiltTarget, before: str, after: str, *, device: str, mode: str,
                 budget_s: float, compiling: Optional[ContextManager[Any]] = None,
                 keep: Optional[dict[str, Callable[[], Any]]] = None) -> Timing:
    """The default (`eager_ms`) against the lever (`compiled_ms`), ms per forward (eval, no_grad), `speedup`
    default/lever (above 1 the lever is faster) with its interval, and `busy` when other processes took
    our cores. `compiling`:
    entered while the lever's side compiles (e.g. to read what torch logs then); `keep` receives
    each side's compiled call ("before", "after"), to profile after the rounds."""
    return _pair(target, before, after, "forward", device=device, mode=mode, budget_s=budget_s,
                 compiling=compiling, keep=keep)


def train_pair(target: BuiltTarget, before: str, after: str, *, device: str, mode: str,
               budget_s: float) -> Timing:
    """The same figures for the train step (forward, loss, backward, SGD step) in train mode."""
    return _pair(target, before, after, "train", device=device, mode=mode, budget_s=budget_s)


def _pair(target: BuiltTarget, before: str, after: str, workload: str, *, device: str, mode: str,
          budget_s: float, compiling: Optional[ContextManager[Any]] = None,
          keep: Optional[dict[str, Callable[[], Any]]] = None) -> Timing:
    kwargs = compile_kwargs(target, mode)
    args = to_device(target.args, device)
    sides = {}
    for name, variant in (("before", before), ("after", after)):
        obj = target.make()
        module: Optional[torch.nn.Module] = obj.to(device) if isinstance(obj, torch.nn.Module) else None
        model = Model(compile_variant(variant, module if module is not None else obj, kwargs), module, args, False)
        call = model.run(workload)  # sets train or eval mode once, before anything is timed
        with (compiling if name == "after" and compiling is not None else contextlib.nullcontext()):
            for _ in range(3):  # compiles (and any recompile) before anything is timed
                call()
        sides[name] = timer("f()", {"f": call})
        if keep is not None:
            keep[name] = call
    settle(min(0.1 * budget_s, 5.0))  # the sides' compile workers quiet first: the span's reading is the rounds'
    watch = Contention(device)
    rounds = paired_rounds(sides["before"], sides["after"], budget_s=budget_s, watch=watch)
    t = timing_of(rounds)
    # rounded as the lever's JSON has always given them
    found = dataclasses.replace(t, eager_ms=round(t.eager_ms, 4), compiled_ms=round(t.compiled_ms, 4),
                                speedup=round(t.speedup, 3),
                                speedup_ci=[round(v, 3) for v in t.speedup_ci] if t.speedup_ci else None)
    seen = watch.report()
    busy = busy_words(seen)
    if busy and not t.conclusive:
        found.busy = busy
        found.contention = seen  # who, by name (`contention.top`), as the benchmark's JSON says it
    return found


def timed(target: BuiltTarget, before: str, after: str, *, device: str, mode: str, budget_s: float,
          train: bool, compiling: Optional[ContextManager[Any]] = None) -> tuple[Timing, Optional[Timing]]:
    """(forward, train step) of a lever against its default, each in its own paired rounds of
    `budget_s`; the train step None where the measurement timed none (`train` False)."""
    forward = forward_pair(target, before, after, device=device, mode=mode, budget_s=budget_s, compiling=compiling)
    step = train_pair(target, before, after, device=device, mode=mode, budget_s=budget_s) if train else None
    return forward, step
