"""The levers phase in words and rows, for every view (CLI text and JSON, hover, report). Pure.

One line per lever tried: `regional: better — cold compile 41.0 s → 7.0 s, forward 0.98× (each Block
in `blocks` (8) compiled once…)`; a table per target for the report; the JSON is `Lever` as is, its
timings in the names the levers page gives them (`timing_json`)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

from ..positions import same_file
from ..protocol import Lever, TargetResult, Timing
from ..speed_words import pair_words

NAMES = {"regional": "regional compilation", "dynamic": "dynamic shapes", "static": "static shapes",
         "guard_filter": "guard filter", "aot_artifact": "aot_compile artifact", "cudagraphs": "CUDA graphs",
         "max_autotune": "max-autotune"}


def lever_line(lever: Lever) -> str:
    """`regional compilation: better — cold compile 41.0 s → 7.0 s, forward 0.98×`, or
    `dynamic shapes: not measured: <why>`."""
    name = lever_name(lever)
    if lever.verdict == "not measured" and lever.why.startswith("not measured"):
        return f"{name}: {lever.why}"
    return f"{name}: {lever.verdict} — {lever.why or lever.change}"


def lever_name(lever: Lever) -> str:
    """`regional compilation`; a guard filter with the filter it tried (there is one lever per filter)."""
    name = NAMES.get(lever.lever, lever.lever)
    return f"{name} {lever.data['filter']}" if lever.data.get("filter") else name


def levers_lines(result: TargetResult) -> list[str]:
    """What the levers phase tried on `result`, one line each; nothing when it did not run."""
    return [lever_line(lever) for lever in result.levers]


def cudagraph_skips_in(results: list[TargetResult], path: str) -> list[tuple[int, str, str]]:
    """The CUDA-graphs lever's skips that torch traced to a line of `path`: (line, label, the target),
    for an inlay hint at the end of that line (`CUDA graphs skipped: mutated inputs (1 instances)`)."""
    found = []
    for result in results:
        for lever in result.levers:
            for skip in lever.data.get("skips") or () if lever.lever == "cudagraphs" else ():
                if skip.get("line") and same_file(skip.get("path"), path):
                    found.append((int(skip["line"]), f"CUDA graphs skipped: {skip['reason']}", result.name))
    return found


def levers_json(result: TargetResult) -> list[dict[str, Any]]:
    return [{**dataclasses.asdict(lever), "forward": timing_json(lever.forward),
             "train_step": timing_json(lever.train_step)} for lever in result.levers]


def timing_json(t: Optional[Timing]) -> dict[str, Any]:
    """A lever's `Timing` as docs/levers.md names it: {"before", "after", "speedup", "ci", "conclusive",
    "rounds"}, with "busy" (and the busy rule's "contention") where other processes took our cores; {}:
    not timed."""
    if t is None:
        return {}
    found: dict[str, Any] = {"before": t.eager_ms, "after": t.compiled_ms, "speedup": t.speedup, "ci": t.speedup_ci,
                             "conclusive": t.conclusive, "rounds": t.rounds}
    if t.busy:
        found.update(busy=t.busy, contention=t.contention.json() if t.contention else {})
    return found


def specialised_here(results: list[TargetResult], path: str, line: int) -> list[str]:
    """The hover of a line the dynamic lever found making a varied dimension a constant (torch's
    `symbolic_shape_specialization`, `Lever.data["specialized"]`): what it did and what it costs."""
    found = []
    for result in results:
        for lever in result.levers:
            for spec in lever.data.get("specialized") or []:
                if spec.get("line") == line and os.path.abspath(spec.get("path") or "") == os.path.abspath(path):
                    found.append(f"**Specialised here** — this line made dimension {spec['dim']} of `{spec['input']}` a "
                                 f"constant ({spec['value']}) when `{result.name}` compiled with dynamic=True: each new "
                                 f"size of it compiles again, whatever `dynamic` says ({lever_name(lever)}: "
                                 f"{lever.verdict}).")
    return found


def offered(result: TargetResult) -> list[Lever]:
    """The levers a code action offers: those measured better, with the edit's title."""
    return [lever for lever in result.levers if lever.verdict == "better" and lever.action]


def _figure(pair: dict[str, Any], unit: str) -> str:
    before, after = pair.get("before"), pair.get("after")
    if before is None or after is None:
        return "—"
    return f"{before:.2f} {unit} → {after:.2f} {unit}" if unit == "ms" else f"{before:.1f} {unit} → {after:.1f} {unit}"


def _speed(timing: Optional[Timing]) -> str:
    """`1.20× faster [1.10, 1.30]`, `no measurable change`, `inconclusive, machine busy` (`speed_words`)."""
    if timing is None:
        return "—"
    words = pair_words(timing, "").lstrip(": ").strip()
    ci = timing.speedup_ci
    return words + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if timing.conclusive and ci else "")


def table_rows(result: TargetResult) -> list[list[str]]:
    """The report's levers table: lever, change, cold compile, warm compile, forward, train step,
    compiles, verdict, why."""
    rows = []
    for lever in result.levers:
        compiles: Optional[str] = None
        if lever.recompiles.get("before") is not None:
            compiles = f"{lever.recompiles['before']} → {lever.recompiles['after']}"
        rows.append([lever_name(lever), lever.change, _figure(lever.compile_s, "s"),
                     _figure(lever.warm_compile_s, "s"), _speed(lever.forward), _speed(lever.train_step),
                     compiles or "—", lever.verdict, lever.why])
    return rows


TABLE_HEADER = ["lever", "change", "cold compile", "warm compile", "forward (lever/default)",
                "train step (lever/default)", "compiles", "verdict", "why"]
