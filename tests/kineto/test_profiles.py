"""The PyTorch profiler (Kineto) trace reader on real GPU traces, held to an independent reference.

The traces are Holistic Trace Analysis's own test data (tests/data/kineto/README.md: A100, V100 and
MI250 runs, Triton kernels, CUDA-graph launches, two ranks, a CPU-only rank); HTA itself
(`holistictraceanalysis`, a test dependency only) reads the same files in this process and its
`get_temporal_breakdown` is the reference: the idle share within 0.02, the same kernel count, the
same graph launches. Then the CLI: `compile-lens import` detects a profile by content, exit codes
as `check`'s, the JSON's fields, a CPU-only trace, a trace cut short, and graph replays the
profiler missed (never a false "99% idle").
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tracemalloc
import warnings
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from compile_lens.kineto.fold import fold
from compile_lens.kineto.profile import calls_idle_share, summarise
from compile_lens.kineto.ranks import read_profiles
from compile_lens.kineto.stream import TraceFile
from lsp_support import open_file, start_server, stop_server, wait_for
from paths import DATA

KINETO = DATA / "kineto"
GPU_TRACES = ["a100_alexnet.json.gz", "a100_event_sync.json.gz", "a100_triton_cudagraphs_rank0.json.gz",
              "a100_triton_example.json.gz", "mi250_minitoy_train.json.gz",
              "multi_rank/rank-0.json.gz", "multi_rank/rank-1.json.gz"]
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", "import", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONSAFEPATH": "1"})


@pytest.fixture(scope="module")
def hta(tmp_path_factory) -> dict[str, dict]:
    """HTA's reading of each GPU trace, one folder per trace (HTA reads a folder of rank files)."""
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    try:
        from hta.trace_analysis import TraceAnalysis
    finally:
        logging.disable(logging.NOTSET)
    out = {}
    for name in GPU_TRACES:
        folder = tmp_path_factory.mktemp("hta")
        shutil.copy(KINETO / name, folder / Path(name).name)
        analysis = TraceAnalysis(trace_dir=str(folder))
        breakdown = analysis.get_temporal_breakdown(visualize=False)
        rank = int(breakdown["rank"][0])
        frame = analysis.t.get_trace(rank)
        names = analysis.t.symbol_table.get_sym_table()
        cats = frame["cat"].map(names.__getitem__)
        out[name] = {
            "idle": float(breakdown["idle_time(us)"][0] / breakdown["kernel_time(us)"][0]),
            "kernels": int(((frame["stream"] != -1) & cats.isin(DEVICE_CATS)).sum()),
            "graph_launches": int((frame["name"].map(names.__getitem__) == "cudaGraphLaunch").sum()),
            "rank": rank,
            "busy": float(breakdown["kernel_time(us)"][0] - breakdown["idle_time(us)"][0]),
        }
    return out


@pytest.mark.parametrize("name", GPU_TRACES)
def test_idle_share_kernels_and_graph_launches_agree_with_hta(name, hta):
    ref = hta[name]
    profile = summarise(fold(str(KINETO / name)))
    assert profile.gpu_idle_share is not None
    assert abs(profile.gpu_idle_share - ref["idle"]) <= 0.02, (profile.gpu_idle_share, ref["idle"])
    assert profile.kernels == ref["kernels"]
    assert profile.cudagraph_launches == ref["graph_launches"]


@pytest.mark.parametrize("name", ["multi_rank/rank-0.json.gz", "multi_rank/rank-1.json.gz"])
def test_the_per_step_busy_time_the_live_share_uses_adds_up_to_htas(name, hta):
    """The live measurement's calls are steps (`calls_idle_share`): their busy time, step by step, is HTA's."""
    profile = summarise(fold(str(KINETO / name)))
    assert sum(s.union_us for s in profile.steps[:-1]) == pytest.approx(hta[name]["busy"], rel=0.01)
    share = calls_idle_share(profile.steps)
    assert share is not None and 0 <= share <= 1


def test_the_a100_triton_run_is_read_whole():
    """81 Triton kernels and 70 graph launches in HTA's A100 trace: every figure the JSON gives, from the real file."""
    profile = summarise(fold(str(KINETO / "a100_triton_cudagraphs_rank0.json.gz")))
    assert profile.rank == 0 and profile.device == "NVIDIA A100-SXM4-80GB"
    assert profile.cudagraph_launches == 56 and profile.cudagraph_kernels > 0  # 70 in the file, 56 before the last step
    assert [s.number for s in profile.steps] == [550, 551, 552, 553, 554]
    assert profile.scope and "550–553" in profile.scope
    with gzip.open(KINETO / "a100_triton_cudagraphs_rank0.json.gz", "rt") as f:
        in_file = {e["name"] for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("triton")}
    assert {k for k in profile.kernel_us if k.startswith("triton")} == in_file and in_file
    busy = profile.busy_us
    assert busy["compute"] > 0 and busy["memory"] > 0 and busy["communication"] > 0
    assert abs(sum(k.share for k in profile.top_kernels) - sum(k.us for k in profile.top_kernels) / sum(busy.values())) < 1e-9
    assert all(k.op for k in profile.top_kernels), "each top kernel names the CPU op that launched it"


def test_launch_bound_says_why_on_a_real_launch_bound_run_and_not_on_a_busy_one():
    small = summarise(fold(str(KINETO / "a100_event_sync.json.gz")))
    assert small.launch_bound is True
    assert any("median" in w and "µs" in w for w in small.launch_why)
    busy = summarise(fold(str(KINETO / "multi_rank/rank-0.json.gz")))
    assert busy.launch_bound is False and "not launches" in busy.launch_why[0]


def test_graph_replays_the_profiler_missed_give_no_idle_share(tmp_path):
    """The real A100 trace without its replayed kernels (what a profile of graph replays can look like:
    HolisticTraceAnalysis#290): the GPU looks idle, the reader says why it gives no figure."""
    with gzip.open(KINETO / "a100_triton_cudagraphs_rank0.json.gz", "rt") as f:
        doc = json.load(f)
    graphs = {e["args"]["correlation"] for e in doc["traceEvents"] if e.get("name") == "cudaGraphLaunch"}
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if not (e.get("cat") in DEVICE_CATS and e.get("args", {}).get("correlation") in graphs)]
    path = tmp_path / "replays_missing.json"
    path.write_text(json.dumps(doc))
    profile = summarise(fold(str(path)))
    assert profile.gpu_idle_share is None
    assert "56 CUDA-graph launches and none of their kernels" in profile.idle_note


def test_a_trace_cut_short_keeps_what_was_read(tmp_path):
    data = gzip.decompress((KINETO / "multi_rank/rank-1.json.gz").read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) * 2 // 3])
    folded = fold(str(cut))
    whole = fold(str(KINETO / "multi_rank/rank-1.json.gz"))
    assert folded.truncated and not whole.truncated
    assert 0 < folded.events < whole.events


def test_streaming_memory_does_not_grow_with_the_trace(tmp_path):
    """A 20 MB trace (a real one's events, repeated) streamed: the reader holds about one chunk (1 M characters)."""
    with gzip.open(KINETO / "multi_rank/rank-0.json.gz", "rt") as f:
        doc = json.load(f)
    doc["traceEvents"] = doc["traceEvents"] * 10
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc, indent=1))
    assert path.stat().st_size > 20e6
    trace = TraceFile(str(path))
    tracemalloc.start()
    n = sum(1 for _ in trace.events())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert n == len(doc["traceEvents"])
    assert peak < 8e6, f"{peak / 1e6:.1f} MB held to stream {path.stat().st_size / 1e6:.0f} MB"


def test_import_detects_a_profile_by_content_and_gives_the_json_per_rank(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    for name in ("rank-0.json.gz", "rank-1.json.gz"):
        shutil.copy(KINETO / "multi_rank" / name, folder / ("trace" + name[4:]))  # the rank is the file's, not the name's
    done = run_cli(str(folder), "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    for r in doc["ranks"]:
        assert set(r) >= {"rank", "device", "gpu_idle_share", "busy_us", "steps", "launch_bound", "launch_bound_why",
                          "cudagraph_launches", "top_kernels", "lines"}
        assert set(r["busy_us"]) == {"compute", "memory", "communication"}
        assert r["steps"] and all({"step", "busy_us", "gpu_idle_share"} <= set(s) for s in r["steps"])
        assert all({"name", "us", "share", "op", "lines"} <= set(k) for k in r["top_kernels"])
    text = run_cli(str(folder), cwd=tmp_path)
    assert text.returncode == 0
    assert "rank 0:" in text.stdout and "rank 1:" in text.stdout and "GPU idle" in text.stdout


def test_a_cpu_only_trace_says_so_and_gives_no_figure(tmp_path):
    done = run_cli(str(KINETO / "rank-34.cpu_only.pt.trace.json.gz"), "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (rank,) = json.loads(done.stdout)["ranks"]
    assert rank["rank"] == 34 and rank["gpu_idle_share"] is None and rank["top_kernels"] == []
    assert rank["gpu_idle_note"] == "no GPU activity in this trace"
    text = run_cli(str(KINETO / "rank-34.cpu_only.pt.trace.json.gz"), cwd=tmp_path)
    assert "no GPU activity in this trace" in text.stdout and "GPU idle" not in text.stdout


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    junk = tmp_path / "x.json"
    junk.write_text('["not", "a", "profile"]')
    for target in (empty, junk, tmp_path / "missing.json.gz"):
        done = run_cli(str(target), cwd=tmp_path)
        assert done.returncode == 2, (target, done.stdout)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    bad = run_cli(str(KINETO / "a100_alexnet.json.gz"), "--provenance", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert bad.returncode == 2 and "--provenance" in bad.stderr


def test_read_profiles_orders_ranks_from_the_trace():
    profiles = read_profiles(str(KINETO / "multi_rank"))
    assert [p.rank for p in profiles] == [0, 1]


# --- a profile of this CPU, its kernels on lines through the same run's provenance ---------------

RUN = '''import torch, torch.nn as nn
torch._inductor.config.cpp.enable_kernel_profile = True  # each C++ kernel a profiler range: graph_0_cpp_fused_…
torch._inductor.config.trace.provenance_tracking_level = 1


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 8)

    def forward(self, x):
        h = self.a(x)
        h = torch.relu(h) * 2
        print("a graph break")
        return torch.sigmoid(self.b(h)) + 1


model = torch.compile(Head())
x = torch.randn(4, 16)
model(x)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True) as prof:
    for _ in range(3):
        model(x)
prof.export_chrome_trace(OUT)
'''


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory) -> tuple[Path, Path, str]:
    """A compiled model that breaks the graph, profiled here with TORCH_TRACE on: (trace folder, workspace, source)."""
    tmp = tmp_path_factory.mktemp("cpu_run")
    job, ws = tmp / "job", tmp / "ws"
    job.mkdir()
    ws.mkdir()
    (job / "trace").mkdir()
    source = RUN.replace("OUT", repr(str(job / "trace" / "host.pt.trace.json")))
    (job / "head.py").write_text(source)
    (ws / "head.py").write_text(source)
    subprocess.run([sys.executable, "head.py"], cwd=job, check=True, capture_output=True, timeout=300,
                   env={**os.environ, "TORCH_TRACE": str(job / "trace"), "OMP_NUM_THREADS": "1"})
    return job, ws, source


@pytest.mark.slow
def test_a_cpu_profile_puts_inductor_kernels_on_lines_through_the_runs_provenance(cpu_run):
    """`import` of the folder (profile + log) puts each C++ kernel's CPU time on the lines the provenance names."""
    job, ws, source = cpu_run
    done = run_cli(str(job / "trace"), "--root", str(ws), "--format", "json", cwd=ws)
    assert done.returncode == 0, done.stderr
    (rank,) = json.loads(done.stdout)["ranks"]
    assert rank["clock"] == "cpu" and rank["gpu_idle_note"] == "no GPU activity in this trace"
    lines = source.splitlines()
    relu = next(i for i, text in enumerate(lines, 1) if "torch.relu(h) * 2" in text)
    sigmoid = next(i for i, text in enumerate(lines, 1) if "torch.sigmoid" in text)
    found = {e["line"]: e for e in rank["lines"]}
    assert set(found) == {relu, sigmoid}
    assert all(e["from"] == "provenance" and e["us"] > 0 and e["kernels"][0].startswith("cpp_fused") for e in found.values())
    assert abs(sum(e["share"] for e in found.values()) - 1.0) < 0.01
    text = run_cli(str(job / "trace"), "--root", str(ws), cwd=ws).stdout
    assert f"head.py:{relu}: CPU" in text and "CL401" in text


@pytest.mark.slow
async def test_the_editor_imports_a_profile_and_shows_its_lines(cpu_run):
    job, ws, source = cpu_run
    client = await start_server(ws, trusted=False)  # reading a profile runs no code
    try:
        uri = open_file(client, ws / "head.py")
        await wait_for(client, uri, lambda _: True)
        answer = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            "compileLens.importTrace", [str(job / "trace")]))
        assert answer["imported"] is True and answer["kind"] == "profile" and answer["diagnostics"] == 2
        assert any("no GPU activity" in line for line in answer["summary"])
        shown = [d for d in client.diagnostics[uri] if d.code == "CL401"]
        assert len(shown) == 2 and all(d.message.startswith("CPU ") for d in shown)
        hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri), range=lsp.Range(lsp.Position(0, 0), lsp.Position(40, 0))))
        assert sorted(h.position.line for h in hints) == sorted(d.range.start.line for d in shown)
        assert all(re.fullmatch(r" CPU [\d.]+ (µs|ms) \(\d+%\)", h.label) for h in hints), [h.label for h in hints]
        gpu = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            "compileLens.importTrace", [str(KINETO / "multi_rank")]))
        assert gpu["imported"] is True and [r["rank"] for r in gpu["ranks"]] == [0, 1]
        assert any("GPU idle 54%" in line for line in gpu["summary"])
        assert [d for d in client.diagnostics[uri] if d.code == "CL401"] == []  # the new import replaced the last
    finally:
        await stop_server(client)
