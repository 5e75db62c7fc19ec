"""Shared by the benchmark's tests (test_benchmark*.py): the models of fixtures/bench, one full
measurement of Tiny (`measure_tiny`, the module fixture of test_benchmark.py: two fresh processes and the in-process timings), and the
in-process runs with the fresh processes replaced by canned figures (`fake_children`)."""

from __future__ import annotations

import ast
import os
import time
from pathlib import Path

import paths
from compile_lens.protocol import Benchmark, InputRecipe, TargetSpec
from compile_lens.worker.loader import build_target, import_file
from compile_lens.worker.measure.compile.cold_job import ColdJob, ColdResult
from compile_lens.worker.measure.run import benchmark as bench

FIXTURES = paths.FIXTURES / "bench"
MODELS = str(FIXTURES / "bench_models.py")
ROOT = str(FIXTURES)
DEVICE = os.environ.get("COMPILE_LENS_TEST_DEVICE", "cpu")
TINY_INPUTS = "(torch.randn(256, 32),)"
# the budget of the shared measurement (the line costs opted in: a busy machine's compiles may
# leave them no room)
MEASURED_S = 60
MEASURED_OUTPUT_CODE: list[str] = []  # the warm forward compile's, filled by `measure_tiny`


def line_of(name: str) -> int:
    for node in ast.walk(ast.parse(Path(MODELS).read_text())):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return node.lineno
    raise KeyError(name)


def spec(name: str, inputs: str) -> TargetSpec:
    kind = "module" if name[0].isupper() else "function"
    return TargetSpec(name, kind, line_of(name), inputs=InputRecipe("directive", inputs))


def load_models():
    return import_file(MODELS, ROOT)


def built(module, name: str, inputs: str = "(torch.randn(8, 32),)"):
    return build_target(module, spec(name, inputs), MODELS)


def measure_tiny(module):
    """One full benchmark of Tiny: two fresh processes and the in-process timings."""
    stages: list[str] = []
    started = time.perf_counter()
    parts: list[tuple] = []
    result = bench.run_benchmark(built(module, "Tiny", TINY_INPUTS), path=MODELS, root=ROOT, device=DEVICE,
                                 max_seconds=MEASURED_S, progress=stages.append,
                                 on_part=lambda *a: parts.append((*a, time.perf_counter() - started)),
                                 output_code=MEASURED_OUTPUT_CODE, opt_in=("lines",))
    return result, stages, time.perf_counter() - started, parts


CANNED = {"train": 9.0, "forward": 8.0}  # the cold compiles' seconds, per workload


def fake_children(monkeypatch):
    """Skip the fresh processes: canned cold compile times (each child's own workload), the rest
    measured for real; the jobs the children were given, in order."""
    jobs: list[ColdJob] = []

    def fake(job: ColdJob, *, cache_dir, timeout, progress=None) -> ColdResult:
        jobs.append(job)
        return ColdResult(compile_s={wl: CANNED[wl] for wl in job.workloads}, import_s=1.5)

    monkeypatch.setattr(bench, "run_child", fake)
    return jobs


def quick(module, name: str, inputs: str = "(torch.randn(8, 32),)", device: str = DEVICE) -> Benchmark:
    return bench.run_benchmark(built(module, name, inputs), path=MODELS, root=ROOT, device=device,
                               max_seconds=1)


