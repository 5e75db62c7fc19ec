"""The progress rows of a target's analysis: where each stands — landed, failed (why), not run (why),
or not measured yet — read from one `TargetResult` as it grows. Pure.

The rows, in the order a user waits for them: two phases, the graph breaks (`trace`) and the
`recompiles` (the sweep), then the measurement's parts (`protocol.PARTS`: `forward`, `train_step`,
`memory`, `lines`, `export`, `fallback_ops`, `batch_sweep`). A row is a phase or a part: `check
--stream` names it in its `"part"` field (a name users read, kept). The worker re-sends a target's growing result as each lands; which ones a result
holds is read from its fields, whatever order they came in:

- where the worker says how each part stands (`TargetResult.parts`, `PartStatus` by attribute),
  that is the answer;
- else from the figures: a benchmark holds the forward, the train step (if any), the memory and
  the line costs; `export`, `fallback_ops` and the report's batch sweep hold the rest; a part the
  worker could not measure is named in `unmeasured`;
- a measurement that ended (its phase settled) settles every part: those without figures then
  failed with it, or were not run.
`pending` ("not measured yet") is said only of a measurement in flight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..protocol import Benchmark, Report, TargetResult, phase_of

MEASURE_PARTS = ("forward", "train_step", "memory", "lines", "export", "fallback_ops", "batch_sweep")
ROWS = ("trace", "recompiles", *MEASURE_PARTS)

# each row in the user's words (the hover, the progress line)
LABELS = {"trace": "graph breaks", "recompiles": "recompiles", "forward": "forward", "train_step": "train step",
          "memory": "peak memory", "lines": "line costs", "export": "torch.export", "fallback_ops": "fallback ops",
          "batch_sweep": "batch sweep"}
# their names in `TargetResult.unmeasured` / `Benchmark.unmeasured` (`worker/measure/run/isolated`)
UNMEASURED_KEYS = {"export": "torch.export", "fallback_ops": "fallback ops", "batch_sweep": "batch sweep",
                   "memory": "peak memory"}
PHASE_OF_ROW = {"trace": "trace", "recompiles": "sweep"}  # the rows that are phases


@dataclass(frozen=True)
class RowState:
    status: str  # "done" | "failed" | "not-run" | "pending" (not measured yet: the measurement runs)
    why: Optional[str] = None  # failed / not-run: why, in the user's words


def row_state(result: TargetResult, row: str, *, in_flight: bool = False) -> Optional[RowState]:
    """Where `row` of `result` stands; None: not asked for, or nothing known of it yet.
    `in_flight`: the measurement of this result runs now (its missing parts are "pending")."""
    if row in PHASE_OF_ROW:
        return _phase_row(result, row)
    part = row  # the rest are the measurement's parts
    measure = phase_of(result, "measure")
    told = (getattr(result, "parts", None) or {}).get(part)  # the worker's word, where it sends one
    if told is not None and told.status != "pending":
        return RowState(told.status, told.why)
    landed = None if told is not None else _from_figures(result, part)
    if landed is not None:
        return landed
    if measure is not None and measure.status != "done":  # it ended without this part: said why
        why = measure.error.message.removeprefix("not run: ") if measure.error else None
        return RowState("failed" if measure.status == "failed" else "not-run", why)
    if measure is not None:  # measured, and this part has no figure (no train step, nothing checked)
        return RowState("not-run", _no_train_step(result.benchmark) if part == "train_step" else None)
    return RowState("pending") if in_flight or told is not None else None


def states(result: TargetResult, *, in_flight: bool = False) -> dict[str, RowState]:
    """Every row with an answer (or pending), in `ROWS` order."""
    found = {row: row_state(result, row, in_flight=in_flight) for row in ROWS}
    return {row: state for row, state in found.items() if state is not None}


def pending(result: TargetResult, *, in_flight: bool) -> list[str]:
    """The measurement's parts not measured yet, in order."""
    return [p for p in MEASURE_PARTS if (s := row_state(result, p, in_flight=in_flight)) and s.status == "pending"]


def _phase_row(result: TargetResult, row: str) -> Optional[RowState]:
    phase = phase_of(result, PHASE_OF_ROW[row])
    if phase is None:
        if row == "trace" and result.status == "error":
            return RowState("failed", result.error.message if result.error else None)
        if row == "trace" and result.graph_count is not None:  # a result cached before phases were kept
            return RowState("done")
        return None
    return RowState(phase.status, phase.error.message.removeprefix("not run: ") if phase.error else None)


def _from_figures(result: TargetResult, part: str) -> Optional[RowState]:
    """The part read from the figures the result holds (None: none of it there)."""
    b = result.benchmark
    key = UNMEASURED_KEYS.get(part)
    unmeasured = (b.unmeasured if b is not None and part == "memory" else result.unmeasured)
    if key is not None and key in unmeasured:
        why = unmeasured[key]
        if why.startswith("not run"):
            return RowState("not-run", why.removeprefix("not run").lstrip(": "))
        return RowState("failed", why.removeprefix("not measurable").lstrip(": "))
    if part in ("forward", "memory"):
        return RowState("done") if b is not None else None
    if part == "train_step":
        return None if b is None else RowState("done") if b.train_step is not None \
            else RowState("not-run", _no_train_step(b))
    if part == "lines":
        note = b.forward.lines_note if b is not None else None
        if b is None:
            return None
        if note and note.startswith("not run"):
            return RowState("not-run", note.removeprefix("not run").lstrip(": "))
        return RowState("failed", note.removeprefix("not measurable").lstrip(": ")) if note else RowState("done")
    report = result.report or Report()
    if part == "export":
        return RowState("done") if result.export is not None else None
    if part == "fallback_ops":
        return RowState("done") if result.fallback_ops or report.kernels is not None else None
    if part == "batch_sweep":
        return RowState("done") if report.batch_sweep is not None else None
    return None


def _no_train_step(b: Optional[Benchmark]) -> Optional[str]:
    """Why a measurement has no train step (its note says, where there is one)."""
    notes = b.notes if b is not None else []
    return next((n.split(":", 1)[1].strip() for n in notes if n.startswith("train step:")), None)


def row_data(target: dict[str, Any], part: str) -> Any:
    """Row `part`'s JSON as `check --format json` shows it, from the target's JSON there: the keys it
    fills, at their place (the measurement's under "benchmark")."""
    b = target.get("benchmark") or {}
    if part == "trace":
        return {"graph_count": target.get("graph_count"), "graph_breaks": target.get("graph_breaks")}
    if part in ("recompiles", "export", "fallback_ops"):
        return {part: target.get(part)}
    if part == "batch_sweep":
        return {"batch_sweep": target.get("batch_sweep")}
    if not b:
        return None
    if part == "lines":
        return {"benchmark": {w: None if b.get(w) is None else {k: b[w].get(k) for k in LINE_KEYS}
                              for w in ("forward", "train_step")}}
    return {"benchmark": {k: b.get(k) for k in BENCHMARK_KEYS[part]}}


LINE_KEYS = ("lines", "unattributed_us", "unattributed_why", "profile_us", "lines_note", "compiled_lines_note")
BENCHMARK_KEYS = {"forward": ("device", "device_name", "mode", "forward", "compile_s", "compile_time"),
                  "train_step": ("train_step", "compile_s", "break_even_calls", "verdict", "conclusive"),
                  "memory": ("peak_memory_bytes",)}
