"""Issue 24.1: findings are known by stable keys (file, code, the line's text and the structured
data they were made from), never by message text; messages carry no run-specific text. A baseline
written by one run holds every finding of a fresh (`--no-cache`) run; a reworded message, a moved
line and an old (version 1) baseline file keep working. Real CLI, real worker, real torch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compile_lens.cli.baseline import apply_baseline, write_baseline
from compile_lens.protocol import FileReport, Finding
from compile_lens.render.keys import identity
from compile_lens.torch_text.stable_text import stable_text
from paths import FIXTURES

FIXTURES = FIXTURES / "ci"


def run_cli(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONSAFEPATH": "1", "COMPILE_LENS_CACHE_DIR": str(cache)})


def test_run_specific_text_becomes_what_stays_the_same(tmp_path):
    assert stable_text("Skip calling function `<function audit at 0x7fe369bdb380>` since it was wrapped") == \
        "Skip calling function `audit` since it was wrapped"
    assert stable_text("<bound method Net.helper of <model.Net object at 0x7f11aa22bb33>>") == "Net.helper"
    assert stable_text("got <torch._C.Generator object at 0x7f11aa22bb33>") == "got <torch._C.Generator object>"
    assert stable_text(f"{tmp_path}/tmpq1w2e3r4/model.py") .endswith("/model.py")
    assert "tmpq1w2e3r4" not in stable_text("/tmp/tmpq1w2e3r4/model.py")
    assert stable_text("worker pid 48213 exited") == "worker pid exited"
    # values are not addresses: short hex, sizes and line numbers stay
    assert stable_text("mask 0x10, size 1024 at line 12") == "mask 0x10, size 1024 at line 12"


def _report(path: Path, message: str, line: int = 3, **data) -> FileReport:
    data = {"kind": "graph_break", "gb_id": "GB0098", "target": "Net", "function": "forward", **data}
    return FileReport(str(path), findings=[Finding(str(path), line, 5, line, 9, "warning", "GB0098", message,
                                                   data=data)])


def test_a_reworded_message_keeps_its_baseline_entry(tmp_path):
    model = tmp_path / "net.py"
    model.write_text("import torch\n\n        y = audit(y)\n")
    baseline = tmp_path / "baseline.json"
    assert write_baseline([_report(model, "Skip calling function `audit` (took 3.2 s cold)")], str(tmp_path),
                          str(baseline)) == 1
    reworded = _report(model, "`audit` runs eagerly: torch.compiler.disable keeps it out of the graph")
    assert apply_baseline([reworded], str(tmp_path), str(baseline)) == 1
    assert reworded.findings[0].data["baseline"] is True
    # the same line moved down (lines added above it) is the same finding
    model.write_text("import torch\nimport os\n\n\n        y = audit(y)\n")
    moved = _report(model, "anything", line=5)
    assert apply_baseline([moved], str(tmp_path), str(baseline)) == 1
    # another break on that line is a new finding, whatever its message says
    other = _report(model, "Skip calling function `audit` (took 3.2 s cold)", line=5, gb_id="GB0124")
    assert apply_baseline([other], str(tmp_path), str(baseline)) == 0
    # the key never holds a message, a line number or a figure
    fields = identity(moved.findings[0], str(tmp_path), model.read_text().splitlines())
    assert fields == {"path": "net.py", "code": "GB0098", "line_text": "y = audit(y)", "kind": "graph_break",
                      "gb_id": "GB0098", "target": "Net", "function": "forward"}


def test_an_old_baseline_file_is_still_read(tmp_path):
    """Version 1 keyed on the message's first line (with the address in it): read on file, code
    and the line's text, so a team's baseline keeps holding its findings after the upgrade."""
    model = tmp_path / "net.py"
    model.write_text("import torch\n\n        y = audit(y)\n")
    old = {"version": 1, "tool": "compile-lens", "findings": [
        {"path": "net.py", "code": "GB0098", "message": "Skip calling function `<function audit at 0x7fe369bdb380>`",
         "line_text": "y = audit(y)", "count": 1}]}
    baseline = tmp_path / "old.json"
    baseline.write_text(json.dumps(old))
    fresh = _report(model, "Skip calling function `audit`")
    assert apply_baseline([fresh], str(tmp_path), str(baseline)) == 1
    baseline.write_text(json.dumps({**old, "version": 7}))
    with pytest.raises(ValueError, match="version 1 or 2"):
        apply_baseline([fresh], str(tmp_path), str(baseline))


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """A project holding the GB0098 block, checked once (the cache is then warm)."""
    base = tmp_path_factory.mktemp("keys")
    project, cache = base / "project", base / "cache"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'audited'\n")
    shutil.copy(FIXTURES / "audited.py", project / "audited.py")
    first = run_cli("check", ".", "--no-benchmark", "--format", "json", cwd=project, cache=cache)
    assert first.returncode == 1, first.stderr  # GB0098 is a warning
    return project, cache, json.loads(first.stdout)


def test_the_gb0098_message_names_the_helper_not_its_address(audited):
    _, _, doc = audited
    (gb,) = [d for f in doc["files"] for d in f["diagnostics"] if d["code"] == "GB0098"]
    assert "`audit`" in gb["message"] and " at 0x" not in gb["message"], gb["message"]
    breaks = [g for f in doc["files"] for t in f["targets"] for g in t["graph_breaks"]]
    assert breaks and all(" at 0x" not in g["reason"] + g["explanation"] for g in breaks)


def test_a_baseline_holds_every_finding_of_a_fresh_run(audited, tmp_path):
    project, cache, doc = audited
    baseline = tmp_path / "baseline.json"
    wrote = run_cli("check", ".", "--no-benchmark", "--baseline", str(baseline), "--write-baseline", cwd=project,
                    cache=cache)
    assert wrote.returncode == 0, wrote.stderr
    total = sum(len(f["diagnostics"]) for f in doc["files"])
    assert f"wrote {total} findings" in wrote.stderr and total >= 5  # the break, recompiles, the CL001 note
    fresh = run_cli("check", ".", "--no-benchmark", "--no-cache", "--baseline", str(baseline), cwd=project, cache=cache)
    assert fresh.returncode == 0, fresh.stdout
    assert f"{total} findings in the baseline not shown" in fresh.stdout, fresh.stdout


@pytest.mark.slow
def test_a_baseline_holds_a_measured_runs_findings(tmp_path):
    """With measurements the recompile messages quote compile times; the keys never see them."""
    shutil.copy(FIXTURES / "tiny_audited.py", tmp_path / "tiny_audited.py")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'tiny'\n")
    baseline, cache = tmp_path / "baseline.json", tmp_path / "cache"
    args = ("check", "tiny_audited.py", "--max-seconds", "5", "--baseline", str(baseline))  # measured: not about the rounds
    wrote = run_cli(*args, "--write-baseline", "--format", "json", cwd=tmp_path, cache=cache)
    assert wrote.returncode == 0, wrote.stderr
    (target,) = [t for f in json.loads(wrote.stdout)["files"] for t in f["targets"]]
    assert target["benchmark"] is not None, target  # it was measured
    codes = {d["code"] for f in json.loads(wrote.stdout)["files"] for d in f["diagnostics"]}
    assert "GB0098" in codes
    fresh = run_cli(*args, "--no-cache", "--format", "json", cwd=tmp_path, cache=cache)
    assert fresh.returncode == 0, fresh.stderr
    shown = [d for f in json.loads(fresh.stdout)["files"] for d in f["diagnostics"] if not d["data"].get("baseline")]
    assert shown == [], shown
