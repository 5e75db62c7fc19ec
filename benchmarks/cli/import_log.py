"""`compile-lens import` on a large log: read speed (MB/s) and peak memory, for BENCHMARKS.md.

    .venv/bin/python -m benchmarks.cli.import_log [--trace LOG] [--mb 500]

The large log is a real trace (`--trace`, else one this script makes: `TORCH_TRACE=dir python
tests/data/trace_programs/train_tiny_lm.py --backend aot_eager`) written again and again until it
is `--mb` MB. Each size is read in a fresh process (`compile_lens.trace_import.fold`, what `import`
runs per log): its wall time, the Python heap's peak (tracemalloc) and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json, resource, sys, time, tracemalloc
from compile_lens.trace_import.fold import fold
path, heap = sys.argv[1], sys.argv[2] == "1"
if heap:
    tracemalloc.start()
start = time.perf_counter()
with open(path, encoding="utf-8", errors="replace") as stream:
    trace = fold(stream, path)
took = time.perf_counter() - start
print(json.dumps({"s": took, "records": trace.stats.records, "lines": trace.stats.lines,
                  "heap_peak": tracemalloc.get_traced_memory()[1] if heap else None,
                  "rss_peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def make_trace(folder: Path) -> Path:
    env = {**os.environ, "TORCH_TRACE": str(folder / "trace"), "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, str(ROOT / "tests/data/trace_programs/train_tiny_lm.py"), "--backend", "aot_eager"],
                   check=True, env=env, capture_output=True, timeout=900)
    return next((folder / "trace").glob("*.log"))


def measure(path: Path, heap: bool) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), "1" if heap else "0"], check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trace", type=Path)
    parser.add_argument("--mb", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        text = (args.trace or make_trace(folder)).read_text()
        rows = []
        for mb in sorted({20, args.mb}):
            big = folder / f"dedicated_log_torch_trace_{mb}mb.log"
            with big.open("w") as out:
                while out.tell() < mb * 1_000_000:
                    out.write(text)
            size = big.stat().st_size / 1e6
            timed = measure(big, heap=False)  # tracemalloc slows reading: speed without it
            heap = measure(big, heap=True)
            rows.append((size, timed, heap))
            big.unlink()
        print("| log | records | read time | speed | Python heap peak (tracemalloc) | peak RSS |")
        print("|---|---|---|---|---|---|")
        for size, timed, heap in rows:
            print(f"| {size:.0f} MB | {timed['records']:,} | {timed['s']:.1f} s | {size / timed['s']:.0f} MB/s "
                  f"| {heap['heap_peak'] / 1e6:.2f} MB | {timed['rss_peak_kb'] / 1e3:.0f} MB |")
        print(json.dumps({f"{size:.0f}MB": {"records": timed["records"], "read_s": round(timed["s"], 2),
                                             "mb_per_s": round(size / timed["s"]), "heap_peak_mb": round(heap["heap_peak"] / 1e6, 2),
                                             "rss_peak_mb": round(timed["rss_peak_kb"] / 1e3)} for size, timed, heap in rows}))


if __name__ == "__main__":
    main()
