"""The typed figure a unit returns, and the one JSON line a child process hands its figures back on.

A `Figure` is a number with its unit, the direction that is better and the goal's limit (so the
verdict is read from the figure, not written beside it), and the machine's load when it was taken
where that was taken apart from the unit's. A `Result` is what a unit returns: its figures by name
(dotted names group them: `MLPStack.ratio`), the verdict when the figures alone cannot say it (an
error, a busy machine), and notes that are context, not figures.

A unit that must compare two processes runs its child, and the child ends with `emit(result)`: one
line of JSON on stdout, tagged with `PROTOCOL`. The parent reads that line back (`read_line`);
whatever else the child prints (torch's warnings, a table for people) is never parsed.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Optional

PROTOCOL = "compile-lens-bench/1"  # the tag of the figures line; a new shape gets a new number
BETTER = ("lower", "higher", "near", "")  # near: |value - 1| within limit (a ratio); "": describes, no goal


@dataclass(frozen=True)
class Load:
    """The machine's load: the 1/5/15-minute load averages, other processes' CPU (%, summed over
    cores; None where it was not sampled) and the cores."""

    load: tuple[float, float, float]
    others_cpu_pct: Optional[float]
    cores: int

    @classmethod
    def now(cls, others_cpu_pct: Optional[float] = None) -> Load:
        """The load averages now (cheap: a child takes them as its figure is taken)."""
        one, five, fifteen = os.getloadavg()
        return cls((round(one, 2), round(five, 2), round(fifteen, 2)), others_cpu_pct, os.cpu_count() or 0)

    def to_json(self) -> dict[str, Any]:  # the ledger's `load` field, as rows before the typed figure had it
        return {"load": list(self.load), "others_cpu_pct": self.others_cpu_pct, "cores": self.cores}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Load:
        one, five, fifteen = d["load"]
        return cls((one, five, fifteen), d.get("others_cpu_pct"), d.get("cores") or 0)


@dataclass(frozen=True)
class Figure:
    value: Optional[float]  # None: not measured this run (the notes say why)
    unit: str  # "s", "ms", "µs", "x" (a ratio), "%", "B", "MB/s", "count"
    better: str = ""  # one of BETTER
    limit: Optional[float] = None  # the goal: ≤ limit (lower), ≥ limit (higher), |value − 1| ≤ limit (near)
    load: Optional[Load] = None  # where this figure was taken apart from the unit's run (a child's)

    def __post_init__(self) -> None:
        if self.better not in BETTER:
            raise ValueError(f"better must be one of {BETTER}, not {self.better!r}")
        if self.limit is not None and not self.better:
            raise ValueError("a limit needs a direction (better)")

    def met(self) -> Optional[bool]:
        """The goal met, missed, or None: no goal, or no value."""
        if self.limit is None or self.value is None:
            return None
        if self.better == "lower":
            return self.value <= self.limit
        if self.better == "higher":
            return self.value >= self.limit
        return abs(self.value - 1) <= self.limit

    def goal(self) -> str:
        """The limit in words, as a table shows it: "≤ 3 x", "≥ 100 MB/s", "1 ± 0.1 x"."""
        if self.limit is None:
            return ""
        sign = {"lower": "≤ ", "higher": "≥ ", "near": "1 ± "}[self.better]
        return f"{sign}{self.limit:g}" + ("" if self.unit == "count" else f" {self.unit}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": _rounded(self.value), "unit": self.unit}
        if self.better:
            out["better"] = self.better
        if self.limit is not None:
            out["limit"] = self.limit
        if self.load is not None:
            out["load"] = self.load.to_json()
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Figure:
        load = d.get("load")
        return cls(d["value"], d["unit"], d.get("better", ""), d.get("limit"),
                   Load.from_json(load) if load else None)


@dataclass
class Result:
    figures: dict[str, Figure] = field(default_factory=dict)
    ok: Optional[bool] = None  # a verdict the figures cannot give (an error: False); None: read the figures
    notes: dict[str, Any] = field(default_factory=dict)  # open: context for people (printed lines, an error, paths)
    load: Optional[Load] = None  # the child's load as it finished, where a child took the figures

    def verdict(self) -> Optional[bool]:
        """`ok` where set, else from the figures: False if a goal is missed, True if one is met and none
        missed, None where no figure has a goal (or none could be read)."""
        if self.ok is not None:
            return self.ok
        met = [m for m in (f.met() for f in self.figures.values()) if m is not None]
        return None if not met else all(met)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"protocol": PROTOCOL, "figures": {k: f.to_json() for k, f in self.figures.items()}}
        if self.ok is not None:
            out["ok"] = self.ok
        if self.notes:
            out["notes"] = self.notes
        if self.load is not None:
            out["load"] = self.load.to_json()
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Result:
        if d.get("protocol") != PROTOCOL:
            raise ValueError(f"not a figures line of {PROTOCOL}: {d.get('protocol')!r}")
        load = d.get("load")
        return cls({k: Figure.from_json(v) for k, v in d["figures"].items()}, d.get("ok"), d.get("notes") or {},
                   Load.from_json(load) if load else None)

    @classmethod
    def failed(cls, error: str, **notes: Any) -> Result:
        return cls(ok=False, notes={"error": error, **notes})


# the unit a figure's name says, for a child that writes plain JSON (`typed`): the longest suffix first
_SUFFIXES = (("_mb_s", "MB/s"), ("_ms", "ms"), ("_us", "µs"), ("_mb", "MB"), ("_pct", "%"), ("_bytes", "B"),
             ("_ratio", "x"), ("ratio", "x"), ("_x", "x"), ("_s", "s"))


def unit_of(name: str, value: float) -> str:
    for part in reversed(name.split(".")):  # `hover_ms.p50`: the unit is its parent's
        if part.startswith("x_"):  # `x_floor`: times the floor
            return "x"
        found = next((u for suffix, u in _SUFFIXES if part.endswith(suffix)), None)
        if found:
            return found
    return "count" if isinstance(value, int) else ""


def typed(figures: dict[str, Any], goals: Optional[dict[str, tuple[str, Optional[float]]]] = None,
          ok: Optional[bool] = None) -> Result:
    """A child's plain JSON figures typed: each number a `Figure` whose unit its name says (`*_ms`, `*_s`,
    `*_ratio`, an int a count), `goals` naming the better direction and limit of some (dotted names
    reach into nested dicts); whatever is not a number (words, flags, lists) goes to the notes. A child
    that failed (`ok: False` with an `error`) is a failed result."""
    goals = goals or {}
    out, notes = {}, {}
    for name, value in _flat(figures):
        if name == "ok":
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            better, limit = goals.get(name, ("", None))
            out[name] = Figure(value, unit_of(name, value), better, limit)
        else:
            notes[name] = value
    unknown = set(goals) - set(out)
    if unknown:  # a goal on a figure the child did not write: no verdict can be read from it
        notes["goals_without_a_figure"] = sorted(unknown)
        ok = False if ok is None else ok
    return Result(out, False if figures.get("ok") is False else ok, notes)


def _flat(value: dict[str, Any], key: str = "") -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for k, v in value.items():
        name = f"{key}.{k}" if key else str(k)
        found += _flat(v, name) if isinstance(v, dict) and v else [(name, v)]
    return found


def emit(result: Result) -> None:
    """The child's last word: its figures as one JSON line on stdout (the load taken now if not given)."""
    if result.load is None:
        result.load = Load.now()
    sys.stdout.write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")
    sys.stdout.flush()


def read_line(stdout: str) -> Optional[Result]:
    """The figures line a child wrote (its last, should it have written more), or None: the child
    wrote none. Every other line is left alone, JSON or not."""
    found = None
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict) and d.get("protocol") == PROTOCOL:
            found = d
    return Result.from_json(found) if found is not None else None


def _rounded(value: Optional[float]) -> Optional[float]:
    """Floats to 4 significant digits (the ledger is read by people too); ints and None as they are."""
    return float(f"{value:.4g}") if isinstance(value, float) else value
