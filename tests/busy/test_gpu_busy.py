"""Whether background measurements wait for a busy GPU: the pure decision (`rule.gpu_busy`, the busy
rule's GPU half with the wait's threshold) with readings written here, and the waiting (server and CLI share it) on readings from a JSON file that stands in for
NVML (`COMPILE_LENS_GPU_READINGS`), about a real process named `python train.py`. What only a
real GPU can confirm (NVML's own readings, the pids it lists) is the NvmlReader, which this
machine cannot run."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from compile_lens.busy.gpu import READINGS_ENV, FileReader, measured_device, open_reader, own_pids
from compile_lens.busy.rule import GpuProcess, GpuReading, gpu_busy, process_label
from compile_lens.busy.wait import wait_while_busy
from compile_lens.cli.gpu_wait import GpuWait
from compile_lens.settings import Settings
from paths import FIXTURES

TRAIN = FIXTURES / "gpu_busy" / "train.py"
TRAINING = GpuProcess(4242, "python train.py")


def gpu(utilization, *processes, index=0, uuid="GPU-aaaa"):
    return GpuReading(index, uuid, utilization, tuple(processes))


# --- the decision -------------------------------------------------------------------------------

def test_another_process_above_the_threshold_makes_the_gpu_busy():
    busy = gpu_busy([gpu(92, TRAINING)], threshold=50, device=0, own_pids=set())
    assert busy is not None and busy.text == "GPU busy (python train.py, 92%)"


def test_at_or_below_the_threshold_the_gpu_is_free():
    assert gpu_busy([gpu(50, TRAINING)], threshold=50, device=0, own_pids=set()) is None
    assert gpu_busy([gpu(3, TRAINING)], threshold=0, device=0, own_pids=set()) is not None  # 0: any use waits


def test_our_own_worker_on_the_gpu_is_no_reason_to_wait():
    ours = GpuProcess(77, "python -m compile_lens.worker")
    assert gpu_busy([gpu(99, ours)], threshold=50, device=0, own_pids={77}) is None
    busy = gpu_busy([gpu(99, ours, TRAINING)], threshold=50, device=0, own_pids={77})
    assert busy is not None and busy.others == (TRAINING,)


def test_a_busy_gpu_nobody_else_holds_is_free():
    """Utilization with no process listed: NVML cannot see into another container's pids, and a
    reading nobody can be named for is not said as "busy (…)"."""
    assert gpu_busy([gpu(95)], threshold=50, device=0, own_pids=set()) is None


def test_only_the_gpu_measurements_run_on_counts():
    readings = [gpu(95, TRAINING, index=0, uuid="GPU-aaaa"), gpu(0, index=1, uuid="GPU-bbbb")]
    assert gpu_busy(readings, threshold=50, device=1, own_pids=set()) is None
    assert gpu_busy(readings, threshold=50, device="GPU-aaaa", own_pids=set()) is not None
    assert gpu_busy(readings, threshold=50, device=5, own_pids=set()) is None  # not in the readings


def test_several_others_are_counted():
    busy = gpu_busy([gpu(88, TRAINING, GpuProcess(5, "python eval.py"))], threshold=50, device=0, own_pids=set())
    assert busy.text == "GPU busy (python train.py and 1 more, 88%)"


def test_the_measured_device_follows_cuda_visible_devices():
    assert measured_device(None) == 0
    assert measured_device("") == 0
    assert measured_device("3,1") == 3
    assert measured_device("GPU-8f3c,GPU-1111") == "GPU-8f3c"


@pytest.mark.parametrize("cmdline, label", [
    (["/usr/bin/python3.11", "train.py", "--lr", "3e-4"], "python3.11 train.py"),
    (["python", "-u", "/home/me/proj/train.py"], "python train.py"),
    (["python", "-m", "torch.distributed.run", "train.py"], "python -m torch.distributed.run"),
    (["/opt/bin/torchrun", "--nproc-per-node=8", "train.py"], "torchrun train.py"),
    ([], "Xorg"),
])
def test_a_process_is_named_as_the_user_started_it(cmdline, label):
    assert process_label(cmdline, "Xorg") == label


def test_the_threshold_setting_is_a_percent():
    assert Settings.from_client({"gpuBusyThreshold": 0})[0].gpu_busy_threshold == 0  # wait on any use
    assert Settings.from_client({"gpuBusyThreshold": 100})[0].gpu_busy_threshold == 100  # never wait
    for wrong in (-1, 120, "high"):
        settings, problems = Settings.from_client({"gpuBusyThreshold": wrong})
        assert settings.gpu_busy_threshold == 50 and problems and problems[0].startswith("setting gpuBusyThreshold=")


# --- readings from a file, and waiting on them ----------------------------------------------------

@pytest.fixture
def training():
    """A real process the readings can name: `python train.py`."""
    proc = subprocess.Popen([sys.executable, TRAIN.name], cwd=TRAIN.parent)
    # Right after the fork the kernel may still show the parent's (or an empty) command line.
    deadline = time.monotonic() + 10
    while psutil.Process(proc.pid).cmdline()[1:] != [TRAIN.name] and time.monotonic() < deadline:
        time.sleep(0.02)
    yield proc
    proc.kill()
    proc.wait()


def write(path: Path, utilization: float, pids: list[int]) -> None:
    path.write_text(json.dumps({"gpus": [{"index": 0, "uuid": "GPU-aaaa", "utilization": utilization, "pids": pids}]}))


def test_the_readings_file_names_processes_as_psutil_sees_them(tmp_path, training, monkeypatch):
    readings = tmp_path / "gpu.json"
    write(readings, 92, [training.pid])
    monkeypatch.setenv(READINGS_ENV, str(readings))
    reader = open_reader()
    assert isinstance(reader, FileReader)
    assert reader.read() == [GpuReading(0, "GPU-aaaa", 92.0, (GpuProcess(training.pid, "python train.py"),))]
    assert training.pid in own_pids()  # this test started it: our own tree


def test_without_nvml_nothing_is_read(monkeypatch):
    """No nvidia-ml-py (None in sys.modules makes its import fail, as on this machine): no reader,
    so nothing ever waits and nothing is said."""
    monkeypatch.delenv(READINGS_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert open_reader() is None


async def test_waiting_ends_when_the_gpu_is_free(tmp_path, training):
    readings = tmp_path / "gpu.json"
    write(readings, 92, [4_000_000])  # a pid nobody has: "pid 4000000", not ours
    seen = []

    async def free_later():
        await asyncio.sleep(0.3)
        write(readings, 92, [])

    started = time.monotonic()
    asyncio.get_running_loop().create_task(free_later())
    still = await wait_while_busy(FileReader(str(readings)), 50, on_busy=seen.append, poll_s=0.1, timeout=30)
    assert still is None and seen and seen[0].text == "GPU busy (pid 4000000, 92%)"
    assert time.monotonic() - started < 10


async def test_waiting_ends_at_the_timeout_or_when_released(tmp_path):
    readings = tmp_path / "gpu.json"
    write(readings, 92, [4_000_000])
    reader = FileReader(str(readings))
    heard = []
    still = await wait_while_busy(reader, 50, on_busy=heard.append, poll_s=0.1, timeout=0.3)
    # still busy at the timeout: the last reading comes back, the one the caller names
    assert still is not None and still.text == "GPU busy (pid 4000000, 92%)" and still == heard[-1]
    release = asyncio.Event()
    asyncio.get_running_loop().call_later(0.2, release.set)
    heard.clear()
    still = await wait_while_busy(reader, 50, on_busy=heard.append, poll_s=5, release=release)
    # no timeout, and polls 5 s apart: only the release can have ended it, with the busy reading
    assert release.is_set() and still is not None and still == heard[-1] and still.text.startswith("GPU busy (pid 4000000")


async def test_a_reading_that_fails_never_holds_measurements_back(tmp_path):
    readings = tmp_path / "gpu.json"
    readings.write_text("{not json")
    assert await wait_while_busy(FileReader(str(readings)), 50, on_busy=lambda b: None, timeout=30) is None


# --- the CLI's --wait-gpu ---------------------------------------------------------------------------

async def test_the_cli_waits_only_when_asked_and_then_says_it_measures_anyway(tmp_path, monkeypatch, capsys):
    readings = tmp_path / "gpu.json"
    write(readings, 92, [4_000_000])
    monkeypatch.setenv(READINGS_ENV, str(readings))
    await GpuWait(None, Settings(), quiet=False)("net.py")  # no --wait-gpu: no reading, no wait
    assert capsys.readouterr().err == ""
    wait = GpuWait(0.3, Settings(), quiet=False)
    started = time.monotonic()
    await wait("net.py")
    await wait("other.py")  # the budget is the whole run's: nothing left to wait
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("compile-lens: waiting: GPU busy (pid 4000000, 92%) before measuring net.py")
    assert err[1] == ("compile-lens: the GPU is still busy (pid 4000000, 92%) after --wait-gpu: measuring net.py "
                      "anyway; its figures may read slower than on an idle GPU")
    assert "measuring other.py anyway" in err[-1] and time.monotonic() - started < 5
    await GpuWait(30, Settings(device="cpu"), quiet=False)("net.py")  # measured on the CPU: never waits
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_check_with_wait_gpu_waits_then_measures_anyway_and_says_so(tmp_path, training):
    """The real CLI on a tiny model, the GPU busy with `python train.py` the whole time: with
    `--wait-gpu 2` it waits before the file's measurement, then measures and says so on stderr."""
    project = tmp_path / "proj"
    shutil.copytree(FIXTURES / "measure_forward", project)  # forward only: the wait is tested, not the figures
    readings = tmp_path / "gpu.json"
    write(readings, 92, [training.pid])
    env = {**os.environ, READINGS_ENV: str(readings), "COMPILE_LENS_CACHE_DIR": str(tmp_path / "cache")}
    measured = subprocess.run(
        [sys.executable, "-m", "compile_lens.cli", "check", "tiny.py", "--no-cache", "--no-recompiles",
         "--wait-gpu", "2", "--max-seconds", "5", "--format", "json"],
        cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert measured.returncode in (0, 1), measured.stderr
    err = measured.stderr
    assert "compile-lens: waiting: GPU busy (python train.py, 92%) before measuring tiny.py (up to 2 s)" in err
    assert ("compile-lens: the GPU is still busy (python train.py, 92%) after --wait-gpu: measuring tiny.py anyway"
            in err)
    assert err.index("still busy") < err.index("tracing tiny.py")
    (target,) = json.loads(measured.stdout)["files"][0]["targets"]
    assert target["phases"]["measure"]["status"] in ("done", "failed"), target["phases"]  # the wait did not stop it
