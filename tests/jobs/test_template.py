"""jobs/template and worker/template: a server's workers are forked from one process that imported
torch once. Each fork is a worker as a directly started one is (its own folder, environment, session,
arguments), it starts in milliseconds, and its exit is reported with its real status; a template that
cannot be had leaves the workers to start on their own."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import time

import psutil
import pytest

from compile_lens.discovery import discover
from compile_lens.discovery.inputs import resolve_inputs
from compile_lens.jobs.analysis import analyze_file
from compile_lens.jobs.lanes import WorkerSlot, default_python, worker_env
from compile_lens.jobs.template import EXIT_UNKNOWN, Templates, TemplateUnavailable, WorkerTemplate
from compile_lens.settings import Settings
from compile_lens.worker.template import NAME

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the template forks: Linux only")


PROBE = """import json, os, sys

import torch
from torch import nn

with open("seen.json", "w") as f:
    json.dump({"mark": os.environ.get("LENS_TEST_MARK"), "cwd": os.getcwd(),
               "server": os.environ.get("COMPILE_LENS_SERVER_PID"),
               "argv0": os.sep.join(sys.argv[0].split(os.sep)[-3:])}, f)


# compile-lens: inputs=(torch.randn(2, 4),)
class Net(nn.Module):
    def forward(self, x):
        return x + 1
"""


async def _hello(slot: WorkerSlot) -> tuple[dict, float]:
    started = time.perf_counter()
    info = await slot.info(60)
    return info, time.perf_counter() - started


async def test_workers_are_forked_from_one_import_each_as_its_own_process(tmp_path):
    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir()
    second_dir.mkdir()
    templates = Templates()
    env = {**worker_env(None), "LENS_TEST_MARK": "fork"}
    first = WorkerSlot("a", default_python(), str(first_dir), env, spare=False, templates=templates)
    second = WorkerSlot("b", default_python(), str(second_dir), env, spare=False, templates=templates)
    try:
        one, _ = await _hello(first)
        two, second_start_s = await _hello(second)
        [template_pid] = templates.pids()
        template = psutil.Process(template_pid)
        assert template.name() == NAME and template.ppid() == os.getpid()
        for info, folder in ((one, first_dir), (two, second_dir)):
            worker = psutil.Process(info["pid"])
            assert worker.ppid() == template_pid and worker.name() != NAME
            assert worker.cwd() == str(folder)
            assert os.getsid(worker.pid) == worker.pid  # its own session: killed as one group
            assert info["import_s"] > 0 and info["forked_s"] < 1.0
        assert one["pid"] != two["pid"]
        # the second worker paid no import: tens of milliseconds, against seconds for torch
        assert second_start_s < one["import_s"] / 2, (second_start_s, one["import_s"])

        # what user code sees: the worker's own environment, folder and arguments, not the template's
        probe = second_dir / "probe.py"
        probe.write_text(PROBE)
        source = probe.read_text()
        discovery = discover(source)
        discovery.targets = resolve_inputs(str(probe), str(second_dir), discovery.targets, source=source)
        run = await analyze_file(second, str(probe), str(second_dir), discovery, Settings(timeout_s=120),
                                 trace=True, recompiles=False)
        assert run.results["Net"].status == "ok"
        seen = json.loads((second_dir / "seen.json").read_text())
        assert seen == {"mark": "fork", "cwd": str(second_dir), "server": None,
                        "argv0": os.path.join("compile_lens", "worker", "__main__.py")}

        worker = await second.worker(60)
        proc = worker.proc
        os.kill(proc.pid, signal.SIGSEGV)
        assert await asyncio.wait_for(proc.wait(), 10) == -signal.SIGSEGV  # the real status, via the template
        assert not worker.alive()
        again, _ = await _hello(second)  # the replacement: forked again
        assert again["pid"] != two["pid"] and psutil.Process(again["pid"]).ppid() == template_pid
    finally:
        await first.stop()
        await second.stop()
        await templates.stop()
    assert not psutil.Process().children(recursive=True)


async def test_a_cancelled_start_and_an_ended_template_leave_nothing_behind(tmp_path):
    template = WorkerTemplate(default_python(), worker_env(None))
    try:
        first = await template.spawn(str(tmp_path), template.env, 60)
        # a start cancelled while the fork is asked for: the forked worker is killed, not kept
        start = asyncio.create_task(template.spawn(str(tmp_path), template.env, 60))
        await asyncio.sleep(0)
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start
        deadline = time.monotonic() + 10
        while len(psutil.Process(template.pid).children()) > 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert [c.pid for c in psutil.Process(template.pid).children()] == [first.pid]

        # the template killed: its worker follows it, and its wait ends (its status went with it)
        os.kill(template.pid, signal.SIGKILL)
        assert await asyncio.wait_for(first.wait(), 10) == EXIT_UNKNOWN
        with pytest.raises(TemplateUnavailable):
            await template.spawn(str(tmp_path), template.env, 60)
    finally:
        await template.stop()
    assert not psutil.Process().children(recursive=True)


async def test_without_a_template_workers_start_on_their_own(tmp_path, monkeypatch):
    no_torch = shutil.which("python3", path="/usr/bin")
    if no_torch:  # an interpreter without torch: the template says so, and is not used again
        template = WorkerTemplate(no_torch, worker_env(None))
        with pytest.raises(TemplateUnavailable):
            await template.spawn(str(tmp_path), template.env, 60)
        with pytest.raises(TemplateUnavailable):
            await template.spawn(str(tmp_path), template.env, 60)
        await template.stop()
    monkeypatch.setenv("COMPILE_LENS_WORKER_TEMPLATE", "0")
    templates = Templates()
    slot = WorkerSlot("a", default_python(), str(tmp_path), worker_env(None), spare=False, templates=templates)
    try:
        info = await slot.info(60)
        worker = psutil.Process(info["pid"])
        assert worker.ppid() == os.getpid() and "compile_lens.worker" in worker.cmdline()
        assert "forked_s" not in info and templates.pids() == []
    finally:
        await slot.stop()
