"""`check --compare-with` in the terminal: one row per target, then what changed, then the verdict.

Pure: the dict of `torch_diff.compare` in, text out.
"""

from __future__ import annotations

from typing import Any, Optional


def _pair(a: Any, b: Any, show) -> str:
    left, right = (show(v) if v is not None else "–" for v in (a, b))
    return left if left == right else f"{left} → {right}"


def _speed(timing: Optional[dict]) -> Optional[str]:
    if not timing or timing.get("speedup") is None:
        return None
    return f"{timing['speedup']:.2f}×" + ("" if timing.get("conclusive") else "?")


def _figure(entry: dict, key: str, show) -> str:
    return _pair(entry[key]["base"], entry[key]["other"], show)


def row(entry: dict) -> list[str]:
    """The cells of one target: name, breaks, recompiles, forward, train step, cold compile, guards, export."""
    return [
        f"{entry['path']}:{entry['name']}",
        _pair(entry["graph_breaks"]["base"], entry["graph_breaks"]["other"], str),
        _figure(entry, "recompiles", str),
        _pair(_speed(entry["forward"]["base"]), _speed(entry["forward"]["other"]), str),
        _pair(_speed(entry["train_step"]["base"]), _speed(entry["train_step"]["other"]), str),
        _pair(*(None if entry["compile_cold_s"][side] is None else
                f"{entry['compile_cold_s'][side]:.1f} s" + ("?" if entry["busy"][side] else "")
                for side in ("base", "other")), str),
        _figure(entry, "guard_us_per_call", lambda g: f"{g['us']:.1f} µs"),
        _figure(entry, "export", str),
    ]


HEADER = ["target", "breaks", "recompiles", "forward", "train step", "cold compile", "guards/call", "export"]


def render_torch_diff_text(diff: dict) -> str:
    base, other = diff["base"], diff["other"]
    lines = [f"torch {base['torch']} ({base['python']}) → torch {other['torch']} ({other['python']})", ""]
    rows = [HEADER] + [row(t) for t in diff["targets"]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    for r in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    for t in diff["targets"]:
        for b in t["graph_breaks"]["added"] + t["graph_breaks"]["removed"]:
            sign = "+" if b in t["graph_breaks"]["added"] else "-"
            lines.append(f"  {sign} {b['path']}:{b['line']}: {b['id']}: {b['type']} ({t['name']})")
    for e in diff["file_errors"]:
        lines.append(f"  {e['path']}: {e['message']}")
    lines += ["", "? : inconclusive (a speedup's interval does not stand; a cold compile taken while other processes "
                  "used the machine); – : not measured",
              f"verdict: {diff['verdict']}"]
    return "\n".join(lines)
