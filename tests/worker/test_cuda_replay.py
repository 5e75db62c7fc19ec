"""Replay a real GPU's captures on the CPU: the Kineto traces of the measured calls (forward and train
step, fp32 and bf16 autocast, two models) and each model's TORCH_TRACE log with provenance, which
`scripts/gpu-check` brings back (`benchmarks/gpu/capture.py`; commit its cuda/ folder as
tests/data/cuda/), read by the reader `compile-lens import` and the live measurement share
(`compile_lens.kineto`): the arithmetic the live GPU figures use, on a real GPU's profile.

Skips, saying so, where no GPU check has brought them back yet. COMPILE_LENS_REPLAY_DIR points the
replay at another capture (a CPU rehearsal's: `python -m benchmarks.gpu.capture DIR --device cpu --dry`).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compile_lens.worker.measure.lines import windows
from paths import REPO

DATA = Path(os.environ.get("COMPILE_LENS_REPLAY_DIR") or Path(__file__).resolve().parents[1] / "data" / "cuda")


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
        assert profile.calls, f"{path.name}: no compile_lens.call ranges"
        share = calls_idle_share(profile.calls)
        if profile.clock == "gpu":
            assert share is not None and 0 <= share < 1, (path.name, share)
        else:  # a rehearsal's CPU capture: no device activity, the GPU idled each whole call
            assert share == 1.0 and profile.kernel_us, path.name


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


def test_a_gpu_capture_puts_its_triton_kernels_on_the_models_lines(tmp_path):
    """The GPU check's profile of a compiled forward with the same run's provenance beside it: `import`
    puts each generated kernel's GPU time on the lines of benchmarks/models/speedup_models.py."""
    traces = sorted(DATA.glob("mlp-forward-fp32.pt.trace.json.gz"))
    log = DATA / "mlp.torch_trace.log.gz"
    if not traces or not log.exists():
        pytest.skip(f"no GPU capture with its provenance in {DATA}: run scripts/gpu-check on a GPU box")
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(traces[0], run / traces[0].name)
    with gzip.open(log, "rb") as src, open(run / "dedicated_log_torch_trace_mlp.log", "wb") as dst:
        shutil.copyfileobj(src, dst)
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "import", str(run), "--root",
                           str(REPO / "benchmarks" / "models"), "--format", "json"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    (rank,) = json.loads(done.stdout)["ranks"]
    assert rank["lines"], "no kernel put on a line of the model"
    assert all(e["path"].endswith("speedup_models.py") and e["from"] == "provenance" for e in rank["lines"])
