"""`compile-lens import` of PyTorch profiler traces against Holistic Trace Analysis, for BENCHMARKS.md.

    .venv/bin/python -m benchmarks.cli.import_profile [--mb 500]

Two files: the largest committed real trace (tests/data/kineto/v100: a V100 rank, 216k events, 54 MB
of JSON) and one of `--mb` MB made from it (its events written again and again, each copy shifted
in time and in correlation ids, so the timeline goes on as a longer run's would). Each is read in
a fresh process by the reader `import` runs (`kineto.fold` + `summarise`): wall time and peak RSS,
then again under tracemalloc for the Python heap's peak; and by HTA (`TraceAnalysis` +
`get_temporal_breakdown`, the reference the tests hold the idle share to) in a fresh process: wall
time and peak RSS. The last line is the figures as JSON.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
V100 = ROOT / "tests/data/kineto/v100/v100_216k_events.json.gz"
OURS = """
import json, resource, sys, time, tracemalloc
from compile_lens.kineto.fold import fold
from compile_lens.kineto.profile import summarise
path, heap = sys.argv[1], sys.argv[2] == "1"
if heap:
    tracemalloc.start()
start = time.perf_counter()
profile = summarise(fold(path))
took = time.perf_counter() - start
print(json.dumps({"s": took, "idle": profile.gpu_idle_share, "kernels": profile.kernels, "events": profile.events,
                  "heap_peak": tracemalloc.get_traced_memory()[1] if heap else None,
                  "rss_peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""
HTA = """
import json, logging, resource, shutil, sys, tempfile, time, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
start = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
folder = tempfile.mkdtemp()
shutil.copy(sys.argv[1], folder)
frame = TraceAnalysis(trace_dir=folder).get_temporal_breakdown(visualize=False)
took = time.perf_counter() - start
shutil.rmtree(folder)
print(json.dumps({"s": took, "idle": float(frame["idle_time(us)"][0] / frame["kernel_time(us)"][0]),
                  "rss_peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def grown(source: Path, target: Path, mb: int) -> Path:
    """`source`'s events again and again until `target` holds `mb` MB, each copy later than the last."""
    with gzip.open(source, "rt") as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed) + 1000
    corr = max((e.get("args", {}).get("correlation", 0) for e in events if isinstance(e.get("args"), dict)), default=0) + 1
    with target.open("w") as out:
        out.write(json.dumps(doc)[:-1] + ', "traceEvents": [\n')
        copy, first = 0, True
        while out.tell() < mb * 1_000_000:
            for e in events:
                e = dict(e)
                if isinstance(e.get("ts"), (int, float)):
                    e["ts"] += copy * span
                if isinstance(e.get("args"), dict) and "correlation" in e["args"]:
                    e["args"] = {**e["args"], "correlation": e["args"]["correlation"] + copy * corr}
                if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int):
                    e["id"] += copy * corr
                out.write(("" if first else ",\n") + json.dumps(e))
                first = False
            copy += 1
        out.write("\n]}\n")
    return target


def run(code: str, path: Path, *args: str, timeout: float = 1800) -> dict:
    done = subprocess.run([sys.executable, "-c", code, str(path), *args], capture_output=True, text=True,
                          timeout=timeout, env={"PYTHONPATH": str(ROOT / "server"), "PATH": "/usr/bin:/bin"})
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=500)
    args = parser.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in (("V100 216k events (54 MB)", V100), (f"{args.mb} MB grown from it", None)):
            if path is None:
                path = grown(V100, Path(tmp) / f"grown_{args.mb}mb.json", args.mb)
            ours, heap, hta = run(OURS, path, "0"), run(OURS, path, "1"), run(HTA, path)
            rows[label] = {"ours_s": round(ours["s"], 2), "ours_rss_mb": round(ours["rss_peak_kb"] / 1e3),
                           "ours_heap_mb": round(heap["heap_peak"] / 1e6, 1), "events": ours["events"],
                           "idle": round(ours["idle"], 4),
                           "hta_s": round(hta["s"], 2) if "s" in hta else None,
                           "hta_rss_mb": round(hta["rss_peak_kb"] / 1e3) if "rss_peak_kb" in hta else None,
                           "hta_idle": round(hta["idle"], 4) if "idle" in hta else None, "hta_error": hta.get("error")}
    print("| trace | events | reader: time, peak RSS, heap peak | HTA: time, peak RSS | idle share (reader / HTA) |")
    print("|---|---|---|---|---|")
    for label, r in rows.items():
        theirs = f"{r['hta_s']} s, {r['hta_rss_mb']} MB" if r["hta_s"] is not None else f"failed: {r['hta_error']}"
        print(f"| {label} | {r['events']:,} | {r['ours_s']} s, {r['ours_rss_mb']} MB, {r['ours_heap_mb']} MB | {theirs} "
              f"| {r['idle']} / {r['hta_idle']} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
