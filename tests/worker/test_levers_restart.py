"""The restart-path lever (`aot_artifact`): an `aot_compile` artifact built in one fresh process and
loaded in another with an empty Inductor cache gives the eager output at its first call; a target that
breaks the graph comes back as such (the lever is not shown); a torch without the API says "not on this
torch"; the fastest restart path is named, and the GPU bill prices a restart at it.

The fresh-process tests are marked slow: one compile of a Linear + ReLU, its artifact loaded by another
process sharing its Inductor cache folder (so the CPU's C++ kernels are built once), and one trace that
stops at a graph break. The lever's own empty-cache figures are `benchmarks/measure/restart.py`'s."""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import pytest
import torch

from compile_lens.cost import CostInputs, restart_lines
from compile_lens.protocol import (
    Benchmark,
    CompileSeconds,
    Errors,
    FileReport,
    InputRecipe,
    Lever,
    PeakMemory,
    Phase,
    TargetResult,
    TargetSpec,
    Timing,
)
from compile_lens.render.report_levers import levers_section
from compile_lens.worker.levers import aot_artifact
from compile_lens.worker.levers.sides import compile_side
from compile_lens.worker.loader import build_target, import_file
from compile_lens.worker.measure.compile.cold import run_child
from compile_lens.worker.measure.workload.model import compile_kwargs
from paths import FIXTURES


def _target(relative: str, name: str, inputs: str):
    path = FIXTURES / relative
    line = next(i for i, row in enumerate(path.read_text().splitlines(), 1) if row.startswith(f"class {name}"))
    spec = TargetSpec(name, "module", line, inputs=InputRecipe("directive", inputs))
    return build_target(import_file(str(path), str(path.parent)), spec, str(path)), str(path)


def _restart(target, path: str, task: str, files: dict, cache_dir: Optional[str] = None) -> dict:
    """One restart task in a fresh process: with its own empty Inductor cache (the lever's way), or in
    `cache_dir` (shared across the test's processes: the CPU's C++ build is paid once, not per process)."""
    extra = {**files, "task": task, "compile_kwargs": compile_kwargs(target, "default")}
    if cache_dir is None:
        return compile_side(target, "default", path=path, root=os.path.dirname(path), device="cpu", mode="default",
                            max_seconds=20.0, progress=lambda stage, **kw: None, module=aot_artifact.CHILD, extra=extra)
    job = {"path": path, "root": os.path.dirname(path), "spec": dataclasses.asdict(target.spec), "device": "cpu",
           "mode": "default", "variant": "default", "shapes": [], **extra}
    return run_child(job, cache_dir=cache_dir, timeout=300.0, module=aot_artifact.CHILD)


@pytest.mark.slow
def test_an_aot_artifact_saved_in_one_process_runs_in_a_fresh_one(tmp_path):
    # one bias-free Linear: the artifact holds Inductor's compiled graph as any model's, with no C++ kernel to build
    target, path = _target("levers/linear.py", "Tiny", "(torch.randn(8, 16),)")
    files = {"aot": str(tmp_path / "fn.aot"), "mega": str(tmp_path / "mega.bin")}
    (tmp_path / "cache").mkdir()
    built = _restart(target, path, "aot_save", files, str(tmp_path / "cache"))
    assert built["bytes"] == os.path.getsize(files["aot"]) > 0 and not built.get("graph_breaks")
    loaded = _restart(target, path, "aot_load", files, str(tmp_path / "cache"))  # another process
    assert loaded["max_abs_error"] is not None and loaded["max_abs_error"] <= 1e-5
    assert loaded["cold_s"] > 0 and loaded["cold_cpu_s"] > 0


@pytest.mark.slow
def test_a_target_that_breaks_the_graph_is_not_an_aot_candidate(tmp_path):
    target, path = _target("levers/blocks_break.py", "BrokenStack", "(torch.randn(2, 8, 32),)")
    built = _restart(target, path, "aot_save", {"aot": str(tmp_path / "fn.aot"), "mega": str(tmp_path / "m")})
    assert built["graph_breaks"] and not os.path.exists(tmp_path / "fn.aot")
    lever = Lever("aot_artifact", aot_artifact.CHANGE, "not measured", data={"graph_breaks": built["graph_breaks"]})
    assert aot_artifact.dropped(lever)


def test_a_traced_graph_break_keeps_the_lever_out_before_anything_compiles():
    broken = TargetResult("M", "module", 1, graph_count=2)
    assert not aot_artifact.applies(broken, torch.nn.Linear(2, 2))
    assert aot_artifact.applies(TargetResult("M", "module", 1, graph_count=1), torch.nn.Linear(2, 2))
    assert not aot_artifact.applies(TargetResult("M", "module", 1), torch.nn.Linear(2, 2))  # not traced: not known


def test_a_torch_without_aot_compile_says_so(monkeypatch):
    assert aot_artifact.missing() is None  # torch 2.13 has it
    monkeypatch.delattr(torch.compiler, "load_compiled_function")
    assert aot_artifact.missing().startswith("not measured: not on this torch (torch ")


PATHS = {"cold": 35.0, "warm": 7.5, "mega_cache": 12.0, "warm_remote": None, "aot_artifact": 4.75}


def test_the_fastest_path_measured_is_named():
    assert aot_artifact.fastest(PATHS) == "aot_artifact"
    assert aot_artifact.fastest({**PATHS, "aot_artifact": 40.0}) == "warm"
    assert aot_artifact.fastest({k: None for k in PATHS}) is None
    words = aot_artifact.paths_words(PATHS)
    assert words.endswith("aot_compile artifact 4.8 s (fastest)") and "remote" not in words


def test_the_remote_path_is_a_restart_path_only_when_the_measurement_timed_the_forward_alone():
    forward = Timing(1.0, 0.5, 2.0, 0.1, 0.1)
    default, loaded = {"cold_s": 35.004, "warm_s": 7.5}, {"cold_s": 4.75}
    served_forward = Benchmark("cpu", "cpu", "default", forward, None, CompileSeconds(30.0, warm_remote=6.0), None, PeakMemory(),
                               Errors(), Errors(), "faster")
    paths, apart = aot_artifact.restart_paths(default, {"cold_s": 12.0}, loaded, served_forward)
    assert paths == {"cold": 35.0, "warm": 7.5, "mega_cache": 12.0, "warm_remote": 6.0, "aot_artifact": 4.75}
    assert apart == {}
    served_train = dataclasses.replace(served_forward, train_step=forward)  # its first workload: the train step
    paths, apart = aot_artifact.restart_paths(default, None, loaded, served_train)
    assert paths["warm_remote"] is None and paths["mega_cache"] is None and apart == {"warm_remote_train_step_s": 6.0}
    assert aot_artifact.restart_paths(default, None, loaded, None)[0]["warm_remote"] is None


def test_the_gpu_bill_prices_a_restart_at_the_fastest_path():
    [line] = restart_lines(PATHS, CostInputs(price_per_gpu_hour=3.6, gpus=8))
    assert line == ("GPU bill: the fastest restart measured is 4.8 s (a fresh process loading the aot_compile "
                    "artifact) on 8 GPUs = 0.04 per restart (cold: 35.0 s = 0.28)")
    [line] = restart_lines(PATHS, CostInputs())
    assert line.endswith("(cold: 35.0 s); set a GPU price per hour for money figures")
    [line] = restart_lines({**PATHS, "warm": 0.13}, CostInputs(price_per_gpu_hour=3.6, gpus=8))
    assert line == ("GPU bill: the fastest restart measured is 0.1 s (this machine's disk cache) on 8 GPUs = 0.00 "
                    "per restart; on a fresh machine 4.8 s (a fresh process loading the aot_compile artifact) = 0.04 "
                    "(cold: 35.0 s = 0.28)")
    assert restart_lines({"cold": None}, CostInputs()) == []


def test_the_report_shows_the_restart_line_under_the_levers_table():
    lever = Lever("aot_artifact", aot_artifact.CHANGE, "better", why="restart 35.0 s → 4.8 s",
                  compile_s={"before": 35.0, "after": 4.75}, data={"paths": PATHS, "fastest": "aot_artifact"})
    result = TargetResult("Tiny", "module", 5, levers=[lever], phases=[Phase("levers", "done")])
    page = type("Page", (), {"loc": staticmethod(lambda path, line: f"{path}:{line}")})()
    html = levers_section(page, [FileReport("/w/tiny.py", targets=[result])], CostInputs(price_per_gpu_hour=2.0))
    assert "aot_compile artifact" in html and "35.0 s → 4.8 s" in html
    assert "the fastest restart measured is 4.8 s" in html and "= 0.00 per restart (cold: 35.0 s = 0.02)" in html
    assert dataclasses.asdict(lever)["data"]["paths"]["aot_artifact"] == 4.75  # the JSON carries every path
