"""Replay a real GPU's captures on the CPU: the compiled forward's and train step's profiler events
and provenance maps that `scripts/gpu-check` brought back (`benchmarks/gpu/capture.py`, committed under
tests/data/cuda/), run through the line-cost attribution as if the profile had been taken here.

Skips, saying so, where no GPU check has brought them back yet. COMPILE_LENS_REPLAY_DIR points the
replay at another capture (a CPU rehearsal's: `python -m benchmarks.gpu.capture DIR --device cpu`).
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from compile_lens.worker.measure import line_costs, provenance
from compile_lens.worker.measure import line_windows as windows
from compile_lens.worker.measure.line_tags import Places

DATA = Path(os.environ.get("COMPILE_LENS_REPLAY_DIR") or Path(__file__).resolve().parents[1] / "data" / "cuda")
FORMAT = 1


def _capture(workload: str) -> dict[str, Any]:
    path = DATA / f"{workload}.json.gz"
    if not path.exists():
        pytest.skip(f"no GPU capture at {path}: run scripts/gpu-check on a GPU box and commit its cuda/ folder as tests/data/cuda/")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        record = json.load(f)
    assert record["format"] == FORMAT, f"capture format {record['format']}, this replay reads {FORMAT}"
    return record


class _Event(SimpleNamespace):
    """A FunctionEvent as the capture kept it: its plain attributes, its range, its tree."""


def events(record: dict[str, Any]) -> list[_Event]:
    """The thin adapter: the capture's rows back into objects with FunctionEvent's attributes."""
    from torch.autograd import DeviceType

    rows = record["events"]
    out = []
    for row in rows:
        attrs = {k: v for k, v in row.items() if k not in ("cpu_parent", "cpu_children", "time_range")}
        for key in ("device_type",):
            if isinstance(attrs.get(key), str):
                attrs[key] = getattr(DeviceType, attrs[key])
        start, end = row["time_range"]
        out.append(_Event(**attrs, time_range=SimpleNamespace(start=start, end=end, elapsed_us=lambda s=start, e=end: e - s)))
    for evt, row in zip(out, rows):
        evt.cpu_parent = out[row["cpu_parent"]] if row["cpu_parent"] is not None else None
        evt.cpu_children = [out[i] for i in row["cpu_children"]]
    return out


def graphs(record: dict[str, Any]) -> list[provenance.Graph]:
    out = []
    for g in record["graphs"]:
        kernels = [provenance.Kernel(k["name"], k["kind"], k["order"], [[tuple(f) for f in s] for s in k["stacks"]])
                   for k in g["kernels"]]
        out.append(provenance.Graph(**{**g, "kernels": kernels}))
    return out


def replay(workload: str) -> tuple[dict[str, Any], Any]:
    record = _capture(workload)
    prof = SimpleNamespace(events=lambda: events(record))
    found = line_costs._attribute(windows.calls(prof, record["device"]), graphs(record),
                                  Places(record["root"]), record["device"])
    return record, found


@pytest.mark.parametrize("workload", ["forward", "train"])
def test_lines_and_unattributed_make_the_profile_total(workload):
    record, found = replay(workload)
    assert found.per_line, f"no line took any kernel time in the {workload} capture"
    lines = sum(found.per_line.values())
    loose = sum(found.loose.values())
    assert lines + loose == pytest.approx(found.total, rel=0.02), (lines, found.loose, found.total)


def test_every_line_is_in_the_model_file():
    record, found = replay("forward")
    files = {Path(path).name for path, _ in found.per_line}
    assert "speedup_models.py" in files, files


def test_train_step_lines_show_backward_kernels():
    record, found = replay("train")
    backward = [s for shares in found.kernels.values() for s in shares.values() if s.backward]
    assert backward, "the train step's capture gave no line a backward kernel"


def test_cuda_capture_reads_the_device_clock():
    record, found = replay("forward")
    if not record["device"].startswith("cuda"):
        pytest.skip(f"a {record['device']} capture (a rehearsal): the device clock is a GPU's")
    assert found.busy_us is not None and found.busy_us > 0
    assert found.idle_share is not None and 0 <= found.idle_share < 1


def test_the_gpu_idle_share_of_a_real_gpu_capture_is_read_by_the_import_reader():
    """The GPU check's Kineto traces of the measured calls (`compile_lens.call:<i>` ranges), read by the
    reader `compile-lens import` uses: the figure the line costs and the CUDA-graphs lever show."""
    from compile_lens.kineto.fold import fold
    from compile_lens.kineto.profile import calls_idle_share, summarise

    traces = sorted(DATA.glob("*-forward-*.pt.trace.json.gz"))
    if not traces:
        pytest.skip(f"no GPU Kineto capture in {DATA}: run scripts/gpu-check on a GPU box and commit its cuda/ folder")
    for path in traces:
        profile = summarise(fold(str(path)))
        if profile.clock != "gpu":
            continue  # a rehearsal's CPU capture
        assert profile.calls, f"{path.name}: no compile_lens.call ranges"
        share = calls_idle_share(profile.calls)
        assert share is not None and 0 <= share < 1, (path.name, share)


def test_the_live_idle_share_is_read_from_the_exported_trace():
    """A real CPU profile of the measured calls, exported and read back by the import's reader: no device
    activity in any call (the GPU idled the whole of each, 1.0); no call ranges, no share."""
    import torch

    model, x = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()), torch.randn(8, 16)
    prof = windows.profile(lambda: model(x), 6, "cpu")
    assert windows.gpu_idle_share(prof) == 1.0
    assert windows.gpu_idle_share(prof, timed_us=5.0) == 1.0  # the timed call, not the range, is the call
    with torch.profiler.profile() as bare:  # no `compile_lens.call:` ranges: no call to share
        model(x)
    assert windows.gpu_idle_share(bare) is None
