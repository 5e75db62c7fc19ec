"""The marks on the way to the first squiggle (`compile_lens.timeline`): sent by the worker only
when a job asks, in the order the work runs; and the collector keeps torch's console quiet."""

from __future__ import annotations

import dataclasses
import logging
import shutil

import torch

from compile_lens import timeline
from compile_lens.discovery import discover
from compile_lens.worker.breaks import collector
from compile_lens.worker.jobs import run_job
from paths import REPO

WORKER_MARKS = ["received", "imported", "built", "explained", "collected", "sending"]


def _job(tmp_path, stamps: bool) -> dict:
    path = tmp_path / "item_scale.py"
    shutil.copy(REPO / "examples" / "item_scale.py", path)
    targets = [dataclasses.asdict(t) for t in discover(path.read_text()).targets if t.inputs]
    return {"id": 1, "path": str(path), "root": str(tmp_path), "targets": targets, "trace": True,
            "recompiles": False, "benchmark": False, "stamps": stamps}


def test_a_job_that_asks_gets_its_marks_in_order(tmp_path):
    sent: list[dict] = []
    run_job(_job(tmp_path, stamps=True), sent.append)
    target = next(m for m in sent if m["event"] == "target")
    assert target["result"]["graph_breaks"]
    marks = target["info"]["stamps"]
    assert [m[0] for m in marks] == WORKER_MARKS
    assert all(m[3] == "worker" for m in marks)
    assert [m[1] for m in marks] == sorted(m[1] for m in marks)  # one clock, in order
    assert marks[3][2] > marks[2][2]  # the trace took CPU


def test_a_job_that_does_not_ask_sends_no_marks(tmp_path):
    sent: list[dict] = []
    run_job(_job(tmp_path, stamps=False), sent.append)
    target = next(m for m in sent if m["event"] == "target")
    assert target["result"]["graph_breaks"] and not target.get("info")


def test_the_server_keeps_a_timeline_only_when_it_is_logged():
    logger = logging.getLogger(timeline.LOGGER)
    before = logger.level
    try:
        logger.setLevel(logging.INFO)
        assert timeline.start("open") is None
        logger.setLevel(logging.DEBUG)
        started = timeline.start("open")
        assert started is not None and [m[0] for m in started.marks] == ["open"]
    finally:
        logger.setLevel(before)


def _breaks():
    def forward(x):
        print("x")
        return x + 1

    return forward


def test_collect_takes_torchs_console_off_and_puts_it_back(monkeypatch):
    monkeypatch.delenv("TORCH_LOGS", raising=False)
    torch._logging.set_logs(graph_breaks=True)
    logger = logging.getLogger("torch._dynamo")
    ours = list(logger.handlers)
    try:
        assert any(torch._logging._internal._is_torch_handler(h) for h in ours)
        with collector.collect() as seen:
            during = list(logger.handlers)
            torch._dynamo.explain(_breaks())(torch.ones(2))
        assert seen.breaks  # the records still reach the collector
        assert not any(torch._logging._internal._is_torch_handler(h) for h in during)
        assert logger.handlers == ours
        monkeypatch.setenv("TORCH_LOGS", "graph_breaks")  # the user asked for torch's logs: left on
        with collector.collect():
            assert [h for h in logger.handlers if h in ours] == ours
    finally:
        torch._dynamo.reset()
        torch._logging.set_logs()
