"""What the per-line costs add to a measurement's wall time, on examples/ (BENCHMARKS.md, issue 33).

Each target is measured twice, each time in a fresh process (`run_benchmark`, as the worker runs
it): once with the line-cost step switched off (`line_costs.after_timing` replaced by a no-op:
"before") and once as shipped ("after"). Printed per target: both wall times, the step's own
seconds (`stages_s["line_costs"]`) and its share of the "after" run, and the truth checks: the
compiled lines + unattributed against the profile's total, and the lines' compiled sum against
the measured compiled forward.

    .venv/bin/python -m benchmarks.measure.line_costs_step [--max-seconds 20] [--only MLP]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples")
TARGETS = [  # (file, target, inputs): the examples that measure (graph breaks included)
    ("mlp.py", "MLP", "(torch.randn(8, 64),)"),
    ("tiny_measure.py", "Tiny", "(torch.randn(8, 16),)"),
    ("debug_print.py", "Encoder", "(torch.randint(0, 100, (8, 12)),)"),  # a break in a helper
    ("branching.py", "Gate", "(torch.randn(4, 3, 32, 32),)"),  # a data-dependent break
]


PARTS: dict[str, float] = {}


def _clocked(fn, name):
    def call(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            PARTS[name] = PARTS.get(name, 0.0) + time.perf_counter() - t0
    return call


def child(path: str, name: str, inputs: str, root: str, seconds: float, off: bool) -> None:
    from compile_lens.protocol import InputRecipe, TargetSpec
    from compile_lens.worker.loader import build_target, import_file
    from compile_lens.worker.measure.lines import costs as line_costs
    from compile_lens.worker.measure.run.benchmark import run_benchmark

    step_cpu = [0.0]
    if off:
        line_costs.after_timing = lambda *a, **k: None
    else:
        shipped = line_costs.after_timing

        def counted(*a, **k):  # the step's own CPU seconds (this process: the profiled compiles, the profiles)
            c0 = time.process_time()
            shipped(*a, **k)
            step_cpu[0] += time.process_time() - c0
        line_costs.after_timing = counted
        for part in ("eager_lines", "compiled_lines", "_profile"):  # where the step's seconds go
            setattr(line_costs, part, _clocked(getattr(line_costs, part), part))
    line = next(n.lineno for n in ast.walk(ast.parse(open(path).read()))
                if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name)
    spec = TargetSpec(name, "module" if name[0].isupper() else "function", line, inputs=InputRecipe("directive", inputs))
    t0, c0 = time.perf_counter(), time.process_time()
    b = run_benchmark(build_target(import_file(path, root), spec, path), path=path, root=root, device="cpu",
                      max_seconds=seconds)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    f = b.forward
    t = b.train_step
    compiled_lines = sum(ln.compiled_us or 0.0 for ln in f.lines)
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "line_costs_cpu_s": step_cpu[0], "parts_s": {k: round(v, 2) for k, v in PARTS.items()},
                      "line_costs_s": b.stages_s.get("line_costs"), "lines": len(f.lines),
                      "train_lines": len(t.lines) if t else None, "train_note": t.lines_note if t else None,
                      "note": f.lines_note, "compiled_note": f.compiled_lines_note,
                      "sum_check_us": [compiled_lines + (f.unattributed_us or 0.0), f.profile_us.get("compiled")],
                      "compiled_lines_us": compiled_lines, "compiled_call_us": f.compiled_ms * 1e3,
                      "top": [(os.path.basename(ln.path), ln.line, ln.eager_us, ln.compiled_us) for ln in f.lines[:3]],
                      "frames": [(fr.compile_id, fr.function, fr.total_s) for fr in (b.compile_time.frames if b.compile_time else [])]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-seconds", type=float, default=20.0)
    parser.add_argument("--only", default=None)
    parser.add_argument("--after-only", action="store_true", help="only the run with the step on (e.g. another "
                        "checkout's code: PYTHONPATH=/other/server)")
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        path, name, inputs, root, seconds, off = args.child
        child(path, name, inputs, root, float(seconds), off == "1")
        return
    import compile_lens

    print(f"load average before: {os.getloadavg()}; code: {os.path.dirname(compile_lens.__file__)}")
    summary: dict = {}
    for file, name, inputs in TARGETS:
        if args.only and args.only != name:
            continue
        runs = {}
        for label, off in ((("before", "1"),) if not args.after_only else ()) + (("after", "0"),):
            kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = subprocess.run([sys.executable, __file__, "--child", os.path.join(EXAMPLES, file), name, inputs,
                                  EXAMPLES, str(args.max_seconds), off], capture_output=True, text=True, check=True)
            runs[label] = json.loads(out.stdout.strip().splitlines()[-1])
            kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # the child and its fresh processes, C++ builds included
            runs[label]["all_cpu_s"] = kids.ru_utime + kids.ru_stime - kids0.ru_utime - kids0.ru_stime
        b = runs["after"]
        a = runs.get("before") or {"wall_s": float("nan"), "all_cpu_s": float("nan")}
        share = (b["line_costs_s"] or 0) / b["wall_s"]
        print(f"{file}:{name}: wall before {a['wall_s']:.1f} s, after {b['wall_s']:.1f} s; CPU (all processes) "
              f"before {a['all_cpu_s']:.1f} s, after {b['all_cpu_s']:.1f} s; line-cost step "
              f"{b['line_costs_s'] or 0:.2f} s = {share:.0%} of the after run (its CPU {b['line_costs_cpu_s']:.2f} s "
              f"in-process; parts {b['parts_s']}); lines {b['lines']}, train-step lines {b['train_lines']} {b['train_note'] or ''}; "
              f"lines+unattributed {b['sum_check_us'][0]:.1f} µs vs profile {b['sum_check_us'][1]} µs; "
              f"compiled lines {b['compiled_lines_us']:.1f} µs vs measured compiled call {b['compiled_call_us']:.1f} µs; "
              f"notes {b['note']!r} {b['compiled_note']!r}; top {b['top']}; frames {b['frames']}")
        summary[f"{file}:{name}"] = {
            "wall_before_s": round(a["wall_s"], 1), "wall_after_s": round(b["wall_s"], 1),
            "step_s": round(b["line_costs_s"] or 0, 2), "step_share_pct": round(100 * share, 1), "lines": b["lines"],
            "lines_plus_unattributed_us": b["sum_check_us"][0], "profile_us": b["sum_check_us"][1],
            "compiled_lines_us": b["compiled_lines_us"], "compiled_call_us": b["compiled_call_us"]}
    print(f"load average after: {os.getloadavg()}")
    print(json.dumps(summary, default=str))


if __name__ == "__main__":
    main()
