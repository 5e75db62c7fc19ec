"""`compile-lens trial` on the real stream of shapes, and what it saw used everywhere (issue 27, parts 2-3).

One real trial (module-scoped, `aot_eager`: real Dynamo and AOTAutograd, so breaks, recompiles and
compile figures are real without minutes of Inductor codegen) of a character-level LM whose
`forward` reads `x.abs().max().item()` and whose every 10th batch is 3 rows short. Checked against
what the program does by construction (step 9 is the one short step) and against the run's own
compile records; then the report's shape section, the hover line, and `check` on the file the
trial leaves its record for.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types as lsp

import paths
from compile_lens.protocol import FileReport, Finding
from compile_lens.render.cards import trial_line
from compile_lens.render.html_parts import _Page
from compile_lens.render.report_html import render_report
from compile_lens.render.report_trial import trial_section
from compile_lens.trial import store
from lsp_support import locate, open_file, start_server, stop_server

FIXTURES = paths.FIXTURES / "trial"
SERVER = str(paths.SERVER)
SCRIPT = "train_charlm.py"
STEPS = 12
ITEM_LINE = next(i for i, t in enumerate((FIXTURES / SCRIPT).read_text().splitlines(), 1) if "x.abs().max().item()" in t)


def _cli(root: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", *args], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": SERVER}, timeout=timeout)


@pytest.fixture(scope="module")
def charlm(tmp_path_factory):
    root = tmp_path_factory.mktemp("charlm")
    shutil.copy(FIXTURES / SCRIPT, root / SCRIPT)
    done = _cli(root, "trial", "--steps", str(STEPS), "--backend", "aot_eager", "--gpu-price", "2", "--hours-per-month",
                "100", "--json", "trial.json", "--", sys.executable, SCRIPT)
    assert (root / "trial.json").exists(), done.stderr[-3000:]
    return root, done, json.loads((root / "trial.json").read_text())


@pytest.mark.slow
def test_steps_are_counted_per_shape_exactly(charlm):
    _, done, figures = charlm
    assert done.returncode == 0, done.stderr[-3000:]
    rows = figures["by_shape"]
    # the program's own rule: step % 10 == 9 is 3 rows short; the model gets (idx, targets)
    assert [(r["shapes"], r["steps"]) for r in rows] == [
        ([[8, 16], [8, 16]], [i for i in range(STEPS) if i != 9]), ([[5, 16], [5, 16]], [9])]
    assert sum(r["step_count"] for r in rows) == STEPS == len(figures["compiled"]["steps"])


@pytest.mark.slow
def test_compiles_per_shape_match_the_recompiles(charlm):
    _, _, figures = charlm
    rows = {r["signature"]: r for r in figures["by_shape"]}
    steps = {s["index"]: s for s in figures["compiled"]["steps"]}
    assert sum(r["compiles"] for r in rows.values()) == figures["compile_time"]["compiles"]
    for row in rows.values():
        mine = [r for r in figures["recompiles"] if r["step"] in row["steps"]]  # by the step, not the event's shapes
        assert row["recompiles"] == len(mine)
        assert row["compiles"] >= row["recompiles"]  # each recompile is a frame compile; first compiles add to them
        assert all(steps[r["step"]]["shapes"] == row["shapes"] for r in mine)
    short = rows["[5, 16] [5, 16]"]
    assert short["recompiles"] >= 1 and any("size mismatch" in r["reason"] and r["step"] == 9 for r in figures["recompiles"])
    # seen only in a step that compiled: no compiled median, no speedup, and said
    assert short["compiled_median_s"] is None and short["speedup"] is None and "only in warm-up" in short["note"]
    main = rows["[8, 16] [8, 16]"]
    assert main["compiled_median_s"] is not None and main["eager_median_s"] is not None


@pytest.mark.slow
def test_the_minority_shape_cost_is_said_with_measured_figures_and_the_options(charlm):
    _, done, figures = charlm
    short = next(r for r in figures["by_shape"] if r["step_count"] == 1)
    assert short["compile_s"] > 0
    # its compile against what compiling saved over the run (an estimate: the shape has no steady time). A
    # recompile of the one short step costs a compile (tenths of a second, aot_eager); 11 steps of this tiny
    # model cannot save that much, so the finding is always there.
    costly = [f for f in figures["shape_findings"] if f["kind"] == "minority-shapes-cost"]
    assert len(costly) == 1, (figures["shape_findings"], figures["by_shape"])
    f = costly[0]
    assert f["figures"]["minority_compile_s"] == pytest.approx(short["compile_s"]) and f["estimate"] is True
    assert f["figures"]["minority_compile_s"] > f["figures"]["saved_s"]
    assert "an estimate" in f["text"] and any("mark_dynamic" in o for o in f["options"])
    assert f"cost {short['compile_s']:.1f} s of compiling (measured)" in done.stderr
    assert "by input shape (steps, compiles, recompiles" in done.stderr
    assert re.search(r"\[5, 16\] \[5, 16\]: 1 step, \d+ compiles?, \d+ recompiles?; seen only in warm-up", done.stderr)


@pytest.mark.slow
def test_recompiles_name_the_users_function_and_the_value_baked_in(charlm):
    _, done, figures = charlm
    values = [r for r in figures["recompiles"] if "___stack" in r["reason"]]
    assert values, figures["recompiles"]
    for r in values:
        assert r["function"] == "forward" and r["resumed_at_line"] == ITEM_LINE
        assert r["meaning"].startswith(f"the value of `x.abs().max().item()` at line {ITEM_LINE} was baked in")
    assert "torch_dynamo_resume_in" not in done.stderr
    assert f"forward at {figures['recompiles'][0]['where']}" in done.stderr and "a new value recompiles" in done.stderr


@pytest.mark.slow
def test_the_bill_says_it_was_measured_on_the_cpu(charlm):
    _, done, figures = charlm
    assert figures["cost"]["device"] == "cpu"
    assert any("measured on the CPU, not a GPU" in line for line in figures["cost"]["lines"])
    assert "measured on the CPU, not a GPU" in done.stderr


@pytest.mark.slow
def test_the_report_section_and_the_hover_line_show_the_shapes(charlm):
    root, _, _ = charlm
    saved = store.read(str(root))
    section = trial_section(_Page(str(root), False), saved, saved.figures.cost)
    assert "By input shape: 2 shapes" in section and "<code>[5, 16] [5, 16]</code>" in section
    assert "seen only in warm-up steps" in section and "was baked in" in section
    assert "torch_dynamo_resume_in" not in section and "measured on the CPU, not a GPU" in section
    hover = trial_line(saved, saved.figures.cost)
    line = next(ln for ln in hover.splitlines() if ln.startswith("- by input shape in your run"))
    assert "`[8, 16] [8, 16]` 11 steps" in line and "`[5, 16] [5, 16]` 1 step warm-up only" in line


@pytest.mark.slow
def test_after_the_trial_check_traces_the_programs_modules_with_the_trials_inputs(charlm):
    root, done, figures = charlm
    recorded = json.loads((root / ".compile-lens" / "recorded.json").read_text())["targets"]
    assert {"train_charlm.py:CharLM", "train_charlm.py:Block", "train_charlm.py:RMSNorm"} <= set(recorded)
    assert recorded["train_charlm.py:CharLM"]["calls"] == STEPS  # the eager run's calls, one per step
    assert figures["recorded"]["targets"] == sorted(recorded) and "merged into .compile-lens/recorded.json" in done.stderr
    checked = _cli(root, "check", "--no-benchmark", "--no-recompiles", "--no-cache", "--format", "json", SCRIPT)
    result = json.loads(checked.stdout)
    targets = {t["name"]: t for f in result["files"] for t in f["targets"]}
    assert "CharLM" in targets, checked.stdout[-3000:]  # before the trial: "cannot guess inputs for `CharLM`"
    assert any(g["gb_id"] == "GB0124" for g in targets["CharLM"]["graph_breaks"])  # the trial's break, traced


@pytest.mark.slow
async def test_the_editors_hover_card_of_the_model_has_the_shape_line(charlm):
    root, _, figures = charlm
    client = await start_server(root, trusted=False)  # answered from the saved trial: no user code runs
    card = None
    try:
        path = root / SCRIPT
        uri = open_file(client, path)
        line, col = locate(path, "class CharLM")
        for _ in range(50):
            hover = await client.text_document_hover_async(lsp.HoverParams(
                lsp.TextDocumentIdentifier(uri), lsp.Position(line, col + len("class ") + 1)))
            if hover is not None:
                card = hover.contents.value
                break
            await asyncio.sleep(0.2)
    finally:
        await stop_server(client)
    assert card is not None
    main, short = figures["by_shape"]
    assert (f"- by input shape in your run: `{main['signature']}` {main['step_count']} steps" in card
            and f"`{short['signature']}` 1 step warm-up only" in card), card


def test_the_report_names_the_targets_it_did_not_trace():
    finding = Finding("train_charlm.py", 46, 7, 46, 7, "information", "CL001",
                      "cannot guess inputs for `CharLM` (`targets` reaches no layer whose input size is known)")
    page = render_report([FileReport("train_charlm.py", [], [finding])], title="t", torch_version="2.13",
                         device="cpu", cwd=".")
    assert "nothing in these files is compiled or an nn.Module" not in page
    assert "No graph breaks in the traced targets" not in page
    assert ('No target was traced: <code class="loc">train_charlm.py:46</code>: cannot guess inputs for `CharLM`'
            in page)
