"""The benchmarks: each a registered unit — its name, the goal it guards (a figure and its limit),
what it is compared against (torch's own floor) and a function returning figures. One runner
(`python -m benchmarks`, `make bench`, `scripts/gpu-check`) runs them, appends one JSON line per
unit to the ledger and regenerates BENCHMARKS.md's marked table from it (`ledger`).

Not asv nor pytest-benchmark: both time a Python callable in the calling process, and every
figure here is a comparison of two *processes* (the tool's worker against a fresh-process
`torch.compile`), often on a shared, busy machine whose load must be recorded with the figure;
asv also wants to build the project per commit in its own environments, which a GPU box with a
fixed torch and no network cannot do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

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
    run: Callable[[Context], dict[str, Any]]  # figures; "ok": True/False/None (no limit on this device)
    gpu: int = 0  # place in the GPU check (1 first); 0: not part of it
    timeout_s: float = 300.0
    devices: tuple[str, ...] = ("cpu", "cuda")
    tags: list[str] = field(default_factory=list)


UNITS: dict[str, Unit] = {}
# the modules that register units, one per concern (each module's units run its neighbours as processes)
CONCERNS = ("benchmarks.measure", "benchmarks.editor", "benchmarks.breaks", "benchmarks.cli", "benchmarks.trial",
            "benchmarks.cache", "benchmarks.recordings", "benchmarks.gpu")


def unit(name: str, goal: str, against: str, *, gpu: int = 0, timeout_s: float = 300.0,
         devices: tuple[str, ...] = ("cpu", "cuda")) -> Callable[[Callable[[Context], dict]], Callable[[Context], dict]]:
    def register(fn: Callable[[Context], dict]) -> Callable[[Context], dict]:
        UNITS[name] = Unit(name, goal, against, fn, gpu, timeout_s, devices)
        return fn
    return register


def load_units(extra: Optional[list[str]] = None) -> dict[str, Unit]:
    """Import the modules that register units (and `extra` ones, e.g. a test's)."""
    import importlib

    for mod in [*CONCERNS, *(extra or [])]:
        importlib.import_module(mod)
    return UNITS
