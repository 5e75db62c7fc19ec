"""Where the line costs' compiled column comes from, and the rules every table keeps (issue 42):
the timed compile read with its provenance, a compile of its own that no environment variable can
serve from a cache, a graph served from a cache entry without provenance said as such, events given
to a call by its time window on any thread (CUDA's autograd device thread, here a TorchScript fork),
the device clock's parts, and the caveat of a table that is no finding. Real torch on the CPU."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from paths import FIXTURES, SERVER  # noqa: E402

try:
    import compile_lens  # noqa: F401
except ImportError:
    sys.path.insert(0, str(SERVER))

from compile_lens.protocol import ContentionReport  # noqa: E402
from compile_lens.worker.loader import import_file  # noqa: E402
from compile_lens.worker.measure.compile.cold import inductor_cache  # noqa: E402
from compile_lens.worker.measure.compile.dynamo_watch import _clear_in_memory_caches  # noqa: E402
from compile_lens.worker.measure.lines import costs as line_costs  # noqa: E402
from compile_lens.worker.measure.lines import provenance  # noqa: E402
from compile_lens.worker.measure.lines import windows as line_windows  # noqa: E402

MODELS = FIXTURES / "line_costs" / "models.py"
TWO = "import torch\n\n\nclass Two(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n" \
      "        self.a = torch.nn.Linear(64, 64)\n\n    def forward(self, x):\n        return torch.tanh(self.a(x)) * 2.0\n"
pytestmark = pytest.mark.slow


def forward_of(model, x):
    def call():
        with torch.no_grad():
            return model(x)
    return call


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_timed_compile_is_read_with_its_provenance(tmp_path):
    """The benchmark's path: the compile made inside `reading_timed_compiles` is the one profiled;
    its kernels are on the model's line, and no second compile happens for the line costs."""
    (tmp_path / "two.py").write_text(TWO)
    model = import_file(str(tmp_path / "two.py"), str(tmp_path)).Two().eval()
    x = torch.randn(32, 64)
    with inductor_cache(str(tmp_path / "cache")), line_costs.reading_timed_compiles():
        _clear_in_memory_caches()
        compiled = torch.compile(copy.deepcopy(model))
        call = forward_of(compiled, x)
        call()
        graphs = provenance.take()
        assert graphs and provenance.take() == []  # taken once; the next workload's catch is fresh

        graphs_before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        found = line_costs.measure(forward_of(model, x), line_costs.Timed(call, graphs), root=str(tmp_path),
                                   device="cpu", eager_ms=1.0, compiled_ms=1.0)
        assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs_before  # nothing compiled again
    torch._dynamo.reset()
    assert found.note is None and found.compiled_note is None, (found.note, found.compiled_note)
    [ln] = [ln for ln in found.lines if ln.compiled_us]
    assert (Path(ln.path).name, ln.line) == ("two.py", 10)
    assert {k.kind for k in ln.kernels} >= {"generated", "extern"}


def test_a_graph_served_without_provenance_says_so(tmp_path):
    """A cache entry written without provenance (what torch 2.11's key let the profiled compile be
    served): Inductor replays the output code and empty provenance. Its kernels' time is "no
    provenance (served from cache)", never Inductor's runtime."""
    (tmp_path / "two.py").write_text(TWO)
    model = import_file(str(tmp_path / "two.py"), str(tmp_path)).Two().eval()
    x = torch.randn(32, 64)
    with inductor_cache(str(tmp_path / "cache")):
        _clear_in_memory_caches()
        forward_of(torch.compile(copy.deepcopy(model)), x)()  # writes the entry, provenance off
        torch._dynamo.reset()
        _clear_in_memory_caches()
        with provenance.catching() as caught:
            call = forward_of(torch.compile(copy.deepcopy(model)), x)
            call()  # served from the entry
        assert caught.graphs and not any(g.kernels for g in caught.graphs)
        assert any(provenance.output_code_kernels(g.output_code) for g in caught.graphs)
        found = line_costs.measure(forward_of(model, x), line_costs.Timed(call, caught.graphs), root=str(tmp_path),
                                   device="cpu", eager_ms=1.0, compiled_ms=1.0)
    torch._dynamo.reset()
    assert found.compiled_note and found.compiled_note.startswith("no provenance (served from cache)")
    assert found.unattributed_why.get(line_costs.WHY_SERVED, 0) > 0, found.unattributed_why
    assert line_costs.WHY_INDUCTOR_RUNTIME not in found.unattributed_why or \
        found.unattributed_why[line_costs.WHY_INDUCTOR_RUNTIME] < found.unattributed_why[line_costs.WHY_SERVED]


FORCED = textwrap.dedent('''
    import copy, json, sys
    import torch
    torch.set_num_threads(1)
    from compile_lens.worker.loader import import_file
    from compile_lens.worker.measure.lines import costs as line_costs
    from compile_lens.worker.measure.compile.dynamo_watch import _clear_in_memory_caches
    x = torch.randn(256, 1024)
    out = []
    for path, root in zip(sys.argv[1::2], sys.argv[2::2]):
        model = import_file(path, root).Lines().eval()
        def make(model=model):
            _clear_in_memory_caches()
            compiled = torch.compile(copy.deepcopy(model))
            def call():
                with torch.no_grad():
                    return compiled(x)
            return call
        def eager(model=model):
            with torch.no_grad():
                return model(x)
        found = line_costs.measure(eager, make, root=root, device="cpu", eager_ms=100.0, compiled_ms=100.0)
        out.append([[ln.path, ln.line, ln.compiled_us] for ln in found.lines])
        torch._dynamo.reset()
    print("RESULT " + json.dumps(out))
''')


def test_a_forced_fx_graph_cache_in_the_environment_cannot_serve_the_profiled_compile(tmp_path):
    """`TORCHINDUCTOR_FX_GRAPH_CACHE=1` (what the worker's environment set) overrides any config set in
    code: the profiled compile's `fx_graph_cache: False` did nothing, and the same model one line lower
    in another folder got the first compile's provenance (its file, its lines). A compile of its own
    runs in a cache folder of its own: its lines are its file's."""
    moved = tmp_path / "moved" / "models.py"
    moved.parent.mkdir()
    moved.write_text("\n" + MODELS.read_text())
    env = dict(os.environ, TORCHINDUCTOR_FX_GRAPH_CACHE="1", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "shared-cache"),
               PYTHONPATH=os.pathsep.join(p for p in (str(SERVER), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-c", FORCED, str(MODELS), str(MODELS.parent), str(moved), str(moved.parent)],
                          capture_output=True, text=True, env=env, timeout=900)
    line = next((r for r in proc.stdout.splitlines() if r.startswith("RESULT ")), None)
    assert line, proc.stderr[-3000:]
    first, second = json.loads(line[len("RESULT "):])
    assert any(c for _, _, c in first)
    compiled = {(p, n) for p, n, c in second if c}
    assert compiled and all(p == str(moved) for p, _ in compiled), compiled
    matmul = next(i for i, t in enumerate(MODELS.read_text().splitlines(), 1) if "# line: matmul" in t)
    assert (str(moved), matmul + 1) in compiled


FORKED = """
import sys, torch
from compile_lens.worker.measure.lines import windows as line_windows

@torch.jit.script
def _half(x):
    return torch.mm(x, x)

@torch.jit.script
def _forked(x):
    fut = torch.jit.fork(_half, x)
    return torch.jit.wait(fut) + torch.mm(x, x)

x = torch.randn(256, 256)
found = line_windows.calls(line_windows.profile(lambda: _forked(x), 4, "cpu"), "cpu")
threads = {e.thread for e in found.events if e.name == "aten::mm"}
own = {e.thread for e in found.events if e.name.startswith(line_windows.CALL)}
assert len(own) == 1 and threads - own, (threads, own)  # the call's own thread and the fork's (the interop pool's)
mms = [e for e in found.events if e.name == "aten::mm"]
assert len(mms) == 2 * found.n, (len(mms), found.n)
calls = [e for e in found.events if e.name.startswith(line_windows.CALL)]
for mm in mms:  # each inside the window of a kept call
    assert any(c.time_range.start <= mm.time_range.start <= c.time_range.end for c in calls)
assert found.wall_us > 0 and found.busy_us == 0.0  # no device activity on the CPU
print("OK")
"""


def test_an_op_on_another_thread_belongs_to_the_call_whose_window_holds_it(tmp_path):
    """On CUDA autograd runs the backward on its own device thread: its events have no parent in the
    call's range. A TorchScript fork runs its ops on another thread the same way; they count. In a
    child: torch 2.13's profiler crashes now and then (SIGSEGV in `_set_backward_stacktraces`, about one
    run in six on a loaded 2-core machine) reading a fork's events, and would take pytest's worker with it;
    a crash is run again once, an assertion is not."""
    script = tmp_path / "forked.py"  # TorchScript reads its functions' source from a file
    script.write_text(FORKED)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(SERVER), os.environ.get("PYTHONPATH")) if p))
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
        if proc.returncode >= 0:
            break
    assert proc.returncode == 0 and proc.stdout.strip() == "OK", proc.stderr[-3000:]


def test_device_parts_add_up_to_busy_and_idle():
    """CUDA's arithmetic: named ops' kernels + kernels without a line + GPU idle = the total."""
    found = line_windows.Calls([], 1, wall_us=400.0, busy_us=120.0)
    total, parts = line_windows.device_parts(found, 100.0, 300.0)
    assert parts == {line_windows.WHY_KERNELS_NO_LINE: 20.0, line_windows.WHY_GPU_IDLE: 180.0}
    assert total == pytest.approx(100.0 + sum(parts.values())) == 300.0
    total, parts = line_windows.device_parts(found, 100.0, None)  # no timed call: the profile's window
    assert total == 400.0 and parts[line_windows.WHY_GPU_IDLE] == 280.0


def test_a_busy_or_disagreeing_table_has_a_caveat():
    quiet = ContentionReport(cpus=2, threads=1, other_cpu_percent=10.0)
    busy = ContentionReport(cpus=2, threads=1, other_cpu_percent=190.0)
    agree = {"eager": 300.0, "compiled": 510.0}  # the eager side is not held to it (its tagging)
    assert line_costs.caveat(quiet, agree, 1.0, 0.5, "cpu") is None
    said = line_costs.caveat(busy, agree, 1.0, 0.5, "cpu")
    assert said and said.startswith("machine busy") and "while profiling" in said
    # item_scale.py seen under load: a 5.77 ms line in a compiled forward timed well under a millisecond
    off = line_costs.caveat(quiet, {"eager": 980.0, "compiled": 5770.0}, 1.0, 0.5, "cpu")
    assert off and "compiled" in off and "25%" in off
    # a test that declared the machine quiet (busy.contention.declared_quiet) takes the load's disagreement as noise
    assert line_costs.caveat(replace(quiet, busy=False, declared_quiet=True), {"eager": 980.0, "compiled": 5770.0},
                             1.0, 0.5, "cpu") is None
    # CUDA: the kernels' busy time cannot exceed the call; idle below it is no disagreement
    assert line_costs.caveat(quiet, {"eager": 1000.0, "compiled": 500.0}, 1.0, 0.5, "cuda", busy_us=100.0) is None
    assert line_costs.caveat(quiet, {"eager": 1000.0, "compiled": 900.0}, 1.0, 0.5, "cuda", busy_us=900.0)
