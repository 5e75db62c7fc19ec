"""The code behind a line: the kernels a line became, from a measurement's line costs — each kernel's
kind, time and share, the lines fused with it — then each generated kernel's source as Inductor wrote
it (`Timing.kernel_sources`). Pure: `compile-lens show`, the editor's read-only document and the MCP
server read the same text and JSON."""

from __future__ import annotations

import os
from typing import Any

from ..protocol import LineCost, TargetResult


def line_costs_at(target: TargetResult, path: str, line: int) -> list[tuple[str, LineCost]]:
    """The line's costs in the forward and the train step (the measurement's line tables)."""
    b = target.benchmark
    found = []
    for label, timing in (("forward", b.forward if b else None), ("train step", b.train_step if b else None)):
        for cost in (timing.lines if timing else []):
            if cost.line == line and os.path.realpath(cost.path) == os.path.realpath(path):
                found.append((label, cost))
    return found


def _sources(target: TargetResult) -> dict[str, str]:
    b = target.benchmark
    return {**(b.forward.kernel_sources if b else {}), **(b.train_step.kernel_sources if b and b.train_step else {})}


def kernels_json(target: TargetResult, found: list[tuple[str, LineCost]]) -> list[dict[str, Any]]:
    sources = _sources(target)
    return [{"name": k.name, "kind": k.kind, "workload": label, "us": k.us, "backward": k.backward,
             "source": sources.get(k.name),  # generated kernels' (C++/Triton); None: an extern or fallback op
             "lines": [cost.line] + [f.line for f in cost.fused_with]}
            for label, cost in found for k in cost.kernels]


def kernels_text(target: TargetResult, path: str, line: int, found: list[tuple[str, LineCost]]) -> str:
    where = f"{os.path.basename(path)}:{line}"
    if target.benchmark is None:
        return f"{where}: `{target.name}` was not measured: {target.unmeasured or 'no measurement'}"
    if not found:
        return (f"{where}: no kernel of `{target.name}`'s measured line costs comes from this line "
                "(it takes under the profile's resolution, or runs no torch op)")
    rows = [f"{where} in `{target.name}`: the kernels this line became"]
    for label, cost in found:
        fused = ", ".join(f"{os.path.basename(f.path)}:{f.line}" for f in cost.fused_with)
        rows.append(f"  {label}: eager {cost.eager_us or 0:.1f} µs → compiled "
                    + (f"{cost.compiled_us:.1f} µs" if cost.compiled_us is not None else "not measured")
                    + (f", fused with {fused}" if fused else ""))
        for k in cost.kernels:
            share = f" (1/{k.lines} of it)" if k.lines > 1 else ""
            rows.append(f"    {k.kind:<9} {k.name}{' (backward)' if k.backward else ''}: "
                        + (f"{k.us:.1f} µs{share}" if k.us is not None else "no time (a trace has no profile)"))
    sources = _sources(target)
    shown = []
    for _, cost in found:
        for k in cost.kernels:
            if k.name in sources and k.name not in shown:
                shown.append(k.name)
                lines = ", ".join(f"{os.path.basename(r.path)}:{r.line}" for r in cost.fused_with)
                rows += ["", f"── {k.name} (generated{'; also from ' + lines if lines else ''}) ──", sources[k.name]]
    if not shown and any(k.kind == "generated" for _, cost in found for k in cost.kernels):
        rows.append("  (no generated source kept with this measurement: measure the file again)")
    return "\n".join(rows)
