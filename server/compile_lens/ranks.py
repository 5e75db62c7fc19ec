"""Ranks that run different compiled programs: the comparison `compile-lens import` (a recorded
trace, one log per rank) and the torchrun trial (events per step) share. Pure: no torch, no pygls.

Each rank gives its compile events in the order they happened, each keyed by what identifies the
compiled program there (`RankEvent.key`: e.g. "recompile forward 4/1"). An event that some ranks have
and others do not means the ranks part there: collectives then pair different programs (an NCCL
watchdog hang, or wrong values). One `RankParting` per parting; its JSON is `parting_json`'s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional, Union


@dataclass
class RankEvent:
    key: str  # same program on two ranks <=> same key
    step: Union[int, str]  # where it happened: a step number, or a compile id
    what: str
    guard: Optional[str] = None


@dataclass
class RankParting:
    """Where ranks part: some ran a compiled program the others did not."""

    step: Union[int, str]  # where they part: the trial's step; a trace's compile id ("4/1")
    # how long they run apart: the trial's steps from the first odd one to the last, a trace's count
    # of odd compile events (that one included)
    steps_apart: int
    ranks: list[int]  # the ranks that ran the odd program
    other_ranks: list[int]  # the ranks that did not
    what: str  # what happened there: "recompile of `forward`"
    guard: Optional[str] = None  # the guard that failed
    why: Optional[str] = None  # the trial's: why it matters
    levers: list[str] = field(default_factory=list)  # the trial's: what keeps the ranks together


def parting_json(parting: RankParting) -> dict[str, Any]:
    """`{step, steps_apart, ranks, other_ranks, what, guard}`, and `why`/`levers` where the trial gave them."""
    found = dataclasses.asdict(parting)
    return {k: v for k, v in found.items() if k not in ("why", "levers") or v}


def rank_divergence(events: dict[int, list[RankEvent]]) -> list[RankParting]:
    """The partings, first first; [] with fewer than two ranks, or when every rank has the same events."""
    ranks = sorted(events)
    if len(ranks) < 2:
        return []
    holders: dict[str, set[int]] = {}
    for rank in ranks:
        for event in events[rank]:
            holders.setdefault(event.key, set()).add(rank)
    partings: list[dict[str, Any]] = []
    by_group: dict[tuple[int, ...], dict[str, Any]] = {}
    for rank in ranks:
        for index, event in enumerate(events[rank]):
            have = tuple(sorted(holders[event.key]))
            if len(have) == len(ranks):
                continue
            group = by_group.get(have)
            if group is None:
                group = by_group[have] = {
                    "step": event.step, "steps_apart": 0, "ranks": list(have),
                    "other_ranks": [r for r in ranks if r not in have], "what": event.what, "guard": event.guard,
                    "_keys": set(), "_steps": [], "_order": (index, rank)}
                partings.append(group)
            if event.key not in group["_keys"]:
                group["_keys"].add(event.key)
                group["_steps"].append(event.step)
    for group in partings:
        steps = group["_steps"]
        numbered = all(isinstance(s, int) for s in steps)
        group["steps_apart"] = (max(steps) - min(steps) + 1) if numbered else len(steps)  # type: ignore[operator]
    partings.sort(key=lambda g: g["_order"])
    return [RankParting(**{k: v for k, v in g.items() if not k.startswith("_")}) for g in partings]
