"""`--trace-dir` and `compileLens.saveTrace`: torch's structured trace of exactly the analysis run, for tlparse.

The files must be what `TORCH_TRACE=DIR` writes (tlparse's input): `dedicated_log_torch_trace_*.log`,
each line a glog prefix then one JSON object, payload lines indented by a tab; file names in stacks
are ids announced by `str` records *in the same file*.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from lsp_support import open_file, start_server, stop_server
from paths import FIXTURES

# glog: level, MMDD HH:MM:SS.micro, pid, file:line] — then the JSON record
GLOG = re.compile(r"^[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ \S+:\d+\] (?P<json>\{.*\})$")

pytestmark = pytest.mark.slow


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONSAFEPATH": "1"})


def read_trace(path: Path) -> list[dict]:
    records = []
    for line in path.read_text().splitlines():
        if line.startswith("\t"):  # payload of the record above
            continue
        match = GLOG.match(line)
        assert match, f"not a glog-prefixed JSON line: {line[:120]}"
        records.append(json.loads(match["json"]))
    return records


def kinds(records: list[dict]) -> Counter:
    reserved = {"frame_id", "frame_compile_id", "attempt", "has_payload", "rank", "stack", "compiled_autograd_id"}
    return Counter(next(k for k in r if k not in reserved) for r in records)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("trace") / "proj"
    shutil.copytree(FIXTURES / "spine", root)
    return root


@pytest.fixture(scope="module")
def traced(project, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    trace_dir = tmp_path_factory.mktemp("torch-trace")
    done = run_cli("check", "breaks.py", "uses_helper.py", "--format", "json", "--no-benchmark",
                   "--trace-dir", str(trace_dir), cwd=project)
    assert done.returncode == 1, done.stderr
    return trace_dir, done


def test_one_trace_file_per_analysed_file_in_torch_trace_format(traced, project):
    trace_dir, done = traced
    files = sorted(trace_dir.iterdir())
    assert len(files) == 2 and all(re.fullmatch(r"dedicated_log_torch_trace_\w+\.log", f.name) for f in files)
    for f in files:
        seen = kinds(read_trace(f))
        # what tlparse builds its index from
        assert seen["dynamo_start"] >= 1 and seen["compilation_metrics"] >= 1 and seen["str"] >= 1, seen
        assert seen["dynamo_output_graph"] >= 1, seen
        # the CLI says where each file is
        assert str(f) in done.stderr


def test_the_trace_holds_the_breaks_and_recompiles_compile_lens_reports(traced, project):
    trace_dir, done = traced
    report = json.loads(done.stdout)
    records = [r for f in sorted(trace_dir.iterdir()) for r in read_trace(f)]
    artifacts = Counter(r["artifact"]["name"] for r in records if "artifact" in r)
    breaks = sum(len(t["graph_breaks"]) for f in report["files"] for t in f["targets"])
    recompiles = sum(len(t["recompiles"]) for f in report["files"] for t in f["targets"])
    assert breaks > 0 and recompiles > 0  # the fixture has both: the trace must too
    assert artifacts["dynamo_graph_break_reason"] >= breaks, artifacts
    assert artifacts["recompile_reasons"] >= 1, artifacts


def test_every_stack_resolves_within_its_own_file(traced):
    """The worker is warm: the second job's file must announce its file-name ids again."""
    trace_dir, _ = traced
    for f in sorted(trace_dir.iterdir()):
        records = read_trace(f)
        interned = {r["str"][1]: r["str"][0] for r in records if "str" in r}
        stacks = [frame for r in records if "dynamo_start" in r for frame in r["dynamo_start"]["stack"]]
        assert stacks
        assert all(frame["filename"] in interned for frame in stacks), f.name
        assert any(interned[frame["filename"]].endswith(("breaks.py", "uses_helper.py")) for frame in stacks)


def test_results_do_not_change_with_the_trace_on(traced, project):
    _, done = traced
    plain = run_cli("check", "breaks.py", "uses_helper.py", "--format", "json", "--no-benchmark", cwd=project)
    assert plain.returncode == 1, plain.stderr

    def findings(report: dict) -> list:
        return [(Path(f["path"]).name, d) for f in report["files"] for d in f["diagnostics"]]

    assert findings(json.loads(done.stdout)) == findings(json.loads(plain.stdout))


@pytest.mark.skipif(shutil.which("tlparse") is None and not (Path(sys.executable).parent / "tlparse").exists(),
                    reason="tlparse is not installed (pip install tlparse)")
def test_tlparse_reads_the_trace(traced, tmp_path):
    trace_dir, _ = traced
    tlparse = shutil.which("tlparse") or str(Path(sys.executable).parent / "tlparse")
    for i, f in enumerate(sorted(trace_dir.iterdir())):
        out = tmp_path / f"tl{i}"
        done = subprocess.run([tlparse, str(f), "-o", str(out), "--no-browser"], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        ok = re.search(r"Stats \{ ok: (\d+)", done.stdout + done.stderr)
        assert ok and int(ok[1]) > 0, done.stdout + done.stderr
        assert (out / "index.html").exists()
        assert any(p.name.startswith("0_") or "_0_0_" in p.name for p in out.iterdir())  # a compile id's folder


async def test_save_trace_command_writes_the_files(project, tmp_path):
    client = await start_server(project, settings={"benchmark.onSave": False})  # a trace, nothing measured
    try:
        uri = open_file(client, project / "breaks.py")
        target = tmp_path / "from-editor"
        answer = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("compileLens.saveTrace", [uri, str(target)]))
        assert answer["started"] is True and answer["dir"] == str(target)
        [written] = answer["files"]
        assert Path(written).parent == target
        assert kinds(read_trace(Path(written)))["dynamo_start"] >= 1
        # no folder given: one under the server's cache folder, never in the workspace
        answer = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("compileLens.saveTrace", [uri]))
        assert answer["started"] is True and answer["files"], answer
        assert not Path(answer["dir"]).is_relative_to(project)
    finally:
        await stop_server(client)
