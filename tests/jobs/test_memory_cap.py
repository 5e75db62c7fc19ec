"""The worker's memory cap: a default taken from the machine, the tree counted by what it really
holds (PSS: pages its processes share count once), and a stop message that says what it counted.
The kill of a runaway at a lowered cap through the server: tests/test_faults.py."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import psutil
import pytest

from compile_lens.jobs.lanes import (
    MB,
    Limits,
    Worker,
    WorkerGone,
    default_memory_limit_mb,
    tree_pss,
    tree_rss,
)
from compile_lens.settings import Settings

# a parent and two children that each import torch: the libraries they map are shared pages
_TORCH_TREE = """
import subprocess, sys, time
import torch
kids = [subprocess.Popen([sys.executable, "-c", "import torch, time; print('ready', flush=True); time.sleep(60)"],
                         stdout=subprocess.PIPE) for _ in range(2)]
for kid in kids:
    kid.stdout.readline()
print("ready", flush=True)
time.sleep(60)
"""


def test_the_default_cap_is_half_of_the_machine():
    assert default_memory_limit_mb() == psutil.virtual_memory().total // 2 // MB  # no lower cgroup cap here
    assert Limits().memory_limit_mb == default_memory_limit_mb()
    assert Limits(memory_limit_mb=1500).memory_limit_mb == 1500
    settings, problems = Settings.from_client({"worker.memoryLimitMB": None})
    assert settings.memory_limit_mb is None and not problems
    settings, _ = Settings.from_client({"worker.memoryLimitMB": 2048})
    assert settings.memory_limit_mb == 2048


def test_a_torch_process_tree_holds_less_than_its_summed_rss():
    tree = subprocess.Popen([sys.executable, "-c", _TORCH_TREE], stdout=subprocess.PIPE)
    try:
        assert tree.stdout.readline().strip() == b"ready"
        rss = tree_rss(tree.pid)
        pss, procs = tree_pss(tree.pid)
        assert procs == 3
        # each process maps torch's libraries; summed RSS counts those pages three times
        assert pss < rss * 0.8, (pss // MB, rss // MB)
    finally:
        for proc in psutil.Process(tree.pid).children(recursive=True):
            proc.kill()
        tree.kill()
        tree.wait()


@pytest.mark.asyncio
async def test_the_stop_message_says_what_was_counted():
    worker = Worker(sys.executable, ".", {})
    worker.proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import sys, time; b = bytearray(400 * 1024 * 1024); print('ready', flush=True); time.sleep(60)",
        stdout=asyncio.subprocess.PIPE)
    try:
        assert (await worker.proc.stdout.readline()).strip() == b"ready"
        await worker._check_memory(1024)  # under the cap: nothing happens
        assert worker.alive()
        with pytest.raises(WorkerGone) as stopped:
            await worker._check_memory(200)
        message = stopped.value.problem.message
        assert message.startswith("the analysis held more than 200 MB (")
        assert "MB: the proportional set size of the worker, each shared page counted once) and was stopped" in message
        await asyncio.wait_for(worker.proc.wait(), 5)
    finally:
        worker.kill()
