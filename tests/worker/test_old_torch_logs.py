"""torch 2.4's own log records (recorded by `benchmarks/recordings/old_torch_logs.py` from a real torch 2.4.0
run, `tests/data/torch_logs/`), replayed through the collector on today's torch: with no torch
frames to read data from, every record takes the text readers, as on a torch whose data the
collector does not find. The breaks must be where today's torch finds them, the loop said as a loop.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from compile_lens.discovery import discover
from compile_lens.discovery.inputs import resolve_inputs
from compile_lens.worker.breaks.collector import CompileCollector
from compile_lens.worker.breaks.graph_breaks import distinct_breaks, trace_graph_breaks
from compile_lens.worker.loader import build_target, import_file
from paths import REPO

RECORDED = json.loads((REPO / "tests" / "data" / "torch_logs" / "torch-2.4.0.json").read_text())


def _replay(records: list[dict]) -> CompileCollector:
    collector = CompileCollector()
    for r in records:
        exc = Exception(r["exc"]) if r["exc"] is not None else None
        record = logging.LogRecord(r["name"], r["level"], "<replayed>", 0, r["message"].replace("{root}", str(REPO)),
                                   None, (Exception, exc, None) if exc else None, func=r["func"])
        collector.emit(record)
    return collector


def _today(key: str):
    file, name = key.split(":")
    path = REPO / file
    spec = next(s for s in resolve_inputs(str(path), str(path.parent), list(discover(path.read_text()).targets))
                if s.name == name)
    built = build_target(import_file(str(path), str(path.parent)), spec, str(path))
    return trace_graph_breaks(built, str(path.parent))[1]


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_old_torchs_breaks_are_where_todays_torch_finds_them(key):
    replayed = distinct_breaks(_replay(RECORDED[key]["trace"]).breaks)
    if "branching" in key:  # torch 2.4 logs no break for a data-dependent branch: explain's reason says it
        assert replayed == []
        return
    today = _today(key)
    assert [(b.path, b.line, b.loop is not None) for b in replayed] == \
        [(b.path, b.line, b.loop is not None) for b in today]
    for old, new in zip(replayed, today):
        assert old.reason and old.stack[-1].line == new.stack[-1].line
        if new.loop is not None:  # a loop: the break at its line, the frame torch skips for it kept
            assert (old.loop.line, old.loop.function) == (new.loop.line, new.loop.function)


def test_old_torchs_recompile_records_read_as_recompiles():
    seen = 0
    for key, runs in RECORDED.items():
        collector = _replay(runs["sweep"])
        file = REPO / key.split(":")[0]
        told = sum(r["message"].startswith("Recompiling function") for r in runs["sweep"])
        assert len(collector.recompiles) == told, key
        for entry in collector.recompiles:
            assert "forward" in entry.frame and Path(entry.frame_file) == file, key  # or its resume function
            assert entry.failures and all(f.text for f in entry.failures), key
            assert "#" not in entry.failures[0].text  # torch's source comment is not part of the guard
        seen += told
    assert seen >= 10
