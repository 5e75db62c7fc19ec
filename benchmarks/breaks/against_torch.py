"""Compare Compile Lens's graph-break lines with what torch itself reports, target by target.

torch's own set: the innermost frame of each `torch._dynamo.explain` break reason, joined with
every "Graph break in user code at FILE:LINE" record of its `graph_breaks` log — collected here
independently of Compile Lens's worker, in a fresh process per file.

    .venv/bin/python -m benchmarks.breaks.against_torch FILE.py [FILE.py ...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

TORCH_SIDE = r'''
import json, logging, os, re, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import importlib.util, torch, torch._dynamo
from compile_lens.discovery import discover
src = open(sys.argv[1]).read()
spec = importlib.util.spec_from_file_location("m", sys.argv[1]); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
records = []
class H(logging.Handler):
    def emit(self, r):
        if r.name.endswith("__graph_breaks"):
            records.append(r.getMessage())
torch._logging.set_logs(graph_breaks=True)
logging.getLogger("torch._dynamo").addHandler(H())
out = {}
for t in discover(src).targets:
    if t.inputs is None:
        continue
    ns = m.__dict__
    obj = eval(t.inputs.init or f"{t.name}()", ns) if t.kind == "module" else getattr(m, t.name)
    obj = getattr(obj, "_torchdynamo_orig_callable", obj)
    args = eval(t.inputs.text, ns)
    records.clear()
    torch._dynamo.utils.reset_graph_break_dup_checker() if hasattr(torch._dynamo.utils, "reset_graph_break_dup_checker") else None
    e = torch._dynamo.explain(obj)(*args)
    lines = set()
    for r in e.break_reasons:
        if r.user_stack:
            f = r.user_stack[-1]
            lines.add((os.path.realpath(f.filename), f.lineno))
    for msg in records:
        mm = re.search(r"in user code at (.+?):(\d+)", msg.splitlines()[0])
        if mm:
            lines.add((os.path.realpath(mm.group(1)), int(mm.group(2))))
    out[t.name] = sorted(f"{os.path.basename(p)}:{l}" for p, l in lines if "/torch/" not in p)
print("RESULT" + json.dumps(out))
'''


def torch_view(path: str) -> dict:
    done = subprocess.run([sys.executable, "-c", TORCH_SIDE, os.path.abspath(path)], capture_output=True, text=True)
    line = next((r for r in done.stdout.splitlines() if r.startswith("RESULT")), None)
    if line is None:
        raise SystemExit(f"torch side failed on {path}:\n{done.stderr[-2000:]}")
    return json.loads(line[len("RESULT"):])


def lens_view(path: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "check", os.path.abspath(path), "--format", "json",
                           "--no-benchmark", "-q"], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.abspath(path)))
    report = json.loads(done.stdout)
    out = {}
    for file in report["files"]:
        for t in file["targets"]:
            out[t["name"]] = sorted({f"{os.path.basename(b['path'])}:{b['line']}" for b in t["graph_breaks"]})
    return out


def main() -> int:
    from benchmarks.figures import Figure, Result, emit

    failures, skipped, compared, differences = 0, [], 0, []
    for path in sys.argv[1:]:
        try:
            ours, theirs = lens_view(path), torch_view(path)
        except (SystemExit, ValueError) as exc:  # a fault fixture torch cannot build: say so, go on
            skipped.append(path)
            print(f"SKIP {path}: {str(exc).splitlines()[0][:160]}")
            continue
        compared += len(set(ours) | set(theirs))
        for name in sorted(set(ours) | set(theirs)):
            same = ours.get(name) == theirs.get(name)
            failures += not same
            said = f"{path}:{name}: compile-lens {ours.get(name)} torch {theirs.get(name)}"
            print(f"{'ok  ' if same else 'DIFF'} {said}")
            differences += [] if same else [said]
    print(f"{failures} target(s) differ")
    emit(Result({"files": Figure(len(sys.argv) - 1, "count"), "targets": Figure(compared, "count"),
                 "differ": Figure(failures, "count", "lower", 0)},
                notes={k: v for k, v in (("files_not_compared", skipped), ("differences", differences)) if v}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
