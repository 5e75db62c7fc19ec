"""`compile-lens mcp` end to end: the MCP SDK's own client (`ClientSession` over `stdio_client`)
drives a real server subprocess on real files. One scenario traces (check → fixes → apply_fix,
then `import` of a torch trace of the fixed file); the rest need no torch in any process."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import psutil
import pytest

from paths import DATA, REPO

mcp = pytest.importorskip("mcp", reason="the MCP SDK (requirements-dev.txt) is not installed")
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace with the `.item()` example, and a result cache of its own beside it."""
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "pyproject.toml").write_text('[project]\nname = "ws"\n')
    shutil.copy(REPO / "examples" / "item_scale.py", folder / "item_scale.py")
    return folder


def _env(ws: Path) -> dict[str, str]:
    return {"COMPILE_LENS_CACHE_DIR": str(ws.parent / "cache"), "PYTHONSAFEPATH": "1", "OMP_NUM_THREADS": "1"}


@asynccontextmanager
async def session(ws: Path, *trusted: Path):
    args = ["-m", "compile_lens.cli", "mcp"] + [a for t in trusted for a in ("--trust", str(t))]
    params = StdioServerParameters(command=sys.executable, args=args, env=_env(ws), cwd=str(ws))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        yield client


def _cli(ws: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", *args], cwd=ws, capture_output=True,
                          text=True, timeout=600, env={**os.environ, **_env(ws)})


def test_usage_errors_are_one_line_and_exit_2(ws):
    def run(code: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              env={**os.environ, **_env(ws)})

    no_folder = run(f"from compile_lens.cli.main import main; raise SystemExit(main(['mcp', '--trust', {str(ws / 'nope')!r}]))")
    no_sdk = run("import sys; sys.modules['mcp'] = None\n"  # as where the SDK is not installed
                 "from compile_lens.cli.main import main; raise SystemExit(main(['mcp']))")
    assert (no_folder.returncode, no_folder.stderr.count("\n")) == (2, 1) and "not a folder" in no_folder.stderr
    assert (no_sdk.returncode, no_sdk.stderr.count("\n")) == (2, 1) and "pip install mcp" in no_sdk.stderr


async def test_the_tools_and_explain(ws):
    """The seven tools with their schemas; explain gives torch's own registry text and the codes' docs."""
    registry = json.loads((Path(importlib.util.find_spec("torch").origin).parent
                           / "_dynamo" / "graph_break_registry.json").read_text())
    async with session(ws) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        gb = (await client.call_tool("explain", {"code": "gb0124"})).structured_content
        cl = (await client.call_tool("explain", {"code": "CL211"})).structured_content
        bad = await client.call_tool("explain", {"code": "XY12"})
    assert set(listed) == {"check", "explain", "fixes", "apply_fix", "trial", "import", "show"}
    assert listed["check"].input_schema["required"] == ["path"]
    assert all(t.output_schema and t.output_schema["type"] == "object" for t in listed.values())
    assert gb["code"] == "GB0124"
    assert gb["torch"]["explanation"] == registry["GB0124"][0]["Explanation"]
    assert gb["torch"]["hints"] == registry["GB0124"][0]["Hints"]
    assert gb["href"].endswith("gb0124.html")
    assert cl["title"] == "Recompiles for every new value of an input" and cl["torch"] is None
    assert cl["documentation"].startswith("### CL211")
    assert bad.is_error and "unknown code" in bad.content[0].text


async def test_an_untrusted_folder_runs_nothing(ws):
    async with session(ws) as client:  # no --trust
        checked = (await client.call_tool("check", {"path": str(ws / "item_scale.py")})).structured_content
        applied = await client.call_tool("apply_fix", {"path": str(ws / "item_scale.py"), "line": 14, "fix": 0})
        trial = await client.call_tool("trial", {"command": "python item_scale.py", "root": str(ws)})
        shown = await client.call_tool("show", {"path": str(ws / "item_scale.py"), "line": 14})
    assert checked["trusted"] is False and checked["checks"]["graph_breaks"] is False
    (entry,) = checked["files"]
    assert entry["targets"] == []  # nothing traced
    assert [(d["code"], d["line"], d["predicted"]) for d in entry["diagnostics"]] == [("CL102", 14, True)]
    assert "--trust" in checked["note"]
    for refused in (applied, trial, shown):
        assert refused.is_error and "not in a trusted folder" in refused.content[0].text
    assert "capture_scalar_outputs" not in (ws / "item_scale.py").read_text()


async def test_check_fixes_apply_fix_and_import_on_a_real_break(ws, tmp_path):
    path = str(ws / "item_scale.py")
    progress: list[str] = []

    async def on_progress(done, total, message):
        progress.append(message)

    async with session(ws, ws) as client:
        checked = await client.call_tool("check", {"path": path}, progress_callback=on_progress)
        offered = (await client.call_tool("fixes", {"path": path, "line": 14})).structured_content
        shown = (await client.call_tool("show", {"path": path, "line": 14})).structured_content
    doc = checked.structured_content
    # the graphs Dynamo captured: the document `show --graph` prints, with its JSON
    assert shown["target"] == "ScaledNorm" and len(shown["graph"]) == 2
    assert "# ── graph break at item_scale.py:14: GB0124" in shown["text"]
    assert doc["trusted"] is True
    assert any("tracing" in m for m in progress)
    (bp,) = doc["files"][0]["targets"][0]["graph_breaks"]
    assert (bp["gb_id"], bp["line"]) == ("GB0124", 14)
    # the same document `check --format json` prints (here from the result cache the tool wrote)
    cli = _cli(ws, "check", path, "--no-benchmark", "--no-recompiles", "--format", "json", "-q")
    assert json.loads(cli.stdout) == {k: v for k, v in doc.items() if k != "trusted"}
    assert [d["code"] for d in offered["diagnostics"]] == ["GB0124"]
    capture = next(f for f in offered["fixes"] if "capture_scalar_outputs" in f["title"])
    async with session(ws, ws) as client:
        applied = (await client.call_tool("apply_fix", {"path": path, "line": 14, "fix": capture["id"]})
                   ).structured_content
    assert capture["edits"] and all(e["path"] == path for e in capture["edits"])
    assert applied["gone"] is True and applied["still_there"] == []
    assert "capture_scalar_outputs = True" in (ws / "item_scale.py").read_text()
    assert applied["after"]["files"][0]["targets"][0]["graph_breaks"] == []

    # a torch trace of the fixed file, read by `import` as the CLI reads it
    trace = tmp_path / "trace"
    assert _cli(ws, "check", path, "--no-benchmark", "--no-recompiles", "-q", "--trace-dir", str(trace)).returncode == 0
    async with session(ws) as client:  # import runs no code: no trust needed
        imported = (await client.call_tool("import", {"trace": str(trace), "root": str(ws)})).structured_content
    cli = _cli(ws, "import", str(trace), "--root", str(ws), "--format", "json")
    assert imported == json.loads(cli.stdout)
    assert imported["ranks"]
    # a PyTorch profiler trace of two ranks of a real A100 run: the same tool, told apart by content
    profile = str(DATA / "kineto" / "multi_rank")
    async with session(ws) as client:
        ranks = (await client.call_tool("import", {"trace": profile, "root": str(ws)})).structured_content
    assert ranks == json.loads(_cli(ws, "import", profile, "--root", str(ws), "--format", "json").stdout)
    assert ranks["kind"] == "profile" and [r["rank"] for r in ranks["ranks"]] == [0, 1]


async def test_a_cancelled_trial_stops_the_program(ws):
    """The trial's program blocks forever; the client cancels the call and the program's process ends,
    and no next run starts (the trial goes on to its compiled run when only its eager run is killed)."""
    fifo = ws / "started"
    os.mkfifo(fifo)
    (ws / "forever.py").write_text(
        "import os, threading\n"
        f"with open({str(fifo)!r}, 'w') as f:\n    f.write(str(os.getpid()))\n"
        "threading.Event().wait()\n")

    def started_pid() -> int:
        with open(fifo) as f:  # blocks until the program opens it: no polling
            return int(f.read())

    async with session(ws, ws) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "trial", {"command": f"{sys.executable} forever.py", "root": str(ws),
                                                      "steps": 1})
            program = psutil.Process(await anyio.to_thread.run_sync(started_pid))
            trial = program.parent()
            tg.cancel_scope.cancel()
        program.wait(timeout=60)  # raises TimeoutExpired while it still runs
        trial.wait(timeout=60)
    assert not [p for p in psutil.process_iter(["cwd"]) if p.info["cwd"] == str(ws)]


async def test_a_cancelled_check_stops_its_worker(ws):
    """A file whose import never ends (the worker's timeout raised past the test's wait): cancelled once
    the worker reports it is importing it, the worker ends and the server goes on."""
    (ws / "pyproject.toml").write_text('[project]\nname = "ws"\n\n[tool.compile-lens]\n"worker.timeoutSeconds" = 600\n')
    (ws / "blocked.py").write_text("import threading\n\nfrom torch import nn\n\nthreading.Event().wait()\n\n\n"
                                   "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                                   "        self.fc = nn.Linear(4, 4)\n\n    def forward(self, x):\n"
                                   "        return self.fc(x)\n")
    importing = anyio.Event()

    async def on_progress(done, total, message):
        if "importing" in message:
            importing.set()

    def workers() -> list[psutil.Process]:
        return [proc for proc in psutil.process_iter(["cmdline", "cwd"])
                if proc.info["cwd"] == str(ws) and "compile_lens.worker" in " ".join(proc.info["cmdline"] or [])]

    async with session(ws, ws) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: client.call_tool("check", {"path": str(ws / "blocked.py")},
                                                   progress_callback=on_progress))
            await importing.wait()
            started = workers()
            tg.cancel_scope.cancel()
        assert started
        _, alive = psutil.wait_procs(started, timeout=30)
        assert alive == []
        assert not (await client.call_tool("explain", {"code": "CL101"})).is_error
