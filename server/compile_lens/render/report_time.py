"""The compile report's account of a measurement's own time: the compile by stage from the cold
child's frames (`Benchmark.compile_time`, no compile of the report's own), where the measurement's
wall time went (`Benchmark.stages_s`), and each part's state (`TargetResult.parts`: "not measured
yet", "not run: why", "not measurable: why") with its seconds. Pure."""

from __future__ import annotations

from typing import Any, Optional

from ..protocol import CompileTime, TargetResult
from .html_parts import _e

PART_LABELS = {"forward": "forward", "train_step": "train step", "memory": "peak memory", "lines": "line costs",
               "export": "torch.export", "fallback_ops": "fallback ops", "batch_sweep": "batch sweep"}
STAGE_LABELS = {"build": "building and running eagerly", "cold_child": "forward's cold compile (fresh process)",
                "cold_child_train": "train step's cold compile (fresh process)", "warm_compiles": "warm compiles",
                "accuracy_warmup": "accuracy and warm-up", "timing": "timing rounds", "memory": "peak memory",
                "line_costs": "line costs", "warm_remote_children": "warm-remote compiles"}


def breakdown_of(ct: Optional[CompileTime]) -> Optional[dict[str, Any]]:
    """The cold compile's frames summed by stage, keyed as `report_charts.STAGES`; None without stages."""
    if ct is None or not ct.frames or not any(f.stages_s for f in ct.frames):
        return None

    def total(key: str) -> float:
        return sum(f.stages_s.get(key, 0.0) for f in ct.frames)

    return {"dynamo_s": total("dynamo"), "aot_autograd_s": total("aot_autograd"), "inductor_s": total("inductor"),
            "codegen_s": total("codegen_build"), "total_s": sum(f.total_s for f in ct.frames), "graphs": len(ct.frames)}


def part_words(name: str, state: Any) -> str:
    """One part's state in the user's words: "batch sweep: not run, 15 s budget"."""
    label = PART_LABELS.get(name, name.replace("_", " "))
    if state.status == "pending":
        return f"{label}: not measured yet"
    if state.status == "not-run":
        return f"{label}: not run" + (f", {state.why}" if state.why else "")
    if state.status == "failed":
        return f"{label}: not measurable" + (f": {state.why}" if state.why else "")
    return f"{label}: {state.seconds:.1f} s" if state.seconds is not None else f"{label}: done"


def time_section(t: TargetResult) -> str:
    """Where the measurement's time went, and each part's state; "" before anything was measured."""
    b = t.benchmark
    stages = dict(b.stages_s) if b else {}
    rows = [(STAGE_LABELS.get(k, k.replace("_", " ")), v) for k, v in stages.items()
            if k in STAGE_LABELS and v]
    rows += [(PART_LABELS.get(k, k) + " (deployment part)", v) for k, v in t.parts_s.items()]
    if not rows and not t.parts:
        return ""
    body = "".join(f"<tr><td>{_e(label)}</td><td class=\"num\">{v:.1f} s</td></tr>" for label, v in rows)
    head = []
    if "to_forward" in stages:
        head.append(f"the forward's figures after {stages['to_forward']:.1f} s")
    if "total" in stages:
        head.append(f"the measurement {stages['total']:.1f} s")
    parts = [part_words(n, s) for n, s in t.parts.items() if s.status != "done"]
    return ('<div class="time"><p class="muted">Where the time went: ' + _e(", ".join(head) or "—") + "</p>"
            + (f'<table class="compact">{body}</table>' if body else "")
            + (f'<p class="muted">{_e("; ".join(parts))}</p>' if parts else "") + "</div>")
