"""scripts/gpu-check's CPU rehearsal (`--device cpu --dry`), run as a GPU box would run it, on a subset
of its units: `capture` (the files committed as tests/data/cuda/ for the replay: their names, the
manifest, the Kineto and TORCH_TRACE contents) and `busy` (the rule's verdict, read). Left out for
CI's time (the whole rehearsal is ~2 min on two cores, this ~85 s): `tests` (its rehearsal is two
tests of test_benchmark_parts.py, which the suite runs anyway) and `autotune` (a lever measured with
two cold compiles; its pure parts are in tests/worker/test_levers_autotune.py)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_an_unknown_unit_is_a_usage_error(tmp_path):
    proc = subprocess.run([str(REPO / "scripts" / "gpu-check"), str(tmp_path), "warp"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.strip() == "gpu-check: no unit named warp (capture, tests, busy, autotune)"


@pytest.mark.slow
def test_the_cpu_rehearsal_writes_the_capture_and_the_summary(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable}
    proc = subprocess.run([str(REPO / "scripts" / "gpu-check"), str(tmp_path), "busy", "capture", "--device", "cpu", "--dry"],
                          capture_output=True, text=True, env=env, timeout=280)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # the plan first, in the check's order whatever order the units were named in
    assert "plan: gpu_capture 115 s, gpu_busy 25 s; limits 140 s" in proc.stderr, proc.stderr[-2000:]
    cuda = tmp_path / "cuda"
    traces = [f"mlp-{w}-fp32.pt.trace.json.gz" for w in ("forward", "train")]  # the rehearsal: MLPStack alone
    expected = {*traces, "mlp.torch_trace.log.gz", "timing.json", "check-mlp.json"}
    assert {p.name for p in cuda.iterdir()} == expected | {"manifest.json"}
    manifest = json.loads((cuda / "manifest.json").read_text())
    assert set(manifest["files"]) == expected and manifest["errors"] == {} and manifest["dry"] is True
    assert manifest["device"] == "cpu" and manifest["torch"] and all(f["what"] for f in manifest["files"].values())
    with gzip.open(cuda / "mlp-forward-fp32.pt.trace.json.gz", "rt") as f:
        kineto = json.load(f)
    names = {e.get("name") for e in kineto["traceEvents"]}
    assert {"compile_lens.call:0", "compile_lens.call:2"} <= names  # each profiled call in its range
    assert any("speedup_models.py" in str(n) for n in names)  # with_stack: the user's frames
    with gzip.open(cuda / "mlp.torch_trace.log.gz", "rt") as f:
        assert "inductor_provenance_tracking_node_mappings" in f.read()
    timing = json.loads((cuda / "timing.json").read_text())["captures"]
    assert all(t["eager_ms"] > 0 and t["compiled_ms"] > 0 for t in timing.values()) and len(timing) == 2
    report = json.loads((cuda / "check-mlp.json").read_text())
    assert any(t.get("name") == "MLPStack" for f in report.get("files", []) for t in f.get("targets", [])) or \
        "MLPStack" in json.dumps(report)
    summary = (tmp_path / "summary.md").read_text()
    assert "| gpu_capture | yes |" in summary and "| gpu_busy | yes |" in summary, summary
    rows = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [r["unit"] for r in rows] == ["gpu_capture", "gpu_busy"] and all(r["dry"] for r in rows)
    assert all(r["typed"] for r in rows), rows  # each unit's figures typed, read from its child's figures line
    assert rows[0]["figures"]["traces"] == {"value": 2, "unit": "count", "better": "higher", "limit": 2}
    assert rows[0]["figures"]["mlp-forward-fp32.compiled_ms"]["value"] > 0
    assert {"busy", "schedstat"} <= set(rows[1]["notes"]) and rows[1]["figures"]["cpus"]["value"] >= 1
    # the replay reads the rehearsal's capture as it will read a GPU's (tests/data/cuda): no test of it rots
    replay = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                             str(REPO / "tests" / "worker" / "test_cuda_replay.py")], capture_output=True, text=True,
                            env={**os.environ, "COMPILE_LENS_REPLAY_DIR": str(cuda)}, cwd=REPO, timeout=240)
    assert replay.returncode == 0 and "skipped" not in replay.stdout, replay.stdout[-2000:]

