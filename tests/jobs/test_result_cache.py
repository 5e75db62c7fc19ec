"""The one cache path (`jobs.cache` read/write helpers) the language server and the CLI share:
which entries a target has, what is never stored, and positions moved to today's text on read.

Real sqlite files, real result dataclasses as the worker sends them, a nanoGPT-shaped source."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from compile_lens.discovery import discover
from compile_lens.jobs.cache import (
    ResultCache,
    ResultWriter,
    read_bench,
    read_deployment,
    read_result,
    read_sweep,
    read_trace,
    target_keys,
    write_bench,
    write_sweep,
    write_trace,
)
from compile_lens.positions import moved
from compile_lens.protocol import (
    Benchmark,
    CompileSeconds,
    Errors,
    ExportCheck,
    FallbackOp,
    Frame,
    GraphBreak,
    PeakMemory,
    Problem,
    Recompile,
    Report,
    SkippedLoop,
    TargetResult,
    Timing,
    with_phase,
)
from compile_lens.remote_cache import in_use as remote_cache_in_use

SOURCE = '''import torch
import torch.nn as nn
from dataclasses import dataclass


@dataclass
class GPTConfig:
    n_embd: int = 32
    n_head: int = 4


class CausalSelfAttention(nn.Module):
    def __init__(self, config=GPTConfig()):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.n_head = config.n_head

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        scale = float(q.abs().max().item())
        return (q @ k.transpose(-2, -1) / scale).softmax(-1) @ v
'''
# the same code with a comment block above the class: every line of the model moves down by three
COMMENTED = SOURCE.replace("class CausalSelfAttention", "# attention\n# (one head group)\n#\nclass CausalSelfAttention")
OTHER_CODE = SOURCE.replace("float(q.abs().max().item())", "8.0")


def line_of(source: str, needle: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if needle in line)


@pytest.fixture
def path(tmp_path: Path) -> str:
    file = tmp_path / "attention.py"
    file.write_text(SOURCE)
    return str(file)


@pytest.fixture
def cache(tmp_path: Path):
    opened = ResultCache(str(tmp_path / "cache"))
    yield opened
    opened.close()


def keys_of(path: str, source: str):
    found = discover(source)
    assert found is not None
    spec = next(t for t in found.targets if t.name == "CausalSelfAttention")
    return target_keys("2.13.0", path, found.fingerprint, "", spec, "cpu", "default")


def traced(path: str, source: str = SOURCE) -> TargetResult:
    """What the worker sends after tracing the attention block: the `.item()` break, in `source`."""
    line = line_of(source, ".item()")
    start = source.splitlines()[line - 1].index("q.abs()") + 1
    br = GraphBreak(path, line, start, line, start + 24, "GB0124", "Unsupported Tensor.item() call",
                    "Dynamo does not support tracing `Tensor.item()`", [], None, "Tensor.item",
                    stack=[Frame(path, line, "forward")])
    result = TargetResult("CausalSelfAttention", "module", line_of(source, "class CausalSelfAttention"),
                          graph_count=2, graph_breaks=[br])
    return with_phase(result, "trace", "done")


def swept(result: TargetResult, path: str, source: str = SOURCE) -> TargetResult:
    guard = Recompile(line_of(source, "B, T, C"), "batch 17", "automatic-dynamic", "size mismatch at index 0",
                      "x", path=path)
    return with_phase(dataclasses.replace(result, recompiles=[guard]), "sweep", "done")


def measured(result: TargetResult) -> TargetResult:
    timing = Timing(2.0, 1.0, 2.0, 0.1, 0.1, rounds=5)
    figures = Benchmark("cpu", "test cpu", "default", timing, None, CompileSeconds(9.0, 1.0), 10,
                        PeakMemory(1, 1, "rss"), Errors(0.0), Errors(0.0), "faster")
    done = dataclasses.replace(result, benchmark=figures, export=ExportCheck(ok=False, strict=True, line=21),
                               fallback_ops=[FallbackOp("aten.sort", 1)], report=Report())
    return with_phase(done, "measure", "done")


def test_a_trace_read_on_a_comment_edit_has_its_break_on_the_moved_line(cache, path):
    keys = keys_of(path, SOURCE)
    assert keys == keys_of(path, COMMENTED), "comments do not count in the key"
    assert write_trace(cache, keys, traced(path), SOURCE)

    same = read_trace(cache, keys, SOURCE, path)
    assert same == traced(path)
    moved_result = read_trace(cache, keys, COMMENTED, path)
    assert moved_result is not None
    [br] = moved_result.graph_breaks
    assert br.line == line_of(COMMENTED, ".item()") == line_of(SOURCE, ".item()") + 3
    assert (br.column, br.end_column) == (traced(path).graph_breaks[0].column, traced(path).graph_breaks[0].end_column)
    assert br.stack[0].line == br.line
    assert moved_result.line == line_of(COMMENTED, "class CausalSelfAttention")
    assert read_trace(cache, keys, OTHER_CODE, path) is None, "another code's positions are never guessed"


@pytest.mark.parametrize("kind, stored", [("crash", False), ("timeout", False), ("memory", False),
                                          ("exit", False), ("call", True)])
def test_a_trace_ended_by_the_worker_dying_is_never_stored(cache, path, kind, stored):
    failure = Problem(kind, f"{kind} while tracing")
    result = with_phase(dataclasses.replace(traced(path), status="error", error=failure, graph_breaks=[]),
                        "trace", "failed", failure)
    keys = keys_of(path, SOURCE)
    assert write_trace(cache, keys, result, SOURCE) is stored
    assert (read_trace(cache, keys, SOURCE, path) is not None) is stored


def test_only_the_trace_part_is_stored_as_the_trace(cache, path):
    keys = keys_of(path, SOURCE)
    assert write_trace(cache, keys, measured(swept(traced(path), path)), SOURCE)
    back = read_trace(cache, keys, SOURCE, path)
    assert back is not None and back.recompiles == [] and back.benchmark is None and back.export is None
    assert [p.name for p in back.phases] == ["trace"]


def test_a_sweep_is_stored_once_done_and_read_at_todays_lines(cache, path):
    keys = keys_of(path, SOURCE)
    unfinished = with_phase(traced(path), "sweep", "not-run", Problem("skipped", "not run"))
    assert not write_sweep(cache, keys, unfinished, SOURCE)
    assert read_sweep(cache, keys, SOURCE, path) is None
    assert write_sweep(cache, keys, swept(traced(path), path), SOURCE)
    [guard] = read_sweep(cache, keys, COMMENTED, path) or []
    assert guard.line == line_of(COMMENTED, "B, T, C")
    assert read_sweep(cache, keys, OTHER_CODE, path) is None


def test_the_writer_stores_every_settled_phase_and_the_whole_answer_reads_back(cache, path):
    keys = keys_of(path, SOURCE)
    write = ResultWriter(cache, {"CausalSelfAttention": keys}, SOURCE)
    result = traced(path)
    write(result)  # the worker streams each phase as it settles
    assert read_result(cache, keys, SOURCE, path, recompiles=False, benchmark=False) == result
    assert read_result(cache, keys, SOURCE, path, recompiles=True, benchmark=False) is None, "no sweep yet"
    result = swept(result, path)
    write(result)
    assert read_result(cache, keys, SOURCE, path, recompiles=True, benchmark=True) is None, "no figures yet"
    result = measured(result)
    write(result)
    whole = read_result(cache, keys, COMMENTED, path, recompiles=True, benchmark=True)
    assert whole is not None
    assert whole.benchmark == result.benchmark and whole.fallback_ops == result.fallback_ops
    assert whole.export == result.export and whole.report == result.report
    assert [(p.name, p.status) for p in whole.phases] == [("trace", "done"), ("sweep", "done"), ("measure", "done")]
    assert [r.line for r in whole.recompiles] == [line_of(COMMENTED, "B, T, C")]
    assert read_bench(cache, keys) == result.benchmark
    assert read_deployment(cache, keys) == {  # stored as plain JSON, read back as the records above
        "export": {"ok": False, "strict": True, "line": 21, "path": None, "message": None},
        "fallback_ops": [{"op": "aten.sort", "count": 1, "kind": "fallback"}],
        "report": {"batch_sweep": None, "kernels": None, "notes": []}, "unmeasured": {}, "parts": {}, "parts_s": {}}


def test_figures_whose_deployment_check_killed_the_worker_keep_no_deployment(cache, path):
    keys = keys_of(path, SOURCE)
    died = Problem("crash", "the analysis process crashed (while checking torch.export)")
    result = with_phase(measured(traced(path)), "measure", "failed", died)
    ResultWriter(cache, {"CausalSelfAttention": keys}, SOURCE)(result)
    assert read_bench(cache, keys) == result.benchmark
    assert read_deployment(cache, keys) is None


def test_moved_keeps_positions_in_other_files(tmp_path, path):
    helper = str(tmp_path / "helpers.py")
    result = traced(path)
    br = dataclasses.replace(result.graph_breaks[0], path=helper, line=4, end_line=4,
                             stack=[Frame(path, result.graph_breaks[0].line, "forward"), Frame(helper, 4, "scale")])
    result = dataclasses.replace(result, graph_breaks=[br])
    assert moved(result, SOURCE, SOURCE, path) is result
    shifted = moved(result, SOURCE, COMMENTED, path)
    assert shifted is not None
    [after] = shifted.graph_breaks
    assert (after.line, after.stack[1].line) == (4, 4), "the helper file did not change"
    assert after.stack[0].line == line_of(COMMENTED, ".item()")
    assert moved(result, SOURCE, OTHER_CODE, path) is None


def test_a_cached_break_inside_a_loop_moves_with_its_loop_header(cache, path):
    """The loop torch skips (GB7000) is stored with the break and read at today's lines too."""
    result = traced(path)
    header = line_of(SOURCE, "B, T, C")  # stands in for a loop header: any line of the frame
    br = dataclasses.replace(result.graph_breaks[0], loop=SkippedLoop(path, header, 9, header, 25, "forward",
                                                                      "GB7000", None))
    result = dataclasses.replace(result, graph_breaks=[br])
    keys = keys_of(path, SOURCE)
    assert write_trace(cache, keys, result, SOURCE)
    [after] = read_trace(cache, keys, COMMENTED, path).graph_breaks
    assert after.line == line_of(COMMENTED, ".item()")
    assert (after.loop.line, after.loop.end_line, after.loop.column) == (header + 3, header + 3, 9)
    assert after.loop.function == "forward" and after.loop.gb_id == "GB7000"


def test_turning_a_remote_cache_on_measures_again_and_keeps_the_trace(cache, path):
    """The figures' key carries the remote cache in use (the setting, else the environment's):
    with one on, the figures measured without it are not served; the trace and sweep still are."""
    found = discover(SOURCE)
    assert found is not None
    spec = next(t for t in found.targets if t.name == "CausalSelfAttention")
    plain = keys_of(path, SOURCE)
    env = {"TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "1", "TORCHINDUCTOR_REDIS_HOST": "cache.lan"}
    served_by = remote_cache_in_use(None, env)
    assert served_by == "redis://cache.lan:6379"
    served = target_keys("2.13.0", path, found.fingerprint, "", spec, "cpu", "default", remote=served_by)
    assert served.bench != plain.bench and (served.trace, served.sweep) == (plain.trace, plain.sweep)
    assert remote_cache_in_use("redis://other:7000", env) == "redis://other:7000"  # the setting first
    assert remote_cache_in_use(None, {"TORCHINDUCTOR_REDIS_HOST": "cache.lan"}) is None  # no cache switched on
    assert write_bench(cache, plain, measured(traced(path)))
    assert read_bench(cache, plain) is not None and read_bench(cache, served) is None
    # measured without it (it did not answer): not kept under its key, so the next run measures again
    assert not write_bench(cache, served, measured(traced(path)))
    with_remote = measured(traced(path))
    with_remote.benchmark.compile_s.warm_remote = 2.0
    assert write_bench(cache, served, with_remote) and read_bench(cache, served).compile_s.warm_remote == 2.0
