"""Where the forward's and the train step's time go, line by line (worker/measure/lines/costs.py), against real torch
and Inductor on the CPU (CUDA under scripts/gpu-check): one profiled compile of `Lines` is shared by the tests of its figures.

What is checked is what must hold on any machine: lines + unattributed = the compiled profile's
total; the lines Inductor fused name each other and the kernel its output code defines; an op
Inductor did not lower is a fallback at its line; both frames of a broken graph have lines; the
dominant line (a 1024² matmul, ~100× the rest) comes first in both columns; failures and a torch
without provenance keep the eager column. No timing thresholds.
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from paths import FIXTURES, SERVER  # noqa: E402

try:
    import compile_lens  # noqa: F401
except ImportError:
    sys.path.insert(0, str(SERVER))

from compile_lens.worker.loader import import_file  # noqa: E402
from compile_lens.worker.measure.compile.dynamo_watch import _clear_in_memory_caches  # noqa: E402
from compile_lens.worker.measure.lines import costs as line_costs  # noqa: E402
from compile_lens.worker.measure.lines import provenance  # noqa: E402
from compile_lens.worker.measure.lines import windows as line_windows  # noqa: E402

MODELS = FIXTURES / "line_costs" / "models.py"
DEVICE = os.environ.get("COMPILE_LENS_TEST_DEVICE", "cpu")  # scripts/gpu-check sets cuda
ROOT = str(MODELS.parent)
pytestmark = pytest.mark.slow


def line(tag: str) -> int:
    return next(i for i, text in enumerate(MODELS.read_text().splitlines(), 1) if f"# line: {tag}" in text)


def calls(model):
    x = torch.randn(256, 1024, device=DEVICE)
    model.to(DEVICE).eval()

    def eager():
        with torch.no_grad():
            return model(x)

    def make():
        _clear_in_memory_caches()
        compiled = torch.compile(copy.deepcopy(model))

        def call():
            with torch.no_grad():
                return compiled(x)
        return call
    return eager, make


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """OpenMP's threads spin-wait when other processes hold the cores (this machine is shared):
    an elementwise kernel then takes as long as the matmul. One thread slows all ops alike."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def profiled(one_thread):
    torch.manual_seed(0)
    model = import_file(str(MODELS), ROOT).Lines()
    eager, make = calls(model)
    found = line_costs.measure(eager, make, root=ROOT, device=DEVICE, eager_ms=100.0, compiled_ms=100.0)
    yield found
    torch._dynamo.reset()


def by_line(found):
    return {(Path(ln.path).name, ln.line): ln for ln in found.lines}


def test_lines_and_unattributed_add_up_to_the_profile(profiled):
    assert profiled.note is None and profiled.compiled_note is None, (profiled.note, profiled.compiled_note)
    compiled = sum(ln.compiled_us for ln in profiled.lines)
    assert profiled.unattributed_us is not None and profiled.unattributed_us >= 0
    assert compiled + profiled.unattributed_us == pytest.approx(profiled.profile_us["compiled"], abs=0.05 * len(profiled.lines) + 0.05)
    # each reason is a share of what no line took
    assert sum(v for k, v in profiled.unattributed_why.items() if not k.startswith("eager: ")) == \
        pytest.approx(profiled.unattributed_us, rel=0.01, abs=0.5)


def test_fused_lines_name_each_other_and_the_kernel_in_the_output_code(profiled):
    lines = by_line(profiled)
    fused = {line("relu"), line("mul"), line("add")}
    for n in fused:
        ln = lines[("models.py", n)]
        assert {r.line for r in ln.fused_with} >= fused - {n}, (n, ln.fused_with)
        generated = [k for k in ln.kernels if k.kind == "generated"]
        assert generated and all(k.lines >= 3 for k in generated), ln.kernels
    defined = {k for g in profiled.graphs for k in provenance.output_code_kernels(g.output_code)}
    named = {k.name for ln in profiled.lines for k in ln.kernels if k.kind == "generated"}
    assert named and named <= defined, (named, defined)
    # every kernel the output code defines that provenance ties to a workspace line is on a line
    tied = {k.name for g in profiled.graphs for k in g.kernels if k.kind == "generated"
            and any(str(MODELS) == p for s in k.stacks for p, _ in s)}
    assert tied <= named, (tied, named)


def test_the_code_behind_a_fused_line_is_its_kernels_source(profiled):
    """`compile-lens show FILE:LINE`: the generated kernel the line became, its C++ from the output code,
    with the lines fused into it named; extern kernels by name (no source of ours)."""
    from compile_lens.protocol import (
        Benchmark,
        CompileSeconds,
        Errors,
        PeakMemory,
        TargetResult,
        Timing,
    )
    from compile_lens.render.kernels_text import kernels_json, kernels_text, line_costs_at

    timing = Timing(1.0, 1.0, 1.0, 0.0, 0.0)
    profiled.into(timing)
    named = {k.name for ln in profiled.lines for k in ln.kernels if k.kind == "generated"}
    assert named and set(timing.kernel_sources) == named
    assert all("kernel(" in text for text in timing.kernel_sources.values())  # Inductor's C++ kernels
    result = TargetResult("Lines", "module", 1, benchmark=Benchmark("cpu", "cpu", "default", timing, None, CompileSeconds(), None,
                                                                    PeakMemory(), Errors(), Errors(), "x"))
    relu = line("relu")
    found = line_costs_at(result, str(MODELS), relu)
    text = kernels_text(result, str(MODELS), relu, found)
    [kernel] = [k for _, c in found for k in c.kernels if k.kind == "generated"]
    assert f"── {kernel.name} (generated; also from models.py:" in text
    assert timing.kernel_sources[kernel.name] in text
    assert [k["source"] for k in kernels_json(result, found) if k["kind"] == "generated"] == [
        timing.kernel_sources[kernel.name]]


def test_extern_and_fallback_kernels_are_named_at_their_lines(profiled):
    lines = by_line(profiled)
    matmul = lines[("models.py", line("matmul"))]
    assert any(k.kind == "extern" and "mm" in k.name for k in matmul.kernels), matmul.kernels
    assert not matmul.fallback
    fft = lines[("models.py", line("fft"))]
    assert fft.fallback and any(k.kind == "fallback" and "fft" in k.name for k in fft.kernels), fft.kernels


def test_both_frames_of_a_broken_graph_have_lines(profiled):
    after = by_line(profiled)[("models.py", line("after break"))]
    assert after.compiled_us and after.compiled_us > 0 and after.kernels
    assert after.eager_us and after.eager_us > 0


def test_the_dominant_line_comes_first_in_both_columns(profiled):
    top_eager = max(profiled.lines, key=lambda ln: ln.eager_us or 0)
    top_compiled = max(profiled.lines, key=lambda ln: ln.compiled_us or 0)
    assert top_eager.line == top_compiled.line == line("matmul")
    assert profiled.lines[0].line == line("matmul")  # sorted by cost


def test_a_torch_without_provenance_keeps_the_eager_column(monkeypatch):
    monkeypatch.setattr(provenance, "supported", lambda: "torch 2.4 has no Inductor provenance tracking")
    model = import_file(str(MODELS), ROOT).Lines()
    eager, _ = calls(model)

    def never():
        raise AssertionError("no compile without provenance")

    found = line_costs.measure(eager, never, root=ROOT, device=DEVICE, eager_ms=100.0, compiled_ms=100.0)
    assert found.note is None
    assert found.compiled_note.startswith("not on this torch")
    assert found.lines and all(ln.compiled_us is None for ln in found.lines)
    assert {ln.line for ln in found.lines} >= {line("matmul"), line("fft")}


def test_a_failed_profile_is_a_note_not_an_error():
    def broken():
        raise RuntimeError("the profiler is busy")

    found = line_costs.measure(broken, broken, root=ROOT, device=DEVICE, eager_ms=1.0, compiled_ms=1.0)
    assert found.note == "not measurable: RuntimeError: the profiler is busy"
    assert found.lines == [] and found.unattributed_us is None


def test_lines_come_from_this_compile_not_a_cached_one(profiled, tmp_path):
    """The same model one line lower in another folder: Inductor's caches would hand back the first
    compile's provenance (its file, its lines); the profiled compile skips them."""
    moved = tmp_path / "models.py"
    moved.write_text("\n" + MODELS.read_text())
    model = import_file(str(moved), str(tmp_path)).Lines()
    eager, make = calls(model)
    found = line_costs.measure(eager, make, root=str(tmp_path), device=DEVICE, eager_ms=100.0, compiled_ms=100.0)
    compiled = {(ln.path, ln.line) for ln in found.lines if ln.compiled_us}
    assert compiled and all(path == str(moved) for path, _ in compiled), compiled
    assert (str(moved), line("matmul") + 1) in compiled


@pytest.fixture(scope="module")
def trained(one_thread, tmp_path_factory):
    """The train step (forward, loss, backward, SGD step) of `Lines`, profiled once for the tests below, as
    the benchmark does it: the timed compile, its provenance caught as it compiled (`reading_timed_compiles`)."""
    from compile_lens.worker.measure.compile.cold import inductor_cache
    from compile_lens.worker.measure.workload.model import Model

    torch.manual_seed(0)
    model = import_file(str(MODELS), ROOT).Lines().to(DEVICE)
    x = torch.randn(256, 1024, device=DEVICE)
    eager = Model(model, model, (x,), False)
    with inductor_cache(str(tmp_path_factory.mktemp("inductor"))), line_costs.reading_timed_compiles():
        _clear_in_memory_caches()
        other = copy.deepcopy(model)
        timed = Model(torch.compile(other), other, (x,), False).run("train")
        timed()  # the warm compile: forward, then the backward with the first backward call
        source = line_costs.Timed(timed, provenance.take())
        found = line_costs.measure(eager.run("train"), source, root=ROOT, device=DEVICE, eager_ms=100.0, compiled_ms=100.0)
    yield found
    torch._dynamo.reset()


def test_train_step_backward_kernels_go_to_the_forward_lines_they_came_from(trained):
    assert trained.note is None and trained.compiled_note is None, (trained.note, trained.compiled_note)
    assert any(g.backward for g in trained.graphs) and any(not g.backward for g in trained.graphs)
    lines = by_line(trained)
    matmul = lines[("models.py", line("matmul"))]
    assert {(k.kind, k.backward) for k in matmul.kernels} >= {("extern", False), ("extern", True)}, matmul.kernels
    # a backward kernel named on a line is one the backward graph's output code defines
    backward_code = {k for g in trained.graphs if g.backward for k in provenance.output_code_kernels(g.output_code)}
    named = {k.name for ln in trained.lines for k in ln.kernels if k.backward and k.kind == "generated"}
    assert named and named <= backward_code, (named, backward_code)
    assert any(k.backward for k in lines[("models.py", line("after break"))].kernels)  # the second frame's backward
    assert any(k.backward for k in lines[("models.py", line("relu"))].kernels)


def test_train_step_lines_add_up_and_the_sgd_step_is_on_no_line(trained):
    compiled = sum(ln.compiled_us for ln in trained.lines)
    assert compiled + trained.unattributed_us == pytest.approx(trained.profile_us["compiled"], abs=0.05 * len(trained.lines) + 0.05)
    assert line_costs.WHY_OPTIMIZER in trained.unattributed_why
    assert "eager: " + line_costs.WHY_OPTIMIZER in trained.unattributed_why
    # every line is a line of the model: the loss and the SGD step (Compile Lens's loop) are on none
    assert {Path(ln.path).name for ln in trained.lines} == {"models.py"}
    top_eager = max(trained.lines, key=lambda ln: ln.eager_us or 0)
    top_compiled = max(trained.lines, key=lambda ln: ln.compiled_us or 0)
    assert top_eager.line == top_compiled.line == line("matmul")


TRITON_MODEL = '''import torch


def forward(a, b, c):
    x = a * 3.14
    y = torch.addmm(c, x, b)
    z = torch.nn.functional.gelu(y)
    return z
'''


def test_triton_kernels_replayed_on_the_cpu_go_to_their_lines(tmp_path):
    """The CUDA path's names, on the CPU: a graph's provenance as Inductor writes it for CUDA (torch's
    own test_provenance_tracing: `triton_poi_fused_mul_0:1`, `extern_kernels.mm:2`,
    `triton_poi_fused_addmm_gelu_1:3`), and a real profile of a call shaped as the compiled one runs on
    a GPU: the compiled region, `## Call CompiledFxGraph`, each Triton launch in a range named after its
    kernel (`_RecordFunctionFast`, as Inductor's launcher opens it) and the extern `aten::mm`. The
    CUDA time itself (`self_device_time_total`) is scripts/gpu-check's."""
    source = tmp_path / "tri.py"
    source.write_text(TRITON_MODEL)
    at = {tag: i for i, text in enumerate(TRITON_MODEL.splitlines(), 1) for tag in ("x =", "y =", "z =") if tag in text}

    def stack(n):
        return f'  File "{source}", line {n}, in forward\n    {TRITON_MODEL.splitlines()[n - 1].strip()}\n'

    stacks = {"triton_poi_fused_mul_0:1": [stack(at["x ="])], "extern_kernels.mm:2": [stack(at["y ="])],
              "triton_poi_fused_addmm_gelu_1:3": [stack(at["y ="]), stack(at["z ="])]}
    graphs = [provenance._graph("0/0", stacks, {}, "")]
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.randn(64)
    fast = torch._C._profiler._RecordFunctionFast

    def compiled_call():
        with torch.profiler.record_function("Torch-Compiled Region: 0/0"), \
                torch.profiler.record_function("## Call CompiledFxGraph replay ##"):
            with fast("triton_poi_fused_mul_0"):
                x = a * 3.14
            y = torch.mm(x, b)
            with fast("triton_poi_fused_addmm_gelu_1"):
                z = torch.nn.functional.gelu(y + c)
        return z

    prof = line_costs._profile(compiled_call, 5, "cpu")
    found = line_costs._attribute(line_windows.calls(prof, "cpu"), graphs, line_costs._Places(str(tmp_path)), "cpu")
    lines = {where[1]: us for where, us in found.per_line.items()}
    assert set(lines) == {at["x ="], at["y ="], at["z ="]}, lines
    names = {where[1]: {(k.name, k.kind) for k in shares.values()} for where, shares in found.kernels.items()}
    assert names[at["x ="]] == {("triton_poi_fused_mul_0", "generated")}
    assert names[at["y ="]] == {("extern_kernels.mm", "extern"), ("triton_poi_fused_addmm_gelu_1", "generated")}
    assert found.fused[(str(source), at["z ="])] == {(str(source), at["y ="])}
    assert found.total == pytest.approx(sum(found.per_line.values()) + sum(found.loose.values()), rel=1e-6)


def test_a_second_train_step_names_none_of_the_firsts_lines(trained, tmp_path):
    """Inductor's provenance globals keep every earlier lazily compiled backward graph's kernels
    (`kernel_provenance`, stale entries): after `trained`, another model's train step must still name
    only its own lines."""
    from compile_lens.worker.measure.workload.model import Model

    other = tmp_path / "other.py"
    other.write_text("import torch\n\n\nclass Two(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                     "        self.a = torch.nn.Linear(64, 64)\n\n    def forward(self, x):\n"
                     "        return torch.tanh(self.a(x))\n")
    model = import_file(str(other), str(tmp_path)).Two().to(DEVICE)
    x = torch.randn(32, 64, device=DEVICE)
    eager = Model(model, model, (x,), False)

    def make():
        _clear_in_memory_caches()
        copied = copy.deepcopy(model)
        return Model(torch.compile(copied), copied, (x,), False).run("train")

    found = line_costs.measure(eager.run("train"), make, root=str(tmp_path), device=DEVICE, eager_ms=1.0, compiled_ms=1.0)
    assert found.note is None and found.compiled_note is None, (found.note, found.compiled_note)
    assert {(Path(ln.path).name, ln.line) for ln in found.lines if ln.compiled_us} == {("other.py", 10)}
    assert any(k.backward for ln in found.lines for k in ln.kernels)
