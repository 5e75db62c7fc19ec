"""`compile-lens check` in CI: the workspace root found like ruff, --target, the result cache,
--no-recompiles, baselines, exit codes by severity, paths relative to the root, CLI words.
Real worker, real torch (backend-free traces and the eager-backend sweep; no Inductor)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compile_lens.config import find_root
from compile_lens.render.assembly import in_workspace
from compile_lens.render.cli_output import cli_words

PYPROJECT = '''\
[tool.compile-lens]
"worker.timeoutSeconds" = 120

[[tool.compile-lens.targets]]
target = "models/net.py:Gated"
init = "Gated(width=8)"
inputs = "(torch.randn(4, 8),)"
'''

NET = '''\
import torch
from torch import nn


class Gated(nn.Module):
    """Needs its width: only the pyproject entry says how to build it."""

    def __init__(self, width, gate=0.5):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.gate = gate

    def forward(self, x):
        y = self.proj(x)
        if y.mean().item() > self.gate:
            y = y * 2
        return y


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.fc(x))
'''


WIDE = '''\
import torch
from torch import nn


class Wide(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return torch.relu(self.fc(x))
'''
RECORDED = {"schema": 1, "targets": {"wide.py:Wide": {
    "kind": "module", "init": {"call": "Wide(6)", "cannot_replay": None},
    "call": {"args": [{"name": "x", "spec": {"tensor": {"shape": [3, 6], "dtype": "float32", "device": "cpu",
                                                        "requires_grad": False}}}], "cannot_replay": None},
    "calls": 1, "shapes": [{"shapes": [[3, 6]], "count": 1}], "more_shapes": 0,
    "run": {"at": "2026-01-01T00:00:00Z", "command": "python train.py", "id": "t"}}}}


def make_recorded(base: Path) -> Path:
    """A folder with no pyproject.toml or .git: only what `compile-lens record` wrote marks it."""
    repo = base / "recorded"
    (repo / ".compile-lens").mkdir(parents=True)
    (repo / "wide.py").write_text(WIDE)
    (repo / ".compile-lens" / "recorded.json").write_text(json.dumps(RECORDED))
    return repo


def make_repo(base: Path) -> Path:
    repo = base / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "models" / "__init__.py").write_text("")
    (repo / "models" / "net.py").write_text(NET)
    return repo


def run_cli(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONSAFEPATH": "1", "COMPILE_LENS_CACHE_DIR": str(cache)})


def targets_of(doc: dict) -> dict[str, dict]:
    return {t["name"]: t for f in doc["files"] for t in f["targets"]}


@pytest.fixture(scope="module")
def ci(tmp_path_factory):
    """A project checked once from its parent folder (the cache is then warm); yields (base, repo, cache, json)."""
    base = tmp_path_factory.mktemp("ci")
    repo, cache = make_repo(base), base / "cache"
    done = run_cli("check", "repo", "--no-benchmark", "--format", "json", cwd=base, cache=cache)
    assert done.returncode == 1, done.stderr  # the .item() break is a warning
    assert "tracing" in done.stderr
    return base, repo, cache, json.loads(done.stdout)


# --- 15.2: the workspace root is found, not assumed ---------------------------------------------

def test_run_from_the_parent_folder_uses_the_projects_pyproject(ci):
    _, _, _, doc = ci
    found = targets_of(doc)
    assert found["Gated"]["inputs"] == {"source": "config", "text": "(torch.randn(4, 8),)", "origin": None}
    assert found["Gated"]["status"] == "ok" and [g["gb_id"] for g in found["Gated"]["graph_breaks"]] == ["GB0124"]
    assert found["Plain"]["recompiles"], "the recompile sweep ran"


def test_run_from_the_parent_folder_uses_the_recorded_run(tmp_path):
    make_recorded(tmp_path)
    done = run_cli("check", "recorded", "--no-benchmark", "--no-recompiles", "--format", "json", cwd=tmp_path,
                   cache=tmp_path / "cache")
    wide = targets_of(json.loads(done.stdout))["Wide"]
    assert wide["inputs"] == {"source": "recorded", "text": "(torch.randn(3, 6),)", "origin": None} and wide["status"] == "ok"
    assert done.returncode == 0, done.stdout


def test_find_root_like_ruff(tmp_path):
    top = tmp_path / "mono"
    (top / "pkg" / "sub").mkdir(parents=True)
    (top / ".git").mkdir()
    (top / "pyproject.toml").write_text("[tool.compile-lens]\ndevice = 'cpu'\n")
    (top / "pkg" / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    leaf = top / "pkg" / "sub" / "m.py"
    leaf.write_text("")
    assert find_root(str(leaf)) == str(top)  # [tool.compile-lens] wins over a nearer plain pyproject
    (top / "pyproject.toml").write_text("[project]\nname = 'mono'\n")
    assert find_root(str(leaf)) == str(top / "pkg")  # else the nearest pyproject.toml
    recorded = tmp_path / "scripts"
    (recorded / ".compile-lens").mkdir(parents=True)
    (recorded / "deep").mkdir()
    (recorded / "deep" / "x.py").write_text("")
    assert find_root(str(recorded / "deep" / "x.py")) == str(recorded)  # where `record` wrote
    # an editor's workspace folder bounds the search, and is the answer when nothing is nearer
    assert find_root(str(leaf), str(top / "pkg" / "sub")) == str(top / "pkg" / "sub")
    # a repository's top ends the search: a pyproject above it is another project's
    (tmp_path / "pyproject.toml").write_text("[tool.compile-lens]\n")
    (top / "pkg" / "pyproject.toml").unlink()
    assert find_root(str(leaf)) == str(top)


def test_paths_are_relative_to_the_root(ci):
    base, repo, cache, _ = ci
    done = run_cli("check", "repo", "--no-benchmark", "-q", cwd=base, cache=cache)
    rows = [r for r in done.stdout.splitlines() if ": GB" in r or ": CL" in r]
    assert rows and all(r.startswith("models/net.py:") for r in rows), rows
    sarif = json.loads(run_cli("check", "repo", "--no-benchmark", "-q", "--format", "sarif", cwd=base,
                               cache=cache).stdout)
    run = sarif["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.as_uri() + "/"
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]} == {"models/net.py"}
    # --root overrides: paths are then relative to it
    done = run_cli("check", "repo", "--no-benchmark", "-q", "--root", "repo/models", cwd=base, cache=cache)
    assert any(r.startswith("net.py:") for r in done.stdout.splitlines())


# --- 15.3: a CLI fit for CI ---------------------------------------------------------------------

def test_a_rerun_of_unchanged_files_comes_from_the_cache(ci):
    base, _, cache, doc = ci
    done = run_cli("check", "repo", "--no-benchmark", "--format", "json", cwd=base, cache=cache)
    assert "tracing" not in done.stderr and "from the cache" in done.stderr, done.stderr
    assert json.loads(done.stdout) == doc
    again = run_cli("check", "repo", "--no-benchmark", "--format", "json", "--no-cache", cwd=base, cache=cache)
    assert "tracing" in again.stderr
    assert targets_of(json.loads(again.stdout))["Gated"]["graph_breaks"] == targets_of(doc)["Gated"]["graph_breaks"]


def test_target_picks_one_and_information_does_not_fail(ci):
    base, _, cache, _ = ci
    done = run_cli("check", "repo", "--no-benchmark", "--target", "Plain", cwd=base, cache=cache)
    assert done.returncode == 0, done.stdout  # CL210/CL213 are information: no failure
    lines = done.stdout.strip().splitlines()
    assert lines and all(" CL2" in r for r in lines[:-2]) and all("GB" not in r for r in lines)
    assert "information" in lines[-1] and "warning" not in lines[-1], lines[-1]
    assert "(1 target); not run: measurement (--no-benchmark)." in lines[-1]
    picked = run_cli("check", "repo", "--no-benchmark", "--no-recompiles", "--format", "json", "--no-cache",
                     "--target", "repo/models/net.py:Gated", cwd=base, cache=cache)
    assert list(targets_of(json.loads(picked.stdout))) == ["Gated"]
    assert json.loads(picked.stdout)["checks"] == {"graph_breaks": True, "recompiles": False, "benchmark": False}
    assert targets_of(json.loads(picked.stdout))["Gated"]["recompiles"] == []  # --no-recompiles
    assert targets_of(json.loads(picked.stdout))["Gated"]["graph_breaks"]
    missing = run_cli("check", "repo", "--target", "Nope", cwd=base, cache=cache)
    assert missing.returncode == 2 and "no target Nope" in missing.stderr


def test_baseline_fails_only_on_new_findings(tmp_path):
    repo, cache = make_repo(tmp_path), tmp_path / "cache"
    baseline = tmp_path / "compile-lens-baseline.json"
    args = ("check", ".", "--no-benchmark", "--no-recompiles", "--baseline", str(baseline))
    wrote = run_cli(*args, "--write-baseline", cwd=repo, cache=cache)
    assert wrote.returncode == 0 and baseline.is_file(), wrote.stderr
    entries = json.loads(baseline.read_text())["findings"]
    assert [(e["key"]["path"], e["key"]["code"]) for e in entries] == [("models/net.py", "GB0124")]
    held = run_cli(*args, cwd=repo, cache=cache)
    assert held.returncode == 0, held.stdout
    assert "1 finding in the baseline not shown" in held.stdout and "GB0124" not in held.stdout
    # lines above move the old break; a new break is the only one reported
    net = repo / "models" / "net.py"
    net.write_text(NET.replace("import torch\n", "import torch\n\nSCALE = 2.0\n\n", 1)
                   .replace("        return torch.relu(self.fc(x))", "        print('step')\n        return torch.relu(self.fc(x))"))
    new = run_cli(*args, cwd=repo, cache=cache)
    assert new.returncode == 1
    rows = [r for r in new.stdout.splitlines() if ": GB" in r]
    assert len(rows) == 1 and "print" in rows[0], new.stdout


def test_library_files_are_related_locations_only(tmp_path):
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "fancylib.py").write_text("def shout(t):\n    print('shout', t.shape)\n    return t * 2\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pyproject.toml").write_text("[project]\nname = 'ws'\n")
    (ws / "model.py").write_text(
        "import torch\nfrom torch import nn\n\nimport fancylib\n\n\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n"
        "    def forward(self, x):\n        return fancylib.shout(self.fc(x))\n")
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "check", ".", "--format", "sarif",
                           "--no-benchmark", "--no-recompiles", "-q"], cwd=ws, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONSAFEPATH": "1", "PYTHONPATH": str(site)})
    results = json.loads(done.stdout)["runs"][0]["results"]
    where = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in results]
    assert where == [{"uri": "model.py", "uriBaseId": "%SRCROOT%"}], where
    related = [x["physicalLocation"]["artifactLocation"]["uri"] for x in results[0]["relatedLocations"]]
    assert any(u.endswith("site-packages/fancylib.py") for u in related), related
    assert in_workspace(str(ws / "model.py"), str(ws))
    assert not in_workspace(str(ws / ".venv/lib/python3.11/site-packages/x.py"), str(ws))


def test_messages_name_cli_flags():
    assert cli_words("raise compileLens.worker.timeoutSeconds if this code is just slow") == \
        "raise --timeout if this code is just slow"
    assert cli_words("raise compileLens.worker.memoryLimitMB, or use smaller example inputs").startswith(
        "raise --memory-limit,")
    assert cli_words("raise compileLens.benchmark.maxSeconds") == "raise --max-seconds"
    assert cli_words(None) is None


def test_a_measurements_notes_name_cli_flags_too():
    """The measurement's notes and verdict were written for the editor; in the CLI's text and JSON
    they name the flag (`check --max-seconds`), and the measurement kept for the editor is untouched."""
    from compile_lens.engine.finish import reword
    from compile_lens.protocol import (
        Benchmark,
        CompileSeconds,
        Errors,
        FileReport,
        PeakMemory,
        TargetResult,
        Timing,
    )

    timing = Timing(eager_ms=1.0, compiled_ms=1.0, speedup=1.0, eager_iqr_ms=0.1, compiled_iqr_ms=0.1)
    note = "timing: compiling took most of the 15 s budget (raise compileLens.benchmark.maxSeconds for more)"
    bench = Benchmark("cpu", "cpu", "default", timing, None, CompileSeconds(), None, PeakMemory(), Errors(), Errors(), "inconclusive", notes=[note])
    report = FileReport(path="m.py", targets=[TargetResult(name="M", kind="module", line=1, benchmark=bench)])
    reword([report])
    assert report.targets[0].benchmark.notes == [note.replace("compileLens.benchmark.maxSeconds", "--max-seconds")]
    assert bench.notes == [note]


def test_usage_errors(tmp_path):
    (tmp_path / "m.py").write_text("x = 1\n")
    cache = tmp_path / "cache"
    assert run_cli("check", "m.py", "--write-baseline", cwd=tmp_path, cache=cache).returncode == 2
    assert run_cli("check", "m.py", "--baseline", "missing.json", cwd=tmp_path, cache=cache).returncode == 2
    assert run_cli("check", "m.py", "--root", "nowhere", cwd=tmp_path, cache=cache).returncode == 2
    shutil.rmtree(cache, ignore_errors=True)
