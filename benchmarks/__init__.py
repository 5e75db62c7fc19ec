"""The benchmarks: each a registered unit — its name, the goal it guards (a figure and its limit),
what it is compared against (torch's own floor) and a function returning figures. One runner
(`python -m benchmarks`, `make bench`, `scripts/gpu-check`) runs them, appends one JSON line per
unit to the ledger and regenerates BENCHMARKS.md's marked table from it (`ledger`).

A unit returns its figures typed, as asv's benchmarks do (`figures.Result`: each `Figure` a number
with its unit, the better direction and the goal's limit, so the verdict is read from the figures);
where it must compare two processes (the tool's worker against a fresh-process `torch.compile`) its
child writes them as one JSON line (`figures.emit`) that the unit reads back (`common.child_result`),
never a regex over what the child prints. The runner records the machine's load with every row: the
machines are shared and busy. Every unit returns a `Result`; a dict (`ok` and figures) is still read,
as a unit whose floor is missing here answers (`common.not_run`).

Not asv itself: asv times a Python callable in the calling process and builds the project per commit
in its own environments, which a GPU box with a fixed torch and no network cannot do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from .figures import Result

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Context:
    device: str  # "cpu" | "cuda"
    out: Path  # where a unit may write what it brings back (scripts/gpu-check's folder)
    dry: bool = False  # the rehearsal: every stage at its smallest
    timeout_s: float = 300.0  # this unit's own limit (each subprocess it starts is held to it)
    quick: bool = False  # smaller than a full run, the figures kept (the ledger marks them quick)

    @property
    def small(self) -> bool:
        return self.dry or self.quick


@dataclass
class Unit:
    name: str
    goal: str  # the figure and its limit, in words
    against: str  # torch's own floor it is compared with
    run: Callable[[Context], Result | dict[str, Any]]  # typed figures; untyped: a dict with "ok" True/False/None
    gpu: int = 0  # place in the GPU check (1 first); 0: not part of it
    timeout_s: float = 300.0
    devices: tuple[str, ...] = ("cpu", "cuda")
    tags: list[str] = field(default_factory=list)


UNITS: dict[str, Unit] = {}
# the modules that register units, one per concern (each module's units run its neighbours as processes)
CONCERNS = ("benchmarks.measure", "benchmarks.editor", "benchmarks.breaks", "benchmarks.cli", "benchmarks.trial",
            "benchmarks.cache", "benchmarks.recordings", "benchmarks.gpu")


def unit(name: str, goal: str, against: str, *, gpu: int = 0, timeout_s: float = 300.0,
         devices: tuple[str, ...] = ("cpu", "cuda")) -> Callable[[Callable], Callable]:
    def register(fn: Callable[[Context], Result | dict]) -> Callable[[Context], Result | dict]:
        UNITS[name] = Unit(name, goal, against, fn, gpu, timeout_s, devices)
        return fn
    return register


def load_units(extra: Optional[list[str]] = None) -> dict[str, Unit]:
    """Import the modules that register units (and `extra` ones, e.g. a test's)."""
    import importlib

    for mod in [*CONCERNS, *(extra or [])]:
        importlib.import_module(mod)
    return UNITS
