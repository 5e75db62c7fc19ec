"""Make tests/data/provenance_trace/train_tiny_lm.log.gz: a real TORCH_TRACE of
tests/data/trace_programs/train_tiny_lm.py (2 steps, Inductor on the CPU) with Inductor's provenance
tracking on, kept small for the import tests (tests/trace_import/test_provenance_import.py).

    .venv/bin/python -m benchmarks.recordings.provenance_trace [--out DIR]

The program runs from a "job" folder (/tmp/.../job/repo) with `INDUCTOR_PROVENANCE=1 TORCH_TRACE=dir
OMP_NUM_THREADS=1`; of the log torch writes, the records `compile-lens import` reads are kept, as torch
wrote them (`str`, `dynamo_start`, `compilation_metrics`, `bwd_compilation_metrics`,
`inductor_output_code`, and the artifacts `torch_version`, `dynamo_graph_break_reason`,
`recompile_reasons`, `inductor_provenance_tracking_*`); the rest (chromium events, graph dumps, cache
keys: ~2.3 MB) is left out, and the result gzipped.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PROGRAM = os.path.join(REPO, "tests", "data", "trace_programs", "train_tiny_lm.py")
KEEP = {"str", "dynamo_start", "compilation_metrics", "bwd_compilation_metrics", "inductor_output_code"}
KEEP_ARTIFACTS = {"torch_version", "dynamo_graph_break_reason", "recompile_reasons",
                  "inductor_provenance_tracking_node_mappings", "inductor_provenance_tracking_kernel_stack_traces"}


def kept(line: str) -> bool:
    try:
        record = json.loads(line[line.index("{"):])
    except ValueError:
        return False
    if "artifact" in record:
        return record["artifact"].get("name") in KEEP_ARTIFACTS
    return any(k in record for k in KEEP)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(REPO, "tests", "data", "provenance_trace"))
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="provenance-trace-")
    job, trace = os.path.join(base, "job", "repo"), os.path.join(base, "trace")
    os.makedirs(job)
    shutil.copy(PROGRAM, job)
    env = {**os.environ, "INDUCTOR_PROVENANCE": "1", "TORCH_TRACE": trace, "OMP_NUM_THREADS": "1",
           "TORCHINDUCTOR_CACHE_DIR": os.path.join(base, "inductor")}  # a cold cache: every graph compiled
    subprocess.run([sys.executable, "train_tiny_lm.py", "--steps", "2"], cwd=job, env=env, check=True)
    (log,) = glob.glob(os.path.join(trace, "*.log"))
    out_lines, keep = [], False
    with open(log, encoding="utf-8") as stream:
        for line in stream:
            if line.startswith("\t"):
                if keep:
                    out_lines.append(line)
                continue
            keep = kept(line)
            if keep:
                out_lines.append(line)
    os.makedirs(args.out, exist_ok=True)
    target = os.path.join(args.out, "train_tiny_lm.log.gz")
    with gzip.open(target, "wt", encoding="utf-8") as out:
        out.writelines(out_lines)
    print(f"{target}: {len(out_lines)} of the log's lines, {os.path.getsize(target)} bytes gzipped (from {log})")
    kinds = sorted(k for k in KEEP | KEEP_ARTIFACTS if any(f'"{k}"' in ln for ln in out_lines))
    print(json.dumps({"kept_lines": len(out_lines), "gz_bytes": os.path.getsize(target), "log_bytes": os.path.getsize(log),
                      "kinds_missing": sorted((KEEP | KEEP_ARTIFACTS) - set(kinds))}))
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
