"""Issue 13 (6-9) through `compile-lens check`: models shaped like real ones, real torch.

- recompiles are classified per code object: `forward` in the user's file and `forward` in a
  library are two frames (a library head with optional `labels`, and GPT-2 from transformers);
- one graph-break count: distinct breaks at distinct locations, beside torch's graph count;
- a break inside a loop is said as what it is: the whole frame runs eagerly (GB7000);
- a break on a call spread over several lines spans those lines.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paths import FIXTURES


def run_cli(*args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONSAFEPATH": "1"})


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("truth") / "proj"
    shutil.copytree(FIXTURES / "truth", root)
    return root


@pytest.fixture(scope="module")
def report(project) -> dict:
    done = run_cli("check", "wrapper.py", "loop.py", "multi.py", "logged.py", "--format", "json",
                   "--no-benchmark", cwd=project)
    assert done.returncode == 1, done.stderr
    return json.loads(done.stdout)


def _file(report: dict, name: str) -> dict:
    return next(f for f in report["files"] if f["path"].endswith(os.sep + name))


def _target(report: dict, name: str) -> dict:
    return _file(report, name)["targets"][0]


def test_same_function_name_in_two_files_is_two_frames(report, project):
    wrapper = _file(report, "wrapper.py")
    records = wrapper["targets"][0]["recompiles"]
    # torch recompiled `forward` in wrapper.py and `forward` in vendorlib/heads.py for the same
    # batch change: each frame once, then dynamic — not "for every new value of `labels`"
    batch = [r for r in records if r["variation"].startswith("batch")]
    assert len(batch) >= 2 and {r["kind"] for r in batch} == {"automatic-dynamic"}
    diagnostics = wrapper["diagnostics"]
    assert not [d for d in diagnostics if d["code"] == "CL211"], [d["message"] for d in diagnostics]
    recompiles = [d for d in diagnostics if d["code"].startswith("CL21")]
    # one finding per input change, at the target, with the other frames summarised
    per_change = [d["data"]["variation"] for d in recompiles]
    assert len(per_change) == len(set(per_change))
    first = next(d for d in recompiles if d["data"]["variation"].startswith("batch"))
    assert first["code"] == "CL210" and first["line"] == 8
    assert re.search(r"\(\d compiled frames recompile", first["message"])
    assert "`labels`" in first["message"]


def test_a_library_function_broken_from_two_lines_is_two_breaks(report, project):
    """torch breaks inside `logging.warning` for each of the two calls and names one place (its
    log even drops the second's stack): each call line is a warning, and the count says two."""
    logged = _file(report, "logged.py")
    lines = [i for i, text in enumerate((project / "logged.py").read_text().splitlines(), 1)
             if "logging.warning(" in text]
    shown = sorted(d["line"] for d in logged["diagnostics"] if d["data"].get("kind") == "graph_break")
    assert shown == lines, logged["diagnostics"]
    breaks = logged["targets"][0]["graph_breaks"]
    assert len(breaks) == 2 and len({(b["path"], b["line"]) for b in breaks}) == 1
    # the text's count is of these two, not of torch's one place
    done = run_cli("check", "logged.py", "--no-benchmark", "--no-recompiles", cwd=project)
    assert "(2 graph breaks (torch: " in done.stdout, done.stdout


def test_one_break_counted_once_everywhere(report, project):
    wrapper = _target(report, "wrapper.py")
    assert [g["gb_id"] for g in wrapper["graph_breaks"]] == ["GB0291"]
    assert wrapper["graph_breaks"][0]["path"].endswith("heads.py")
    diagnostics = _file(report, "wrapper.py")["diagnostics"]
    # shown at the call site in wrapper.py too, but that is the same break
    assert [d["data"].get("call_site") for d in diagnostics if d["code"] == "GB0291"] == [True]
    for f in report["files"]:
        assert not [d for d in f["diagnostics"] if d["code"] == "graph-break"], "step_unsupported not folded"
    done = run_cli("check", "wrapper.py", "--no-benchmark", cwd=project)
    summary = done.stdout.strip().splitlines()[-1]
    graphs = wrapper["graph_count"]
    assert re.match(rf"Found \d+ warnings? \(1 graph break \(torch: {graphs} graphs\)", summary), done.stdout


def test_break_inside_a_loop_says_the_frame_runs_eagerly(report, project):
    loop = _target(report, "loop.py")
    assert len(loop["graph_breaks"]) == 1
    gb = loop["graph_breaks"][0]
    # where torch points: the `.item()` inside the loop, with its own id; the loop torch skips beside it
    assert gb["gb_id"] == "GB0124" and gb["url"].endswith("/gb0124.html")
    assert (gb["line"], gb["end_line"]) == (18, 18)
    assert (gb["loop"]["gb_id"], gb["loop"]["line"], gb["loop"]["function"]) == ("GB7000", 16, "forward")
    assert gb["loop"]["url"].endswith("/gb7000.html")
    [diagnostic] = [d for d in _file(report, "loop.py")["diagnostics"] if d["code"] in ("GB0124", "GB7000")]
    assert (diagnostic["code"], diagnostic["line"]) == ("GB0124", 18)
    assert "Unsupported Tensor.item() call" in diagnostic["message"]
    assert "inside the loop at line 16: torch skips the whole `forward`, which runs eagerly" in diagnostic["message"]
    assert "capture_scalar_outputs" in diagnostic["message"]  # the break's own hint: what to do
    header = [r for r in diagnostic["related"] if r["line"] == 16]
    assert header and header[0]["note"].startswith("GB7000: the loop this break is in")
    assert loop["graph_count"] == 0  # torch skipped the frame: nothing compiled


def test_multi_line_call_spans_its_lines(report, project):
    gb = _target(report, "multi.py")["graph_breaks"][0]
    assert gb["gb_id"] == "GB0124"
    assert (gb["line"], gb["column"], gb["end_line"], gb["end_column"]) == (13, 17, 15, 10)
    done = run_cli("check", "multi.py", "--no-benchmark", "--format", "sarif", cwd=project)
    sarif = json.loads(done.stdout)
    region = next(r for r in sarif["runs"][0]["results"] if r["ruleId"] == "GB0124")[
        "locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 13, "startColumn": 17, "endLine": 15, "endColumn": 10}


@pytest.mark.slow
def test_gpt2_wrapper_with_labels(tmp_path):
    pytest.importorskip("transformers")
    root = tmp_path / "proj"
    shutil.copytree(FIXTURES / "truth_gpt2", root)
    done = run_cli("check", "lm.py", "--format", "json", "--no-benchmark", "--timeout", "600", cwd=root,
                   timeout=900)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    target = doc["files"][0]["targets"][0]
    assert target["status"] == "ok", target["error"]
    # transformers' loss_function logs (GB0291); its caller's step_unsupported is the same break
    assert [g["gb_id"] for g in target["graph_breaks"]] == ["GB0291"]
    assert target["graph_breaks"][0]["path"].endswith("modeling_utils.py")
    diagnostics = doc["files"][0]["diagnostics"]
    assert not [d for d in diagnostics if d["code"] == "CL211"], [d["message"] for d in diagnostics]
    recompiles = [d for d in diagnostics if d["code"].startswith("CL21")]
    changes = [d["data"]["variation"] for d in recompiles]
    assert len(changes) == len(set(changes)), changes  # one per input change, not one per frame
    batch = next(d for d in recompiles if d["data"]["variation"].startswith("batch"))
    assert batch["code"] == "CL210" and "`labels`" in batch["message"]
    assert re.search(r"\(\d+ compiled frames recompile; first guard in `\w+`", batch["message"])


@pytest.mark.slow
def test_measured_verdict_counts_breaks_as_the_trace_does(project):
    # before: the table said 1 break, the verdict none (no frame was compiled: frames - 1 = 0).
    # The verdict's breaks are said whatever the timing concludes, so a short budget: with nothing
    # compiled the rounds never conclude and would take the whole default 60 s; no recompile sweep (not
    # what is tested here: the verdict counts the trace's breaks)
    # (the breaks are read from this process's warm compile: peak memory asked for, which runs it, whatever the budget)
    done = run_cli("check", "loop.py", "--format", "json", "--timeout", "600", "--max-seconds", "5", "--no-recompiles",
                   "--with", "memory", cwd=project)
    assert done.returncode == 1, done.stderr
    target = json.loads(done.stdout)["files"][0]["targets"][0]
    assert len(target["graph_breaks"]) == 1
    bench = target["benchmark"]
    assert bench is not None, target["error"]
    assert bench["verdict"].endswith("; 1 graph break"), bench["verdict"]
    [note] = [n for n in bench["notes"] if n.startswith("graph breaks:")]
    assert note.startswith("graph breaks: 1 — the whole function runs eagerly (GB0124 ")
    assert note.endswith(" at loop.py:18)"), note
