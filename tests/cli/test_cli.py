"""`compile-lens check` as a user runs it: real worker, real torch, the three formats, exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from paths import DATA, FIXTURES

SCHEMA = DATA / "sarif-schema-2.1.0.json"


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONSAFEPATH": "1"})


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli") / "proj"
    shutil.copytree(FIXTURES / "spine", root)
    return root


@pytest.fixture(scope="module")
def json_report(project) -> dict:
    done = run_cli("check", "breaks.py", "uses_helper.py", "--format", "json", "--no-benchmark", cwd=project)
    assert done.returncode == 1, done.stderr
    return json.loads(done.stdout)


def test_json_has_the_documented_shape(json_report, project):
    assert json_report["schema"] == 1
    assert json_report["torch"].startswith("2.") and json_report["device"] == "cpu"
    files = {Path(f["path"]).name: f for f in json_report["files"]}
    breaks = files["breaks.py"]
    item = next(t for t in breaks["targets"] if t["name"] == "ItemNet")
    assert item["kind"] == "module" and item["status"] == "ok" and item["error"] is None
    assert item["inputs"] == {"source": "inferred", "text": "(torch.randn(8, 8),)", "origin": None}
    [gb] = item["graph_breaks"]
    line = next(i for i, text in enumerate((project / "breaks.py").read_text().splitlines(), 1) if "y.sum().item()" in text)
    assert (gb["gb_id"], gb["line"], gb["end_line"]) == ("GB0124", line, line)
    assert gb["column"] == (project / "breaks.py").read_text().splitlines()[line - 1].index("y.sum()") + 1
    assert set(gb) >= {"path", "line", "column", "end_line", "end_column", "gb_id", "gb_type", "explanation",
                       "hints", "url", "stack"}
    assert gb["stack"][-1] == {"path": str(project / "breaks.py"), "line": line, "name": "forward"}
    assert item["benchmark"] is None
    diag = next(d for d in breaks["diagnostics"] if d["code"] == "GB0124")
    assert diag["source"] == "Compile Lens" and diag["severity"] == "warning" and diag["line"] == line
    # the helper's break is listed under the helper's file too
    assert any(d["code"] == "GB0059" for d in files["util.py"]["diagnostics"])


def test_text_format_is_one_line_per_finding(project):
    done = run_cli("check", "breaks.py", "--no-benchmark", "-q", cwd=project)
    assert done.returncode == 1
    rows = [r for r in done.stdout.splitlines() if " GB" in r]
    assert len(rows) == 6
    assert all(r.startswith("breaks.py:") for r in rows)
    assert any(": GB0124 " in r for r in rows)


def test_sarif_validates_against_the_schema(project):
    done = run_cli("check", "breaks.py", "--format", "sarif", "--no-benchmark", "-q", cwd=project)
    sarif = json.loads(done.stdout)
    jsonschema.validate(sarif, json.loads(SCHEMA.read_text()))
    results = sarif["runs"][0]["results"]
    assert {r["ruleId"] for r in results} >= {"GB0124", "GB0059", "GB0170"}


def test_exit_codes(tmp_path):
    (tmp_path / "plain.py").write_text("def add(a, b):\n    return a + b\n")
    assert run_cli("check", "plain.py", "--no-benchmark", "-q", cwd=tmp_path).returncode == 0
    assert run_cli("check", "does-not-exist.py", cwd=tmp_path).returncode == 2
    assert run_cli("check", "--format", "xml", "plain.py", cwd=tmp_path).returncode == 2


def test_break_inside_a_library_is_reported_where_torch_reports_it(tmp_path):
    lib, ws = tmp_path / "lib", tmp_path / "ws"
    lib.mkdir()
    ws.mkdir()
    (lib / "fancylib.py").write_text("def shout(t):\n    print('shout', t.shape)\n    return t * 2\n")
    (ws / "model.py").write_text(
        "import torch\nfrom torch import nn\n\nimport fancylib\n\n\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n"
        "    def forward(self, x):\n        return fancylib.shout(self.fc(x))\n")
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "check", "model.py", "--format", "json",
                           "--no-benchmark", "-q"], cwd=ws, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONSAFEPATH": "1", "PYTHONPATH": str(lib)})
    report = json.loads(done.stdout)
    model = next(f for f in report["files"] if f["path"].endswith("model.py"))
    [gb] = model["targets"][0]["graph_breaks"]
    assert (Path(gb["path"]).name, gb["line"], gb["gb_id"]) == ("fancylib.py", 2, "GB0059")
    assert [(Path(f["path"]).name, f["line"]) for f in gb["stack"]][-2:] == [("model.py", 13), ("fancylib.py", 2)]
    call_site = [d for d in model["diagnostics"] if d["code"] == "GB0059"]
    assert [d["line"] for d in call_site] == [13]
