#!/usr/bin/env python3
"""Check Compile Lens's measured speedup against an independent measurement, or tabulate figures.

    .venv/bin/python scripts/bench_speedup_check.py models/net.py:Net [--device cpu] [--mode default]
    .venv/bin/python scripts/bench_speedup_check.py --table examples/*.py [--json figures.json]

The first form runs `run_benchmark` on the target (inputs from its directive, the project's
discovery, or `--inputs`/`--init`), then right after, in the same process, measures eager vs
compiled forward of a fresh copy of the same model with plain `torch.utils.benchmark`
(`Timer.blocked_autorange`, no_grad, eval mode, the process's thread count; `--repeats`
eager/compiled pairs, the median of their speedups) and prints both speedups and their ratio.
Exit status 0 when they agree within `--tolerance` (10%), 1 when not.

The second form measures every target of the files that has example inputs and prints a table
(what scripts/gpu-check runs on a GPU machine, and what BENCHMARKS.md records).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
try:
    import compile_lens  # noqa: F401
except ImportError:  # running from the checkout before `make setup`
    sys.path.insert(0, str(REPO / "server"))

from compile_lens.protocol import Benchmark, InputRecipe, TargetSpec  # noqa: E402

OUT = sys.stdout


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def emit(text: str) -> None:
    print(text, file=OUT, flush=True)


def find_specs(path: str) -> list[TargetSpec]:
    from compile_lens.discovery import discover

    found = discover(Path(path).read_text(encoding="utf-8"))
    return found.targets if found else []


def find_spec(path: str, name: str, inputs: str | None, init: str | None) -> TargetSpec:
    spec = next((s for s in find_specs(path) if s.name == name), None)
    if spec is None:
        spec = TargetSpec(name, "module" if name[:1].isupper() else "function", 1)
    if inputs:
        spec.inputs = InputRecipe("directive", inputs, init=init or (spec.inputs.init if spec.inputs else None))
    elif init and spec.inputs:
        spec.inputs.init = init
    if spec.inputs is None:
        raise SystemExit(f"{path}:{name}: no example inputs ({spec.problem or 'none found'}); pass --inputs")
    return spec


def build(path: str, spec: TargetSpec):
    from compile_lens.worker.loader import build_target, import_file

    root = str(Path(path).resolve().parent)
    return build_target(import_file(path, root), spec, path), root


def measure(path: str, spec: TargetSpec, device: str, mode: str, max_seconds: float) -> tuple[Benchmark, float]:
    from compile_lens.worker.benchmark import run_benchmark

    target, root = build(path, spec)
    started = time.perf_counter()
    result = run_benchmark(target, path=path, root=root, device=device, mode=mode,
                           max_seconds=max_seconds, progress=lambda s: log(f"  {spec.name}: {s}"))
    return result, time.perf_counter() - started


def independent_forward(path: str, spec: TargetSpec, device: str, mode: str, min_run_time: float,
                        repeats: int) -> dict:
    """Eager vs compiled forward, the plain way: a Timer each, nothing shared with Compile Lens;
    `repeats` eager/compiled pairs, the median of their speedups."""
    import torch
    import torch.utils.benchmark as tbench

    target, _ = build(path, spec)
    model = target.make()
    if isinstance(model, torch.nn.Module):
        if spec.kind != "module":
            model = copy.deepcopy(model)
        model = model.to(device).eval()
        other = copy.deepcopy(model)
    else:
        other = model

    def move(v):
        if isinstance(v, torch.Tensor):
            return v.to(device)
        if isinstance(v, (list, tuple)):
            return type(v)(move(x) for x in v)
        if isinstance(v, dict):
            return {k: move(x) for k, x in v.items()}
        return v

    args = move(target.args)
    compiled = torch.compile(other, mode=None if mode == "default" else mode)
    with torch.no_grad():
        for _ in range(3):  # compile and warm up before timing
            compiled(*args)
    threads = torch.get_num_threads()
    stmt = "with torch.no_grad():\n    f(*args)"
    eager_t = tbench.Timer(stmt, globals={"f": model, "args": args}, num_threads=threads)
    compiled_t = tbench.Timer(stmt, globals={"f": compiled, "args": args}, num_threads=threads)
    pairs = []
    for _ in range(repeats):  # pairs: one slow second on a shared machine does not decide it alone
        e = eager_t.blocked_autorange(min_run_time=min_run_time).median
        c = compiled_t.blocked_autorange(min_run_time=min_run_time).median
        pairs.append((e, c))
    torch._dynamo.reset()
    speedups = sorted(e / c for e, c in pairs)
    return {"eager_ms": statistics.median(e for e, _ in pairs) * 1e3,
            "compiled_ms": statistics.median(c for _, c in pairs) * 1e3,
            "speedup": statistics.median(speedups), "speedups": speedups, "threads": threads}


def check(args: argparse.Namespace) -> int:
    path, _, name = args.target.rpartition(":")
    if not path:
        raise SystemExit("give the target as FILE:NAME")
    spec = find_spec(path, name, args.inputs, args.init)
    log(f"measuring {path}:{name} with Compile Lens (inputs {spec.inputs.text}) ...")
    ours, wall = measure(path, spec, args.device, args.mode, args.max_seconds)
    log("independent torch.utils.benchmark measurement ...")
    theirs = independent_forward(path, spec, ours.device, args.mode, args.min_run_time, args.repeats)
    ratio = ours.forward.speedup / theirs["speedup"]
    agree = abs(ratio - 1) <= args.tolerance
    f = ours.forward
    emit(f"target       {path}:{name} on {ours.device} ({ours.device_name}), torch {ours.torch}, mode {ours.mode}")
    emit(f"compile lens forward {f.speedup:.3f}x  (eager {f.eager_ms:.4f} ms ± {f.eager_iqr_ms:.4f}, "
          f"compiled {f.compiled_ms:.4f} ms ± {f.compiled_iqr_ms:.4f}; full benchmark {wall:.1f} s)")
    emit(f"independent  forward {theirs['speedup']:.3f}x  (eager {theirs['eager_ms']:.4f} ms, "
          f"compiled {theirs['compiled_ms']:.4f} ms; median of {len(theirs['speedups'])} Timer.blocked_autorange "
          f"pairs {', '.join(f'{v:.3f}' for v in theirs['speedups'])}; {theirs['threads']} threads)")
    emit(f"ratio        {ratio:.3f}  -> {'agree' if agree else 'DISAGREE'} within {args.tolerance:.0%}")
    if args.json:
        Path(args.json).write_text(json.dumps({"benchmark": asdict(ours), "independent": theirs,
                                               "ratio": ratio, "agree": agree, "wall_s": wall}, indent=1))
    return 0 if agree else 1


def _ms(v: float | None) -> str:
    return "-" if v is None else (f"{v:.3f}" if v < 100 else f"{v:.0f}")


def _mib(v) -> str:
    return "-" if not isinstance(v, (int, float)) else f"{v / 2**20:.2f}"


def table(args: argparse.Namespace) -> int:
    rows, failures = [], 0
    for path in args.files:
        for spec in find_specs(path):
            where = f"{os.path.relpath(path)}:{spec.name}"
            if spec.inputs is None:
                log(f"skip {where}: {spec.problem or 'no example inputs'}")
                continue
            log(f"measuring {where} ...")
            try:
                b, wall = measure(path, spec, args.device, args.mode, args.max_seconds)
            except Exception as exc:  # noqa: BLE001 - report and go on with the next target
                problem = getattr(exc, "problem", None)
                log(f"  failed: {problem.message if problem else exc}")
                failures += 1
                rows.append({"target": where, "error": problem.message if problem else str(exc)})
                continue
            rows.append({"target": where, "wall_s": wall, "benchmark": asdict(b)})
    head = ("target", "fwd eager ms", "fwd comp ms", "fwd x", "train eager ms", "train comp ms", "train x",
            "cold s", "warm s", "break-even", "mem eager MiB", "mem comp MiB", "err out", "err grad", "wall s")
    emit(" | ".join(head))
    emit(" | ".join("---" for _ in head))
    for row in rows:
        if "error" in row:
            emit(f"{row['target']} | error: {row['error']}")
            continue
        b = row["benchmark"]
        f, t = b["forward"], b["train_step"] or {}
        emit(" | ".join([
            row["target"], _ms(f["eager_ms"]), _ms(f["compiled_ms"]), f"{f['speedup']:.2f}",
            _ms(t.get("eager_ms")), _ms(t.get("compiled_ms")),
            f"{t['speedup']:.2f}" if t else "-",
            f"{b['compile_s']['cold']:.1f}", f"{b['compile_s']['warm']:.1f}",
            str(b["break_even_calls"] if b["break_even_calls"] is not None else "never"),
            _mib(b["peak_memory_bytes"].get("eager")), _mib(b["peak_memory_bytes"].get("compiled")),
            f"{b['max_abs_error']['output']:.1e}" if b["max_abs_error"]["output"] is not None else "-",
            f"{b['max_abs_error']['grad']:.1e}" if b["max_abs_error"]["grad"] is not None else "-",
            f"{row['wall_s']:.0f}"]))
    for row in rows:
        if "benchmark" in row:
            b = row["benchmark"]
            emit(f"- {row['target']}: {b['verdict']}" + "".join(f"\n    {n}" for n in b["notes"]))
    if rows and "benchmark" in next((r for r in rows if "benchmark" in r), {}):
        b = next(r for r in rows if "benchmark" in r)["benchmark"]
        emit(f"device: {b['device']} ({b['device_name']}), torch {b['torch']}, mode {b['mode']}; "
              f"memory: {b['peak_memory_bytes']['method']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 1 if failures else 0


def protect_stdout() -> None:
    """Results go to the real stdout; user code's prints (fd 1 included) go to stderr instead."""
    global OUT
    OUT = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def main() -> int:
    protect_stdout()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", nargs="?", help="FILE:NAME to check")
    parser.add_argument("--table", nargs="+", dest="files", metavar="FILE", help="measure every target of these files")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda (default auto)")
    parser.add_argument("--mode", default="default", help="torch.compile mode")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="budget of one benchmark")
    parser.add_argument("--min-run-time", type=float, default=1.0, help="independent Timer's min_run_time")
    parser.add_argument("--repeats", type=int, default=3, help="independent eager/compiled pairs")
    parser.add_argument("--tolerance", type=float, default=0.10, help="allowed |ratio - 1|")
    parser.add_argument("--inputs", help="example inputs, e.g. '(torch.randn(64, 512),)'")
    parser.add_argument("--init", help="how to build the module, e.g. 'Net(hidden=64)'")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    if args.files:
        return table(args)
    if not args.target:
        parser.error("give FILE:NAME, or --table FILE...")
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
