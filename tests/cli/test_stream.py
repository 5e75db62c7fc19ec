"""`check --stream` through the real CLI and worker: one JSON object per line on stdout as each part
of a target lands, each part once per target, the forward's headline on stderr before the rest of
the measurement runs, and the last line the document `--format json` prints (read back from the
cache the streamed run wrote, so both describe the same measurement). The measurement runs with the
machine declared quiet (`COMPILE_LENS_TEST_QUIET`, under pytest only): its figures are asserted —
Broken's graph break makes its compiled forward several times slower than eager. The stream's lines,
timed as they arrive, also show the budget as a bound (`worker/measure/run/budget.py`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from paths import FIXTURES, SERVER

MEASURE = ("forward", "train_step", "memory", "lines", "export", "fallback_ops", "batch_sweep")


def _check(root, cache, *args):
    """`check broken.py` on a 4 s budget, the line costs asked for whatever it (the profiles: the same
    parts asked for each time, or the result cache would key a run apart and measure again)."""
    env = {**os.environ, "PYTHONSAFEPATH": "1", "COMPILE_LENS_CACHE_DIR": str(cache),
           "PYTHONPATH": str(SERVER), "COMPILE_LENS_TEST_QUIET": "1"}
    # torch.export and the fallback ops asked for too: they run whatever the 4 s budget (no kernel to build)
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", "check", "broken.py", "--max-seconds", "4",
                           "--with", "lines,export,fallback_ops", *args],
                          cwd=root, capture_output=True, text=True, timeout=900, env=env)


@pytest.fixture(scope="module")
def streamed(tmp_path_factory):
    """(stdout lines, stderr, `--format json`'s document from the cache, the workspace, the cache)."""
    base = tmp_path_factory.mktemp("stream")
    root, cache = base / "ws", base / "cache"
    shutil.copytree(FIXTURES / "stream", root)
    done = _check(root, cache, "--stream", "--profile-dir", str(base / "profiles"))  # the profiles: kept, cache written
    assert done.returncode == 1, done.stderr  # the graph break is a warning: exit codes as without --stream
    again = _check(root, cache, "--format", "json", "-q")
    assert again.returncode == 1, again.stderr
    return done.stdout.splitlines(), done.stderr, json.loads(again.stdout), root, cache


@pytest.mark.slow
def test_stream_lines_are_the_parts_as_they_land_then_the_document(streamed):
    lines, _, doc, root, _ = streamed
    parsed = [json.loads(line) for line in lines]  # nothing but JSON on stdout
    *parts, last = parsed
    assert last == doc
    [entry] = doc["files"]
    [target] = entry["targets"]
    assert {(p["path"], p["target"]) for p in parts} == {(entry["path"], "Broken")}
    names = [p["part"] for p in parts]
    assert len(names) == len(set(names)), names  # each part once
    assert names[:2] == ["trace", "recompiles"], names  # the trace and the sweep run before the measurement
    assert set(MEASURE) <= set(names), names
    assert names.index("forward") < min(names.index(p) for p in ("export", "fallback_ops", "batch_sweep"))
    by = {p["part"]: p for p in parts}
    # each part's data is what the document shows of it (the trace and sweep do not change after they land)
    assert by["trace"]["data"] == {"graph_count": target["graph_count"], "graph_breaks": target["graph_breaks"]}
    assert [g["line"] for g in by["trace"]["data"]["graph_breaks"]] == [14]
    assert by["recompiles"]["data"] == {"recompiles": target["recompiles"]}
    assert by["forward"]["data"]["benchmark"]["forward"]["speedup"] == target["benchmark"]["forward"]["speedup"]
    # the forward's own cold compile (the document's `cold` is the break-even workload's: the train step)
    assert by["forward"]["data"]["benchmark"]["compile_s"]["cold_forward"] == target["benchmark"]["compile_s"]["cold_forward"]
    # the forward's figure: conclusive, slower (two graphs and a resume around the print), its interval below 1×
    forward = by["forward"]["data"]["benchmark"]["forward"]
    assert forward["conclusive"] is True and forward["rounds"] >= 8, forward
    lo, hi = forward["speedup_ci"]
    assert lo <= forward["speedup"] <= hi < 1.0, forward
    contention = target["benchmark"]["contention"]  # the figures say how they were taken
    assert contention["declared_quiet"] is True and contention["clock"] == "thread CPU", contention
    for part in ("export", "fallback_ops"):  # asked for, and free (read from the warm compile): each done
        assert by[part]["status"] == "done" and by[part]["data"] == {part: target[part]}, by[part]
    assert target["export"]["ok"] is True, target["export"]
    assert {"op": "extern_kernels.addmm", "count": 1, "kind": "extern"} in target["fallback_ops"], target["fallback_ops"]
    # an opt-in part not asked for: named not run, as the document's `unmeasured` says it
    assert by["batch_sweep"] == {**by["batch_sweep"], "status": "not-run", "why": "an opt-in part, not asked for"}
    assert target["batch_sweep"] is None and target["unmeasured"]["batch sweep"] == "not run: an opt-in part, not asked for"


@pytest.mark.slow
def test_the_forward_headline_comes_before_the_deployment_parts_run(streamed):
    _, stderr, doc, _, _ = streamed
    said = stderr.splitlines()
    [headline] = [i for i, line in enumerate(said) if "Broken: forward " in line]
    # the forward's figure in the document's words: `slower: lo–hi× (median m×…)`, its cold compile
    forward = doc["files"][0]["targets"][0]["benchmark"]["forward"]
    lo, hi = forward["speedup_ci"]
    assert f"Broken: forward slower: {lo:.2f}–{hi:.2f}× (median {forward['speedup']:.2f}×" in said[headline], said[headline]
    assert re.search(r" · compile \d+(\.\d)? s cold \(cpu\)$", said[headline]), said[headline]
    # the rest of the forward (its warm compile: the line costs asked for need it) comes after it
    later = next(i for i, line in enumerate(said) if "(warm cache)" in line)
    assert headline < later, said


@pytest.mark.slow
def test_stream_from_the_cache_says_every_part_then_the_same_document(streamed):
    _, _, doc, root, cache = streamed
    done = _check(root, cache, "--stream", "-q")
    assert done.returncode == 1 and not done.stderr.strip(), done.stderr
    *parts, last = [json.loads(line) for line in done.stdout.splitlines()]
    assert last == doc
    assert [p["part"] for p in parts][:3] == ["trace", "recompiles", "forward"]


def test_stream_refuses_an_output_file(tmp_path):
    done = _check(tmp_path, tmp_path / "cache", "--stream", "-o", str(tmp_path / "out.json"))
    assert done.returncode == 2 and "--stream" in done.stderr and not done.stdout


def _first_lines(root, cache, path):
    """`check PATH --stream` (graph breaks only: the order shows in the trace, no Inductor compile):
    the targets in the order their trace landed."""
    env = {**os.environ, "PYTHONSAFEPATH": "1", "COMPILE_LENS_CACHE_DIR": str(cache), "PYTHONPATH": str(SERVER)}
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "check", path, "--stream", "--no-benchmark",
                           "--no-recompiles", "-q"], cwd=root, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    *parts, _ = [json.loads(line) for line in done.stdout.splitlines()]
    return [p["target"] for p in parts if p["part"] == "trace"]


def test_stream_runs_the_outer_target_first_then_a_compiled_inner_one_before_it(tmp_path):
    """`discovery/order.py` through the real CLI: `Outer` builds `Inner` (defined above it) and runs
    first; once a workspace file compiles `Inner`, `Inner` does (a fresh cache each: no hit hides the order)."""
    root = tmp_path / "ws"
    root.mkdir()
    shutil.copy(FIXTURES / "measure_order" / "nested.py", root / "nested.py")
    assert _first_lines(root, tmp_path / "cache1", "nested.py") == ["Outer", "Inner"]
    shutil.copy(FIXTURES / "measure_order" / "compile_inner.py", root / "compile_inner.py")
    assert _first_lines(root, tmp_path / "cache2", "nested.py") == ["Inner", "Outer"]


@pytest.mark.slow
def test_profile_dir_keeps_the_measured_calls_profiles_for_the_import(streamed):
    """`check --profile-dir` (the streamed run, on a model that breaks the graph): the profiles of the
    measured calls are kept as PyTorch profiler traces, named by target, workload and side, and read
    by `compile-lens import` (the reader the live GPU idle share comes from). The forward's: the 4 s
    budget leaves no room for the train step."""
    _, stderr, _, root, _ = streamed
    kept = root.parent / "profiles"
    names = sorted(p.name for p in kept.glob("*.pt.trace.json"))
    assert {"-".join(n.split("-")[:3]) for n in names} == {"Broken-forward-eager", "Broken-forward-compiled"}, names
    assert f"{len(names)} profiles in {kept}" in stderr
    imported = subprocess.run([sys.executable, "-m", "compile_lens.cli", "import", str(kept), "--root", str(root),
                               "--format", "json"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(SERVER)})
    assert imported.returncode == 0, imported.stderr
    ranks = json.loads(imported.stdout)["ranks"]
    assert len(ranks) == len(names) and all(r["clock"] == "cpu" and r["gpu_idle_share"] is None for r in ranks)


@pytest.mark.slow
def test_a_small_budget_bounds_the_measurement_and_names_what_it_left_out(tmp_path):
    """`--max-seconds 4` on a model with a forward and a train step, each part timed as its stream line
    arrives: the measurement ends within max(4 s, the time to the forward's figure) × 1.1 + 5 s of its
    start (the trace's line), the forward's headline uncut; the train step (a fresh process's compile
    of forward and backward) has no room there, and every part not measured says the budget."""
    root = tmp_path / "ws"
    shutil.copytree(FIXTURES / "stream", root)
    env = {**os.environ, "PYTHONSAFEPATH": "1", "COMPILE_LENS_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": str(SERVER)}
    proc = subprocess.Popen([sys.executable, "-m", "compile_lens.cli", "check", "broken.py", "--max-seconds", "4",
                             "--no-recompiles", "--stream"], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    arrived = []
    for line in proc.stdout:
        arrived.append((time.perf_counter(), json.loads(line)))
    assert proc.wait(timeout=900) == 1  # the graph break is a warning
    at = {doc["part"]: (t, doc) for t, doc in arrived if "part" in doc}
    start, forward_at = at["trace"][0], at["forward"][0]
    end = max(t for t, doc in arrived if doc.get("part") in MEASURE)
    bound = max(4.0, forward_at - start) * 1.1 + 5.0
    assert end - start <= bound, (end - start, forward_at - start, [(round(t - start, 2), d.get("part")) for t, d in arrived])
    assert at["forward"][1]["status"] == "done"
    assert (at["train_step"][1]["status"], at["train_step"][1]["why"]) == ("not-run", "4 s budget")
    for part in MEASURE:
        landed = at[part][1]
        assert landed["status"] == "done" or "4 s budget" in landed["why"] or part == "batch_sweep", landed
