"""The report's account of a measurement's own time (`render/report_time.py`): the compile by stage
from the cold children's frames, `stages_s`, and each part's state in words."""

from __future__ import annotations

from compile_lens.protocol import (
    Benchmark,
    CompileFrame,
    CompileSeconds,
    CompileTime,
    Errors,
    PartStatus,
    PeakMemory,
    TargetResult,
    Timing,
)
from compile_lens.render import report_html as rh
from compile_lens.render.report_time import breakdown_of, part_words, time_section


def _frame(cid: str, total: float, **stages: float) -> CompileFrame:
    return CompileFrame(cid, "forward", "/ws/m.py", 5, total, dict(stages))


def _target() -> TargetResult:
    bench = Benchmark(
        device="cpu", device_name="cpu", mode="default", forward=Timing(0.4, 0.2, 2.0, 0.01, 0.01, [1.9, 2.1], True, 12),
        train_step=None, compile_s=CompileSeconds(9.0, 1.5), break_even_calls=10,
        peak_memory_bytes=PeakMemory(10, 8, "x"), max_abs_error=Errors(), max_rel_error=Errors(),
        verdict="worth it", stages_s={"build": 1.0, "cold_child": 9.5, "warm_compiles": 1.5, "timing": 6.0,
                                      "to_forward": 18.2, "total": 25.0},
        compile_time=CompileTime([_frame("0/0", 3.0, dynamo=0.5, aot_autograd=0.5, inductor=1.0, codegen_build=1.0),
                                  _frame("1/0", 2.0, dynamo=0.25, aot_autograd=0.25, inductor=0.5, codegen_build=1.0)]))
    return TargetResult("MLP", "module", 5, benchmark=bench, parts={
        "forward": PartStatus("done", None, 18.2), "train_step": PartStatus("not-run", "no parameters"),
        "memory": PartStatus("done", None, 0.4), "lines": PartStatus("failed", "TimeoutError: 60 s"),
        "export": PartStatus("done", None, 1.1), "fallback_ops": PartStatus("pending"),
        "batch_sweep": PartStatus("not-run", "15 s budget")}, parts_s={"export": 1.1})


def test_the_compile_by_stage_is_the_cold_frames_summed():
    found = breakdown_of(_target().benchmark.compile_time)
    assert found == {"dynamo_s": 0.75, "aot_autograd_s": 0.75, "inductor_s": 1.5, "codegen_s": 2.0,
                     "total_s": 5.0, "graphs": 2}
    assert breakdown_of(CompileTime([_frame("0/0", 3.0)])) is None  # a torch without stage timers
    assert breakdown_of(None) is None


def test_each_part_says_where_it_stands():
    parts = _target().parts
    assert part_words("batch_sweep", parts["batch_sweep"]) == "batch sweep: not run, 15 s budget"
    assert part_words("fallback_ops", parts["fallback_ops"]) == "fallback ops: not measured yet"
    assert part_words("lines", parts["lines"]) == "line costs: not measurable: TimeoutError: 60 s"
    assert part_words("export", parts["export"]) == "torch.export: 1.1 s"


def test_the_report_says_where_the_time_went():
    t = _target()
    section = time_section(t)
    assert "the forward&#x27;s figures after 18.2 s" in section and "the measurement 25.0 s" in section
    assert "timing rounds" in section and "torch.export (deployment part)" in section
    assert "batch sweep: not run, 15 s budget" in section and "fallback ops: not measured yet" in section
    assert "torch.export: 1.1 s" not in section  # a part done is in the table, not the list
    page = rh.render_report(rh.file_reports_for([("/ws/m.py", [t], [])]), title="r", torch_version="2.13",
                            device="cpu", cwd="/ws", generated_at=0.0)
    assert "Latency vs batch size: not run, 15 s budget" in page
    assert "Stages from torch&#x27;s compilation metrics of the cold compiles" in page
    assert time_section(TargetResult("f", "function", 1)) == ""
