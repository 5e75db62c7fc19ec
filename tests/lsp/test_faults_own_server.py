"""The fault table's rows that need a server of their own: a CUDA out-of-memory, a file closed while
the worker starts, an untrusted workspace, a client that closes its stream or dies."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys

import psutil
import pytest
from faults_support import (
    FAULTS,
    SETTINGS,
    coded,
    command,
    gb,
    good_file,
    line_of,
    reap,
    traced,
    wait_gone,
    worker_processes,
)
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig

from lsp_support import (
    change_file,
    open_file,
    start_server,
    stop_server,
    wait_analyzed,
    wait_for,
    wait_status,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _has_cuda() -> bool:
    try:
        out = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                             capture_output=True, text=True, timeout=120)
        return out.stdout.strip() == "True"
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(not shutil.which("nvidia-smi") or not _has_cuda(), reason="needs a CUDA device")
async def test_cuda_oom_during_a_benchmark_releases_the_gpu_memory(tmp_path):
    """On a GPU (scripts/gpu-check). Its CPU twin, a measurement that holds more than the workers' memory
    cap, named on its target while the targets after it are measured: `Greedy` in tests/cli/test_phases.py."""
    root = tmp_path / "ws"
    root.mkdir()
    shutil.copy(FAULTS / "cuda_oom.py", root / "cuda_oom.py")
    path = root / "cuda_oom.py"
    client = await start_server(root, settings={**SETTINGS, "device": "cuda", "benchmark.maxSeconds": 10})
    try:
        uri, _ = await traced(client, path, timeout=300)
        greedy, nxt = line_of(path, "class Greedy"), line_of(path, "class Next")
        mark = len(client.analyzed)
        assert (await command(client, "compileLens.measure", uri, "Greedy"))["started"]
        await wait_analyzed(client, uri, "measured", version=1, since=mark, timeout=300)
        assert any(d.range.start.line == greedy and "out of memory" in d.message for d in client.diagnostics[uri])
        # the next measurement builds in the same worker: `Next` refuses to build if memory is held
        mark = len(client.analyzed)
        assert (await command(client, "compileLens.measure", uri, "Next"))["started"]
        await wait_analyzed(client, uri, "measured", version=1, since=mark, timeout=400)
        failed = [d for d in client.diagnostics.get(uri, [])
                  if d.range.start.line == nxt and "measuring failed" in d.message]
        assert not failed, failed[0].message
        lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
        title = next(lens.command.title for lens in lenses or [] if lens.range.start.line == nxt and lens.command)
        # measured: the out-of-memory benchmark gave its memory back
        assert "Measure" not in title and "measuring" not in title, title
    finally:
        await stop_server(client)


# --- rows that need a server of their own --------------------------------------------------------

async def test_file_closed_while_the_worker_starts_leaves_the_lane_working(tmp_path):
    """Open and close a file in the first seconds of a session (torch still importing): the job
    is cancelled while it waits for the worker, and the worker's start must not be cancelled with it."""
    root = tmp_path / "ws"
    root.mkdir()
    client = await start_server(root, settings=SETTINGS)
    try:
        early = good_file(root, "early")
        uri = open_file(client, early)
        # its job now waits for the worker, which is importing torch
        await wait_status(client, lambda s: s.state == "tracing" and s.detail == early.name)
        assert await command(client, "compileLens.workerPids") == [], "the workers started too fast to test"
        client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
        later = good_file(root, "later")
        _, found = await traced(client, later, timeout=60)
        line = line_of(later, "y.sum().item()")
        assert [(d.code, d.range.start.line) for d in gb(found)] == [("GB0124", line)]
    finally:
        await stop_server(client)


async def test_untrusted_workspace_runs_no_code_and_still_lints(tmp_path):
    root = tmp_path / "ws"
    shutil.copytree(FAULTS, root)
    path = root / "marker.py"
    client = await start_server(root, trusted=False, settings=SETTINGS)
    try:
        uri = open_file(client, path)
        found = await wait_for(client, uri, lambda ds: bool(coded(ds, "CL101")), timeout=30)
        assert coded(found, "CL101")[0].range.start.line == line_of(path, 'print("value", y)')
        change_file(client, path, path.read_text(), version=2, save=True)
        assert (await command(client, "compileLens.analyzeFile", uri))["started"] is False
        assert (await command(client, "compileLens.measure", uri, "Printy"))["started"] is False
        await wait_status(client, lambda s: s.state == "restricted", timeout=10)
        # proves nothing runs: time enough for a worker to start and import the file, were there one
        await asyncio.sleep(2.0)
        assert not client.analyzed, "nothing is analysed in an untrusted workspace"
        assert await command(client, "compileLens.workerPids") == []
        assert psutil.Process(client._server.pid).children(recursive=True) == []
        assert not (root / "MARKER").exists(), "user code ran in an untrusted workspace"
        assert not gb(client.diagnostics[uri])
    finally:
        await stop_server(client)


async def test_client_closing_the_stream_leaves_no_worker_behind(tmp_path):
    client = await start_server(tmp_path, settings=SETTINGS)
    server = client._server
    pids = await worker_processes(server.pid)
    server.stdin.close()  # the client disconnects without shutdown/exit
    try:
        await asyncio.wait_for(server.wait(), 15)
        assert await wait_gone(pids, 5) == []
    finally:
        reap(pids + [server.pid])
        await client.stop()


async def test_dead_client_process_takes_the_server_and_workers_with_it(tmp_path):
    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    config = ClientServerConfig(server_command=[sys.executable, "-m", "compile_lens"],
                                server_env={**os.environ, "PYTHONSAFEPATH": "1",
                                            "COMPILE_LENS_CACHE_DIR": str(tmp_path / "cache")})
    client = await config.start()
    pids: list[int] = []
    try:
        await client.initialize_session(lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(), process_id=stand_in.pid, root_uri=tmp_path.as_uri(),
            initialization_options={"settings": SETTINGS, "trusted": True}))
        server = client._server
        pids = await worker_processes(server.pid)
        stand_in.kill()
        stand_in.wait()
        await asyncio.wait_for(server.wait(), 15)  # the server watches the client's pid
        assert await wait_gone(pids, 5) == []
    finally:
        stand_in.kill()
        reap(pids + [client._server.pid])
        await client.stop()
