"""What another torch changes, target by target (`check --compare-with PYTHON`): the one pure
comparison of two analyses of the same files, JSON-safe (its shape is `torch_diff` in docs/torch-upgrades.md).

No torch, no I/O: two lists of `FileReport` in, a dict out. A figure counts as changed only when
it says so itself: speedups when both 95% intervals exist and do not overlap; a cold compile when
it moved by more than `COMPILE_CHANGE` (one run each, no interval) and neither side was measured on
a busy machine; guard µs per call when both are measurable (each interval wholly above 0, what
the measurement itself calls measurable), apart, and neither side was measured on a busy machine. Both
figures are always listed; the verdict names only what changed.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from typing import Any, Optional

from .busy.rule import contention_busy
from .protocol import FileReport, GraphBreak, TargetResult

SCHEMA = 1
COMPILE_CHANGE = 0.25  # a cold compile is one run: only a move beyond ±25% is named


def _release(version: Optional[str]) -> str:
    return (version or "?").split("+")[0]


def _break_key(b: GraphBreak, root: str) -> tuple[str, int, str]:
    return (os.path.relpath(b.path, root), b.line, b.gb_id or b.gb_type)


def _breaks(result: Optional[TargetResult], root: str) -> Counter:
    return Counter(_break_key(b, root) for b in result.graph_breaks) if result else Counter()


def _break_entries(found: Counter, types: dict) -> list[dict[str, Any]]:
    return [{"path": path, "line": line, "id": key, "type": types.get((path, line, key), key), "count": n}
            for (path, line, key), n in sorted(found.items())]


def _timing(result: Optional[TargetResult], which: str) -> Optional[dict[str, Any]]:
    bench = result.benchmark if result else None
    timing = getattr(bench, which, None) if bench else None
    if timing is None:
        return None
    ci = timing.speedup_ci if timing.speedup_ci and all(map(math.isfinite, timing.speedup_ci)) else None
    speedup = timing.speedup if math.isfinite(timing.speedup) else None
    return {"speedup": speedup, "ci": ci, "conclusive": timing.conclusive}


def _guard(result: Optional[TargetResult]) -> Optional[dict[str, Any]]:
    """Guard µs per call of the compiled forward, when the measurement has it (issue 28 item 3:
    `benchmark.forward.guard_us_per_call` and its interval); None on a measurement without it."""
    bench = result.benchmark if result else None
    forward = getattr(bench, "forward", None) if bench else None
    per_call = getattr(forward, "guard_us_per_call", None)
    if per_call is None:
        return None
    ci = getattr(forward, "guard_us_ci", None)
    # measurable: the interval is wholly above 0 (else the measurement leaves guard_share None, "not measurable")
    return {"us": per_call, "ci": ci, "measurable": bool(ci and ci[0] > 0)}


def _apart(a: Optional[list[float]], b: Optional[list[float]]) -> bool:
    return bool(a and b and (a[1] < b[0] or b[1] < a[0]))


def _cold(result: Optional[TargetResult]) -> Optional[float]:
    bench = result.benchmark if result else None
    return bench.compile_s.cold if bench else None


def _busy(result: Optional[TargetResult]) -> Optional[bool]:
    """Did other processes take our cores (or GPU) while this side was measured (the worker's own
    `contention`, by the busy rule: `busy.rule.contention_busy`)? None: not measured."""
    bench = result.benchmark if result else None
    if bench is None:
        return None
    return contention_busy(bench.contention)


def _export(result: Optional[TargetResult]) -> Optional[str]:
    if result is None or not result.export:
        return None
    if not result.export.ok:
        return "fails"
    return "strict" if result.export.strict else "non-strict"


def _status(result: Optional[TargetResult]) -> str:
    return "absent" if result is None else result.status  # "ok" | "error" | "skipped"


def _target(base: Optional[TargetResult], other: Optional[TargetResult], path: str, root: str) -> dict[str, Any]:
    name = (base or other).name  # type: ignore[union-attr]
    line = (base or other).line  # type: ignore[union-attr]
    before, after = _breaks(base, root), _breaks(other, root)
    types = {_break_key(b, root): b.gb_type for r in (base, other) if r for b in r.graph_breaks}
    added, removed = after - before, before - after
    changes: list[str] = []
    for sign, found in (("+", added), ("-", removed)):
        for (where, at, _), n in sorted(found.items()):
            changes.append(f"{sign}{n} graph break{'s' if n > 1 else ''} at {where}:{at}")
    status = {"base": _status(base), "other": _status(other)}
    if status["base"] != status["other"]:
        why = (other or base).error  # type: ignore[union-attr]
        changes.append(f"{status['base']} → {status['other']}" + (f" ({why.message})" if why else ""))
    recompiles: dict[str, Any] = {"base": len(base.recompiles) if base else None,
                                  "other": len(other.recompiles) if other else None}
    if base and other:
        # which input change recompiles, and how (a count alone would hide one that moved)
        ours, theirs = (Counter((r.variation, r.kind) for r in x.recompiles) for x in (base, other))
        recompiles["added"] = [{"variation": v, "kind": k} for (v, k) in sorted(theirs - ours)]
        recompiles["removed"] = [{"variation": v, "kind": k} for (v, k) in sorted(ours - theirs)]
        if recompiles["added"] or recompiles["removed"]:
            moved = [f"+{r['variation']}" for r in recompiles["added"]] + [f"-{r['variation']}"
                                                                          for r in recompiles["removed"]]
            changes.append(f"recompiles {recompiles['base']} → {recompiles['other']} ({', '.join(moved)})")
    figures: dict[str, Any] = {}
    for key, which, label in (("forward", "forward", "forward"), ("train_step", "train_step", "train step")):
        a, b = _timing(base, which), _timing(other, which)
        figures[key] = {"base": a, "other": b}
        if a and b and a["speedup"] and b["speedup"] and _apart(a["ci"], b["ci"]):
            changes.append(f"{label} {a['speedup']:.2f}× → {b['speedup']:.2f}×")
    cold = {"base": _cold(base), "other": _cold(other)}
    figures["compile_cold_s"] = cold
    busy = {"base": _busy(base), "other": _busy(other)}
    figures["busy"] = busy
    if cold["base"] and cold["other"] and abs(cold["other"] / cold["base"] - 1) > COMPILE_CHANGE \
            and busy["base"] is False and busy["other"] is False:
        changes.append(f"cold compile {cold['base']:.1f} → {cold['other']:.1f} s")
    guard = {"base": _guard(base), "other": _guard(other)}
    figures["guard_us_per_call"] = guard
    if guard["base"] and guard["other"] and guard["base"]["measurable"] and guard["other"]["measurable"] \
            and busy["base"] is False and busy["other"] is False and _apart(guard["base"]["ci"], guard["other"]["ci"]):
        changes.append(f"guards {guard['base']['us']:.1f} → {guard['other']['us']:.1f} µs")
    export = {"base": _export(base), "other": _export(other)}
    if None not in export.values() and export["base"] != export["other"]:
        changes.append(f"export {export['base']} → {export['other']}")
    return {
        "path": os.path.relpath(path, root), "name": name, "line": line, "status": status,
        "graph_breaks": {"base": sum(before.values()), "other": sum(after.values()),
                         "added": _break_entries(added, types), "removed": _break_entries(removed, types)},
        "recompiles": recompiles, **figures, "export": export,
        "changes": changes, "verdict": f"{name}: " + (", ".join(changes) if changes else "no change"),
    }


def compare(base: list[FileReport], base_runtime: dict, other: list[FileReport], other_runtime: dict,
            root: str) -> dict[str, Any]:
    """Per target of `base` and `other` (the same files, analysed with two torches), what changed,
    and a one-line verdict over them all."""
    old, new = _release(base_runtime.get("torch")), _release(other_runtime.get("torch"))
    theirs = {(r.path, t.name): t for r in other for t in r.targets}
    targets = []
    for report in base:
        for t in report.targets:
            targets.append(_target(t, theirs.pop((report.path, t.name), None), report.path, root))
    for (path, _), t in theirs.items():
        targets.append(_target(None, t, path, root))
    changed = [f"{c} ({t['name']})" for t in targets for c in t["changes"]]
    problems = [r for r in base + other if r.error]
    busy = sum(1 for t in targets if any(t["busy"].values()))
    summary = ", ".join(changed) if changed else f"no change in {len(targets)} target{'s' if len(targets) != 1 else ''}"
    if busy:  # an absent change there may be noise hiding one: said, so "no change" is not over-read
        summary += f" ({busy} measured while other processes used the machine: re-measure when idle to compare speed)"
    return {
        "schema": SCHEMA,
        "base": {"python": base_runtime.get("python_path"), "torch": base_runtime.get("torch")},
        "other": {"python": other_runtime.get("python_path"), "torch": other_runtime.get("torch")},
        "verdict": f"torch {old} → {new}: {summary}",
        "targets": targets,
        "file_errors": [{"path": os.path.relpath(r.path, root), "message": r.error.message} for r in problems
                        if r.error],
    }
