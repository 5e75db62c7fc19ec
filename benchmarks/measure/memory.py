#!/usr/bin/env python3
"""What a worker's process tree really holds while Compile Lens measures a model: RSS against USS
and PSS per process (psutil), the machine's cgroup figure, and what reading them costs.

    .venv/bin/python -m benchmarks.measure.memory                      # nanoGPT's GPT (GPT-2 124M), default settings
    .venv/bin/python -m benchmarks.measure.memory FILE.py --target NAME [--interval 0.5] [-- extra check flags]

Runs `compile-lens check FILE --target NAME --no-recompiles --no-cache --format json` (the
measurement: forward and train step, eager and Inductor) with the user's default settings, and
samples every process under it each `--interval` seconds. Prints, for the sample where each sum
peaked: the tree's summed RSS, USS and PSS, each process's own figures, the time one
`memory_full_info()` took on the biggest process, the load average, and the measurement's result
(speedups or why inconclusive, compile times, and any stop). A one-off: BENCHMARKS.md records it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
NANOGPT = REPO / "tests" / "fixtures" / "nanogpt" / "model.py"
MB = 1024 * 1024


def _cgroup_bytes() -> tuple[str, int | None]:
    for path in ("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory/memory.usage_in_bytes"):
        try:
            return path, int(Path(path).read_text())
        except (OSError, ValueError):
            continue
    return "", None


def _sample(root: psutil.Process) -> dict:
    procs = [root, *root.children(recursive=True)]
    rows, slowest = [], 0.0
    for proc in procs:
        try:
            started = time.perf_counter()
            full = proc.memory_full_info()
            took = time.perf_counter() - started
            name = " ".join(proc.cmdline()[1:4])[:60]
        except psutil.Error:
            continue
        slowest = max(slowest, took)
        rows.append({"pid": proc.pid, "name": name, "rss": full.rss, "uss": full.uss, "pss": full.pss,
                     "full_info_ms": round(took * 1000, 2)})
    return {"t": time.time(), "procs": rows, "slowest_full_info_ms": round(slowest * 1000, 2),
            **{k: sum(r[k] for r in rows) for k in ("rss", "uss", "pss")}, "cgroup": _cgroup_bytes()[1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", nargs="?", default=str(NANOGPT))
    parser.add_argument("--target", default="GPT")
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("extra", nargs="*", help="more `compile-lens check` flags (after --)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="compile-lens-memory-"))
    shutil.copy(args.file, work / Path(args.file).name)
    (work / ".git").mkdir()
    cmd = [sys.executable, "-m", "compile_lens.cli", "check", str(work / Path(args.file).name), "--target", args.target,
           "--no-recompiles", "--no-cache", "--format", "json", "-q", *args.extra]
    load_before = os.getloadavg()
    started = time.time()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=work,
                             env={**os.environ, "COMPILE_LENS_CACHE_DIR": str(work / "cache")})
    root = psutil.Process(child.pid)
    samples = []
    while child.poll() is None:
        try:
            samples.append(_sample(root))
        except psutil.Error:
            pass
        time.sleep(args.interval)
    out = child.stdout.read() if child.stdout else ""
    wall = time.time() - started
    report = {"command": " ".join(cmd), "wall_s": round(wall, 1), "load_before": load_before,
              "load_after": os.getloadavg(), "cpus": psutil.cpu_count(), "memory_mb": psutil.virtual_memory().total // MB,
              "cgroup_file": _cgroup_bytes()[0], "samples": len(samples)}
    for key in ("rss", "uss", "pss"):
        peak = max(samples, key=lambda s: s[key]) if samples else None
        report[f"peak_{key}_mb"] = round(peak[key] / MB) if peak else None
        if peak and key == "rss":
            report["at_peak_rss"] = [{**r, **{k: round(r[k] / MB) for k in ("rss", "uss", "pss")}} for r in peak["procs"]]
            report["at_peak_rss_sums_mb"] = {k: round(peak[k] / MB) for k in ("rss", "uss", "pss")}
            report["cgroup_at_peak_rss_mb"] = round(peak["cgroup"] / MB) if peak["cgroup"] else None
    report["max_processes"] = max((len(s["procs"]) for s in samples), default=0)
    # where counting each process's RSS overstates the most: the pages its processes share
    gap = max(samples, key=lambda s: s["rss"] - s["pss"]) if samples else None
    if gap:
        report["largest_rss_minus_pss"] = {
            "sums_mb": {k: round(gap[k] / MB) for k in ("rss", "uss", "pss")}, "processes": len(gap["procs"]),
            "procs": [{**r, **{k: round(r[k] / MB) for k in ("rss", "uss", "pss")}} for r in gap["procs"]]}
    report["slowest_full_info_ms"] = max((s["slowest_full_info_ms"] for s in samples), default=None)
    try:
        target = json.loads(out)["files"][0]["targets"][0]
        bench = target.get("benchmark") or {}
        report["result"] = {"status": target["status"], "error": target["error"], "inputs": target["inputs"],
                            "phases": target["phases"],
                            "benchmark": {k: v for k, v in bench.items() if k not in ("samples", "timeline")}}
    except (ValueError, KeyError, IndexError):
        report["result"] = {"unreadable_output": out[-2000:]}
    print(json.dumps(report, indent=1, default=str))
    print(json.dumps({k: report.get(k) for k in ("wall_s", "samples", "max_processes", "peak_rss_mb", "peak_uss_mb",
                                                 "peak_pss_mb", "at_peak_rss_sums_mb", "cgroup_at_peak_rss_mb",
                                                 "slowest_full_info_ms")}
                     | {"rss_minus_pss_largest_mb": (report.get("largest_rss_minus_pss") or {}).get("sums_mb"),
                        "status": report["result"].get("status")}, default=str))  # the figures, one line
    return 0


if __name__ == "__main__":
    sys.exit(main())
