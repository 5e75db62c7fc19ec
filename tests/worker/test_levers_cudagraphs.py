"""The CUDA-graphs lever's reading of torch's records, replayed on the CPU: the skip messages torch 2.13's
own formatters wrote (tests/data/cudagraph_skips/, made by benchmarks/recordings/cudagraph_skips.py from a real
Dynamo graph) logged on torch's own logger, heard by the lever's watcher, each put on the user's line
its stack trace names; the recordings as cudagraph_trees logs them. On the CPU the lever is not tried
(`scripts/gpu-check` runs it on a GPU)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path

import pytest
import torch

from compile_lens.protocol import InputRecipe, Lever, TargetResult, TargetSpec, Timing, from_dict
from compile_lens.render.levers_text import cudagraph_skips_in, lever_line, levers_json
from compile_lens.torch_text.cudagraph_events import LOGGER, SKIP_LOGGER, skip_of
from compile_lens.worker.levers import cudagraphs
from compile_lens.worker.levers.phase import run_levers
from compile_lens.worker.loader import build_target, import_file
from paths import FIXTURES

DATA = Path(__file__).resolve().parents[1] / "data" / "cudagraph_skips"


def _messages() -> dict[str, str]:
    doc = json.loads((DATA / "torch-2.13.0.json").read_text())
    return {k: v.replace("{DIR}", str(DATA)) for k, v in doc["messages"].items()}


def _recording(function: str, graph_id: int) -> logging.LogRecord:
    """A recording as cudagraph_trees.py logs it (`log.debug("[%s] Recording function=%s, …")`)."""
    return logging.LogRecord(LOGGER, logging.DEBUG, "cudagraph_trees.py", 2404,
                             "[%s] Recording function=%s, mode=%s, cuda_graph_id=%d, inputs: %s",
                             ("0", function, "CompilationMode.FORWARD", graph_id, 2), None)


def test_every_recorded_skip_message_is_read_with_its_reason():
    for name, text in _messages().items():
        skip = skip_of(text)
        assert skip is not None, name
        assert skip["reason"] and "skipping cudagraphs" not in skip["reason"], name
    assert skip_of("Recording function=1, mode=FORWARD") is None


def test_the_watcher_hears_torchs_loggers_and_puts_each_skip_on_the_users_line():
    messages = _messages()
    with cudagraphs.watching() as heard:
        for name in ("mutated_input", "cpu_node", "multiple_devices"):
            logging.getLogger(SKIP_LOGGER).warning(messages[name])  # as log_cudagraph_skip_and_bump_counter does
        logging.getLogger(LOGGER).handle(_recording("11", 0))
        logging.getLogger(LOGGER).handle(_recording("11", 1))  # the same function again: one graph
        logging.getLogger(LOGGER).handle(_recording("12", 2))
    assert heard.recorded == ["11", "12"]
    rows = cudagraphs.skip_rows(heard.skips, str(DATA))
    sample = str(DATA / "sample_model.py")
    assert rows == [
        {"reason": "mutated inputs (1 instances)", "path": sample, "line": 6},  # x.add_(1)
        {"reason": "cpu device (l_y_)", "path": sample, "line": 7},  # return y * 2
        {"reason": "multiple devices: device(type='cuda', index=0), device(type='cuda', index=1)",
         "path": None, "line": None},
    ]
    words = cudagraphs.graphed_words(len(heard.recorded), len(heard.skips), rows)
    assert words.startswith("2 of 5 graph(s) CUDA-graphed; skipped: mutated inputs (1 instances) at sample_model.py:6")
    # the loggers are as they were: nothing more is heard, torch's own levels are back
    assert logging.getLogger(LOGGER).propagate and logging.getLogger(SKIP_LOGGER).level == logging.NOTSET


def test_a_stack_outside_the_workspace_names_no_line(tmp_path):
    rows = cudagraphs.skip_rows([skip_of(_messages()["cpu_node"])], str(tmp_path))
    assert rows == [{"reason": "cpu device (l_y_)", "path": None, "line": None}]


def test_the_lever_line_says_how_much_was_graphed():
    rows = [{"reason": "mutated inputs (1 instances)", "path": "/w/model.py", "line": 6}]
    lever = Lever("cudagraphs", cudagraphs.CHANGE, "better",
                  why="forward 1.40×; " + cudagraphs.graphed_words(1, 1, rows))
    assert lever_line(lever) == ("CUDA graphs: better — forward 1.40×; 1 of 2 graph(s) CUDA-graphed; "
                                 "skipped: mutated inputs (1 instances) at model.py:6")


def test_a_skip_goes_on_the_line_torch_traced_it_to_in_that_file_only():
    rows = [{"reason": "mutated inputs (1 instances)", "path": "/w/model.py", "line": 16},
            {"reason": "multiple devices: …", "path": None, "line": None},
            {"reason": "cpu device (l_y_)", "path": "/w/other.py", "line": 3}]
    result = TargetResult("Mutates", "module", 9, levers=[Lever("cudagraphs", cudagraphs.CHANGE, "worse",
                                                                data={"skips": rows})])
    assert cudagraph_skips_in([result], "/w/model.py") == [(16, "CUDA graphs skipped: mutated inputs (1 instances)",
                                                             "Mutates")]
    assert cudagraph_skips_in([result], "/w/none.py") == []


def test_applies_only_on_a_gpu_and_not_where_the_mode_graphs_already():
    assert cudagraphs.applies("cuda", "default") and cudagraphs.applies("cuda:1", "max-autotune-no-cudagraphs")
    assert not cudagraphs.applies("cpu", "default")
    assert not cudagraphs.applies("cuda", "reduce-overhead") and not cudagraphs.applies("cuda", "max-autotune")


def test_on_the_cpu_the_phase_does_not_show_the_lever():
    path = FIXTURES / "measure" / "tiny.py"
    module = import_file(str(path), str(path.parent))
    spec = TargetSpec("Tiny", "module", 5, inputs=InputRecipe("directive", "(torch.randn(8, 16),)"))
    target = build_target(module, spec, str(path))
    # a traced graph break keeps the aot lever out too, so the phase runs nothing that compiles
    result = TargetResult("Tiny", "module", 5, graph_count=2)
    result.graph_breaks = [object()]  # type: ignore[list-item]
    levers = run_levers(result, target, path=str(path), root=str(path.parent), device="cpu", mode="default",
                        max_seconds=4.0, progress=lambda stage, **kw: None)
    assert [lv.lever for lv in levers] == []


FASTER = Timing(1.0, 0.7, 1.43, 0.0, 0.0, [1.35, 1.5], True, 12)
GRAPHED = cudagraphs.graphed_words(1, 0, [])


def test_the_verdict_reads_the_gpu_idle_share_before_and_after():
    lever = cudagraphs.judged(FASTER, GRAPHED, {"before": 0.64, "after": 0.08}, {"graphed": 1, "graphs": 1, "skips": []})
    assert lever.verdict == "better" and lever.gpu_idle_share == {"before": 0.64, "after": 0.08}
    assert lever.why == "forward 1.43× faster; GPU idle 64% → 8% of the call; 1 of 1 graph(s) CUDA-graphed"
    assert lever.action == ('CUDA graphs (mode="reduce-overhead"): forward 1.43× faster, GPU idle 64% → 8% of the '
                            "call, 1 of 1 graph(s) CUDA-graphed (measured)")
    assert lever_line(lever) == "CUDA graphs: " + "better — " + lever.why
    # the JSON and the cache carry it as a field of its own; the JSON names the timing as the levers page does
    [row] = levers_json(TargetResult("Net", "module", 10, levers=[lever]))
    assert row["gpu_idle_share"] == {"before": 0.64, "after": 0.08}
    assert row["forward"] == {"before": 1.0, "after": 0.7, "speedup": 1.43, "ci": [1.35, 1.5], "conclusive": True,
                              "rounds": 12} and row["train_step"] == {}
    assert from_dict(Lever, json.loads(json.dumps(dataclasses.asdict(lever)))) == lever


def test_a_side_without_an_idle_share_leaves_the_words_as_they_were():
    busy = Timing(1.0, 1.0, 1.0, 0.0, 0.0, [0.8, 1.25], False, 12, busy="machine busy")
    lever = cudagraphs.judged(busy, GRAPHED, {"before": 0.5, "after": None}, {})
    assert lever.verdict == "inconclusive" and "GPU idle" not in lever.why and not lever.action
    assert lever.gpu_idle_share == {"before": 0.5, "after": None}


@pytest.mark.parametrize("name", ["cpu_node", "mutated_input"])
def test_the_reason_keeps_torchs_words(name):
    skip = skip_of(_messages()[name])
    assert _messages()[name].startswith("skipping cudagraphs due to " + skip["reason"])


DEVICE = os.environ.get("COMPILE_LENS_TEST_DEVICE", "cpu")  # scripts/gpu-check sets cuda


@pytest.mark.slow
@pytest.mark.skipif(DEVICE != "cuda" or not torch.cuda.is_available(), reason="CUDA graphs need a GPU (scripts/gpu-check)")
@pytest.mark.parametrize("name, skipped_line", [("Tiny", None), ("Mutates", 16)])
def test_on_a_gpu_the_lever_counts_the_graphs_and_names_the_skipped_line(name, skipped_line):
    path = FIXTURES / ("measure/tiny.py" if name == "Tiny" else "levers/cudagraph_skip.py")
    line = next(i for i, row in enumerate(path.read_text().splitlines(), 1) if row.startswith(f"class {name}"))
    spec = TargetSpec(name, "module", line, inputs=InputRecipe("directive", "(torch.randn(8, 16),)"))
    target = build_target(import_file(str(path), str(path.parent)), spec, str(path))
    lever = cudagraphs.measure(target, root=str(path.parent), device="cuda", mode="default", steady_s=4.0)
    print(lever_line(lever))  # gpu-check's log keeps the figures
    # the GPU idle share of each side's compiled call, read as the line costs read `forward.gpu_idle_share`
    assert all(0.0 <= lever.gpu_idle_share[side] <= 1.0 for side in ("before", "after")), lever.gpu_idle_share
    if skipped_line is None:
        assert lever.data["graphed"] >= 1 and lever.data["skips"] == []
    else:
        assert any(s["line"] == skipped_line and s["path"] == str(path) and "mutated inputs" in s["reason"]
                   for s in lever.data["skips"])
