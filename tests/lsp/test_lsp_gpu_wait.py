"""Background measurements on a shared GPU box wait while another process uses the GPU, through
the real server: the status bar says who ("waiting: GPU busy (python train.py, 92%)"), "Measure
anyway" lets the measurement go, and our own worker on the GPU is no reason to wait.

The GPU readings come from a JSON file (`COMPILE_LENS_GPU_READINGS`, read again on every poll)
that stands in for NVML, about a real sleeping process started here as `python train.py`; the
rest (trace, sweep, the deep lane, the status notifications, the command) is the real server.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from lsp_support import open_file, start_server, stop_server, wait_status
from paths import FIXTURES

TRAIN = FIXTURES / "gpu_busy" / "train.py"
SETTINGS = {"benchmark.onSave": True, "benchmark.maxSeconds": 5, "worker.timeoutSeconds": 300,
            "gpuBusyThreshold": 50}
pytestmark = pytest.mark.slow  # a trace and a recompile sweep of a tiny model before the wait


def write(path: Path, utilization: float, pids: list[int]) -> None:
    path.write_text(json.dumps({"gpus": [{"index": 0, "uuid": "GPU-aaaa", "utilization": utilization, "pids": pids}]}))


async def command(client, name: str, *args):
    return await client.workspace_execute_command_async(lsp.ExecuteCommandParams(name, list(args)))


def waiting(params) -> bool:
    return params.state == "waiting"


@pytest.fixture
def training():
    proc = subprocess.Popen([sys.executable, TRAIN.name], cwd=TRAIN.parent)
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "ws"
    shutil.copytree(FIXTURES / "measure", root)
    return root


async def test_a_busy_gpu_holds_the_measurement_until_measure_anyway(workspace, tmp_path, training):
    readings = tmp_path / "gpu.json"
    write(readings, 92, [training.pid])
    client = await start_server(workspace, settings=SETTINGS, env={"COMPILE_LENS_GPU_READINGS": str(readings)})
    try:
        assert await command(client, "compileLens.measureAnyway") == {
            "started": False, "reason": "no measurement is waiting for the GPU"}
        uri = open_file(client, workspace / "tiny.py")
        status = await wait_status(client, waiting, timeout=300)
        assert status.detail == "GPU busy (python train.py, 92%)"
        # the lens says so too, and is the way out
        found = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
        [lens] = [lens for lens in found if not lens.command.title.startswith("⊞")]  # not the captured graphs' lens
        assert lens.command.title == "⏸ waiting: GPU busy (python train.py, 92%) · measure anyway"
        assert lens.command.command == "compileLens.measureAnyway"
        # bounded, on purpose: proves the measurement does not start while the GPU stays busy
        await asyncio.sleep(3 * 2.0)
        assert (await command(client, "compileLens.stats"))["benchmarks"] == 0
        assert client.statuses[-1].state == "waiting"
        assert await command(client, lens.command.command, *lens.command.arguments) == {"started": True, "released": 1}
        await wait_status(client, lambda s: s.state == "benchmarking", timeout=60)
        assert (await command(client, "compileLens.stats"))["benchmarks"] == 1
    finally:
        await stop_server(client)


async def test_our_own_worker_on_the_gpu_lets_the_measurement_run(workspace, tmp_path, training):
    """Busy readings first; then the GPU is used (99%) only by the server's own workers: the
    waiting measurement starts by itself."""
    readings = tmp_path / "gpu.json"
    write(readings, 92, [training.pid])
    client = await start_server(workspace, settings=SETTINGS, env={"COMPILE_LENS_GPU_READINGS": str(readings)})
    try:
        open_file(client, workspace / "tiny.py")
        await wait_status(client, waiting, timeout=300)
        write(readings, 99, await command(client, "compileLens.workerPids"))
        await wait_status(client, lambda s: s.state == "benchmarking", timeout=60)
        assert (await command(client, "compileLens.stats"))["benchmarks"] == 1
    finally:
        await stop_server(client)
