"""The levers in words (`render/levers_text.py`) and `check --levers` refused beside `--no-benchmark`
before any work starts (a lever is judged against the measurement's figures)."""

from __future__ import annotations

import subprocess
import sys

from compile_lens.protocol import (
    LEVERS,
    ContentionReport,
    Lever,
    Problem,
    TargetResult,
    Timing,
    with_phase,
)
from compile_lens.render import phases
from compile_lens.render.cli_output import _target_json
from compile_lens.render.levers_text import levers_lines, offered, table_rows
from paths import FIXTURES, REPO


def _result() -> TargetResult:
    better = Lever("regional", "each Block in `blocks` (8) compiled once and reused (block.compile())", "better",
                   why="cold compile 40.0 s → 12.0 s, forward 1.01×",
                   action="Compile each Block once: cold compile 40.0 s → 12.0 s, forward 1.01× (measured)",
                   compile_s={"before": 40.0, "after": 12.0}, warm_compile_s={"before": 5.0, "after": 2.0},
                   forward=Timing(0.5, 0.49, 1.01, 0.0, 0.0, [0.97, 1.05], False, 12),
                   recompiles={"before": 1, "after": 1})
    failed = Lever("dynamic", "torch.compile(..., dynamic=True)", "not measured",
                   why="not measured: RuntimeError: Inductor fell over")
    guards = Lever("guard_filter", "torch.compile(..., options=...)", "no change", why="forward 1.00×: no measurable difference",
                   data={"filter": "skip_guard_on_globals_unsafe", "assumption": "no global changes"})
    return with_phase(TargetResult("Stack", "module", 3, levers=[better, failed, guards]), LEVERS, "done")


def test_one_line_per_lever_and_only_the_better_one_offered():
    result = _result()
    assert levers_lines(result) == [
        "regional compilation: better — cold compile 40.0 s → 12.0 s, forward 1.01×",
        "dynamic shapes: not measured: RuntimeError: Inductor fell over",
        "guard filter skip_guard_on_globals_unsafe: no change — forward 1.00×: no measurable difference"]
    assert [lever.lever for lever in offered(result)] == ["regional"]
    row = table_rows(result)[0]
    # an interval that cannot tell shows no ratio; a train step not timed shows none
    assert row[2:7] == ["40.0 s → 12.0 s", "5.0 s → 2.0 s", "no measurable change", "—", "1 → 1"]
    result.levers[0].train_step = Timing(2.0, 1.6, 1.25, 0.0, 0.0, [1.2, 1.3], True, 12)
    assert table_rows(result)[0][5] == "1.25× faster [1.20, 1.30]"


def test_the_json_and_the_phases_carry_the_levers_phase():
    result = _result()
    doc = _target_json(result)
    assert [lever["lever"] for lever in doc["levers"]] == ["regional", "dynamic", "guard_filter"]
    # a lever's `Timing` in the names docs/levers.md gives it; {} where not timed
    assert doc["levers"][0]["forward"] == {"before": 0.5, "after": 0.49, "speedup": 1.01, "ci": [0.97, 1.05],
                                           "conclusive": False, "rounds": 12}
    assert doc["levers"][0]["train_step"] == {} and doc["levers"][1]["forward"] == {}
    busy = "machine busy: other processes used 150% CPU during timing (2 CPUs)"
    result.levers[0].forward.busy, result.levers[0].forward.contention = busy, ContentionReport(busy=True, why=["…"])
    said = _target_json(result)["levers"][0]["forward"]
    # the JSON names the fields read (`cpus`, `threads`, `rule` always), as the reading printed them
    assert (said["busy"], said["contention"]) == (busy, {"cpus": 1, "threads": 1, "rule": "cpu", "busy": True,
                                                         "why": ["…"]})
    assert doc["phases"]["levers"] == {"status": "done", "error": None}
    failed = with_phase(result, LEVERS, "failed", Problem("timeout", "the levers phase took too long"))
    assert "levers phase failed: the levers phase took too long" in phases.summary(failed)
    assert "levers" not in _target_json(TargetResult("Net", "module", 1))["phases"]  # not asked for: not said


def test_levers_without_the_measurement_is_a_usage_error():
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "check", str(FIXTURES / "levers" / "blocks.py"),
                           "--levers", "--no-benchmark"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--levers needs the measurement" in done.stderr


def test_the_report_has_a_levers_table_per_target_that_tried_them():
    from compile_lens.protocol import FileReport
    from compile_lens.render.report_html import render_report

    tried = FileReport("/w/blocks.py", targets=[_result(), TargetResult("Other", "module", 30)])
    page = render_report([tried], title="Compile report", torch_version="2.13.0+cpu", device="cpu", cwd="/w")
    section = page.split("<h2>Levers</h2>", 1)[1].split("</section>", 1)[0]
    assert "<h3>Stack" in section and "Other" not in section  # Other's levers phase did not run
    assert "<td>40.0 s → 12.0 s</td>" in section and "<td>better</td>" in section
    assert "<h2>Levers</h2>" not in render_report([FileReport("/w/x.py", targets=[TargetResult("X", "module", 1)])],
                                                  title="r", torch_version=None, device="cpu", cwd="/w")
