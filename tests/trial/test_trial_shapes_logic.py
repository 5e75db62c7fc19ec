"""The pieces of the trial's per-shape view that need no run: torch's CUDA-graph log records read
(the messages taken from torch's own source, so a torch that words them otherwise fails here), and a
guard said in the user's terms from a real file. A CUDA run with `--mode reduce-overhead` must still
confirm that these records fire per new shape on a GPU (see docs/trial.md)."""

from __future__ import annotations

import inspect
import logging
import re

import pytest

from compile_lens.torch_text.guard_words import meaning, say, value_read_at
from compile_lens.trial import cudagraph_events, shapes
from compile_lens.trial.summary import run_figures
from paths import FIXTURES

CHARLM = FIXTURES / "trial" / "train_charlm.py"


def _torch_format(fragment: str) -> str:
    """The format string torch's cudagraph trees log containing `fragment`, from torch's source."""
    trees = pytest.importorskip("torch._inductor.cudagraph_trees")
    source = inspect.getsource(trees)
    found = re.search(r'"(\[%s\] ' + re.escape(fragment) + r'[^"]*)"', source)
    assert found, f"torch's cudagraph_trees no longer logs {fragment!r}"
    return found.group(1)


def _record(fmt: str, *args) -> logging.LogRecord:
    return logging.LogRecord(cudagraph_events.LOGGER, logging.DEBUG, "cudagraph_trees.py", 1, fmt, args, None)


def test_torch_cudagraph_records_become_events_with_their_step_and_shapes():
    recording = _torch_format("Recording function=")
    rerecording = _torch_format("Re-recording function=")
    events: list = []
    now = {"step": 0, "shapes": [[8, 16]]}
    handler = cudagraph_events.CudagraphEvents(events, lambda: (now["step"], now["shapes"]))
    handler.emit(_record(recording, "0/0", "FunctionID(id=0)", "FORWARD", 0, "[...]"))
    now.update(step=9, shapes=[[5, 16]])
    handler.emit(_record(recording, "0/1", "FunctionID(id=1)", "FORWARD", 1, "[...]"))
    handler.emit(_record(rerecording, "0/1", "FunctionID(id=1)", "FORWARD", "static input data pointer changed"))
    handler.emit(_record("[%s] Running warmup function=%s, mode=%s", "0/0", "f", "FORWARD"))  # no record
    assert [(e["step"], e["shapes"], e["rerecord"]) for e in events] == [
        (0, [[8, 16]], False), (9, [[5, 16]], False), (9, [[5, 16]], True)]
    assert events[2]["reason"] == "static input data pointer changed" and events[0]["mode"] == "FORWARD"


def test_cudagraph_records_are_counted_per_shape():
    steps = [{"index": i, "wall_s": 0.01, "hook_s": 0.01, "shapes": [[5, 16]] if i == 9 else [[8, 16]], "compiles": int(i in (0, 9))}
             for i in range(12)]
    run = run_figures({"steps": steps}, 0)
    assert run.warmup_steps == [0, 9]
    events = [{"kind": "cudagraph_record", "rerecord": r, "step": s, "shapes": sh}
              for s, sh, r in ((0, [[8, 16]], False), (9, [[5, 16]], False), (9, [[5, 16]], True))]
    rows = shapes.by_shape(run, run, {"events": events, "compiles": []}, [])
    assert [(r.signature, r.step_count, r.cudagraph_records, r.cudagraph_rerecords) for r in rows] == [
        ("[8, 16]", 11, 1, 0), ("[5, 16]", 1, 2, 1)]
    found = shapes.findings(rows, None, run, run)
    assert [f["kind"] for f in found] == ["cudagraph-records"] and "3 times for 2 input shapes" in found[0]["text"]


def test_a_stack_guard_in_a_resumed_frame_names_the_value_read_at_the_break():
    line = next(i for i, text in enumerate(CHARLM.read_text().splitlines(), 1) if ".item()" in text and "x = x /" in text)
    assert value_read_at(str(CHARLM), line) == "x.abs().max().item()"
    said = say({"function": f"torch_dynamo_resume_in_forward_at_{line}", "where": f"{CHARLM}:{line}",
                "reason": "___stack0 == 6.29358434677124", "step": 3, "shapes": [[8, 16], [8, 16]]})
    assert said["function"] == "forward" and said["resumed_at_line"] == line
    assert said["meaning"].startswith(f"the value of `x.abs().max().item()` at line {line} was baked in "
                                      "(it was 6.29358434677124); a new value recompiles")


def test_named_values_and_sizes_are_said_and_other_guards_are_left_as_torch_says_them():
    assert meaning("L['n'] == 2", "forward", None) == "the value of `n` was baked in (it was 2); a new value recompiles"
    assert meaning("tensor 'L['x']' size mismatch at index 0. expected 8, actual 5", "forward", None).startswith(
        "dimension 0 of `x` was compiled for size 8; size 5 recompiles")
    assert meaning("GLOBAL_STATE changed: grad_mode", "forward", None) is None
    assert meaning("___stack0 == 1.5", "forward", None) is None  # not a resumed frame: no line to read


def test_checks_recompile_finding_says_a_stack_guard_in_the_users_terms():
    from compile_lens.protocol import Frame, Recompile
    from compile_lens.render.findings import recompile_message

    line = next(i for i, text in enumerate(CHARLM.read_text().splitlines(), 1) if "x = x / x.abs().max().item()" in text)
    reason = "___stack0 == 1.9921875"
    rc = Recompile(line=line, variation="variant 1", kind="specialization", reason=reason, changed="___stack0",
                   frame=Frame(str(CHARLM), line, "forward"),
                   meaning=meaning(reason, f"torch_dynamo_resume_in_forward_at_{line}", str(CHARLM)))
    message = recompile_message(rc)
    assert message.startswith(f"Recompiles for every new value (variant 1): the value of `x.abs().max().item()` at "
                              f"line {line} was baked in (it was 1.9921875)")
    assert "torch's guard: ___stack0 == 1.9921875" in message and "new value of `___stack0`" not in message
    named = Recompile(line=3, variation="2, 3", kind="specialization", reason="steps == 2", changed="steps",
                      meaning=meaning("steps == 2", "forward", None))
    assert recompile_message(named).startswith("Recompiles for every new value of `steps` (2, 3): steps == 2")


def _runs(eager_walls: list, compiled_walls: list, short_at: tuple, compile_steps: dict):
    """Both runs' figures as `summary.run_figures` makes them from the hook's steps."""
    from compile_lens.trial.summary import run_figures

    def record(walls, compiled):
        steps = [{"index": i, "wall_s": w, "hook_s": w, "loss": None, "shapes": [[5, 16]] if i in short_at else [[8, 16]],
                  "compiles": len(compile_steps.get(i, ())) if compiled else 0} for i, w in enumerate(walls)]
        entries = [{"step": i, "co_name": "forward", "entire_frame_compile_time_s": t}
                   for i, times in compile_steps.items() for t in times] if compiled else []
        return {"steps": steps, "stopped_by_trial": True, "compiles": entries, "events": []}

    e, c = record(eager_walls, False), record(compiled_walls, True)
    return run_figures(e, 0), run_figures(c, 0), c


def test_a_main_shape_whose_speedup_differs_from_the_whole_runs_is_said():
    from compile_lens.trial.summary import speedup

    # 20 main-shape steps at 2x; 10 short steps that run no faster compiled (e.g. a padded tail)
    short = tuple(range(20, 30))
    eager, compiled, record = _runs([1.0] * 30, [1.0] + [0.5] * 19 + [1.0] * 10, short, {0: [2.0], 20: [2.0]})
    rows = shapes.by_shape(eager, compiled, record, [])
    assert [(r.signature, r.step_count, r.compiles) for r in rows] == [("[8, 16]", 20, 1), ("[5, 16]", 10, 1)]
    assert rows[0].speedup == pytest.approx(2.0) and rows[0].verdict == "faster"
    found = {f["kind"]: f for f in shapes.findings(rows, speedup(eager, compiled), compiled, eager)}
    differs = found["main-shape-speedup-differs"]
    assert differs["figures"]["main"] == pytest.approx(2.0) and differs["figures"]["others"] == pytest.approx(1.0)
    assert "the other shapes 1.00x" in differs["text"]
    assert "mark_dynamic" in differs["options"][0]
    # 2 s of compiling the short shape against 20 × 0.5 s saved on the main one: no cost statement
    assert "minority-shapes-cost" not in found


def test_minority_compiles_that_outweigh_the_saving_are_said_with_the_measured_figures():
    eager, compiled, record = _runs([1.0] * 12, [1.0] + [0.9] * 11, (9,), {0: [2.0], 9: [5.0]})
    rows = shapes.by_shape(eager, compiled, record, [])
    short = rows[1]
    assert short.steps == [9] and short.compiled_median_s is None and "only in warm-up" in short.note
    found = shapes.findings(rows, None, compiled, eager)
    cost = next(f for f in found if f["kind"] == "minority-shapes-cost")
    # saved: 10 steady main steps at 0.1 s + the short step estimated at the main shape's gain
    assert cost["figures"]["minority_compile_s"] == 5.0 and cost["figures"]["saved_s"] == pytest.approx(1.2)
    assert cost["estimate"] is True and "an estimate" in cost["text"] and "cost 5.0 s of compiling (measured)" in cost["text"]
