"""jobs/analysis: one file's phases on a real worker. A worker that dies fails the phase it was in,
for that target only; the later phases say why they did not run; the other targets run again on
the replacement worker; a job re-sent after a death never erases what was already found."""

from __future__ import annotations

import shutil

import pytest

from compile_lens.discovery import discover
from compile_lens.discovery.inputs import resolve_inputs
from compile_lens.jobs.analysis import analyze_file, merge_result
from compile_lens.jobs.cache import cache_dir
from compile_lens.jobs.lanes import WorkerSlot, default_python, worker_env
from compile_lens.protocol import GraphBreak, Problem, TargetResult, phase_of, with_phase
from compile_lens.settings import Settings
from paths import FIXTURES


@pytest.mark.slow  # two workers import torch on a 2-core machine
async def test_a_crash_fails_its_own_targets_phases_and_the_rest_run_on_a_new_worker(tmp_path):
    path = tmp_path / "segfault.py"
    shutil.copy(FIXTURES / "faults" / "segfault.py", path)
    source = path.read_text()
    discovery = discover(source)
    discovery.targets = resolve_inputs(str(path), str(tmp_path), discovery.targets, source=source)
    slot = WorkerSlot("test", default_python(), str(tmp_path), worker_env(cache_dir()), spare=False)
    try:
        run = await analyze_file(slot, str(path), str(tmp_path), discovery, Settings(timeout_s=120),
                                 trace=True, recompiles=True)
    finally:
        await slot.stop()
    crashed, after = run.results["Segfaults"], run.results["AfterCrash"]
    assert crashed.status == "error" and phase_of(crashed, "trace").status == "failed"
    assert crashed.error.kind == "crash", crashed.error
    sweep = phase_of(crashed, "sweep")
    assert sweep.status == "not-run" and "the trace stopped the analysis process" in sweep.error.message
    assert after.status == "ok" and phase_of(after, "trace").status == "done"
    assert [b.line for b in after.graph_breaks] == [27]  # `.item()`, traced by the replacement worker
    assert slot.starts == 2
    assert run.problem is None


def test_a_resent_job_keeps_the_phases_an_earlier_one_settled():
    found = GraphBreak("m.py", 12, 9, 12, 30, "GB0124", "Tensor.item()", "", [], None, "item")
    old = with_phase(TargetResult("Net", "module", 5, graph_count=2, graph_breaks=[found]), "trace", "done")
    new = with_phase(TargetResult("Net", "module", 5), "sweep", "failed", Problem("timeout", "the sweep timed out"))
    merged = merge_result(old, new, ["trace"])
    assert merged.graph_breaks == [found] and merged.graph_count == 2
    assert [(p.name, p.status) for p in merged.phases] == [("trace", "done"), ("sweep", "failed")]
    assert merge_result(old, new, []) is new  # nothing settled before: the new result as it is
    failed = TargetResult("Net", "module", 5, status="error", error=Problem("call", "calling `Net` failed"))
    assert merge_result(failed, new, ["trace"]).status == "error"  # a target that could not run stays so
