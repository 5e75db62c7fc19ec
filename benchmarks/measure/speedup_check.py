#!/usr/bin/env python3
"""Check Compile Lens's measured speedup against an independent measurement, or tabulate figures.

    .venv/bin/python -m benchmarks.measure.speedup_check                 # the four models of speedup_models.py
    .venv/bin/python -m benchmarks.measure.speedup_check models/net.py:Net [more FILE:NAME] [--device cpu]
    .venv/bin/python -m benchmarks.measure.speedup_check --table examples/*.py [--json figures.json]

The first two forms measure each target the way the editor's "Measure" does — a benchmark-only
job sent to a real worker process (`python -m compile_lens.worker`), its figures taken from the
worker's answer — and then, in a *fresh* Python process, measure eager vs `torch.compile(model)`
forward as a user would write it: `torch.utils.benchmark.Timer.blocked_autorange`, `no_grad`,
eval mode, the process's thread count, the same input recipe; `--repeats` eager/compiled pairs
(which side goes first alternates), the median of their speedups over the pairs during which other
processes left our cores alone (psutil; *busy* when fewer than 3 were). One table row per target: both speedups, their ratio, the tool's
95% interval and whether it was conclusive, the measurement's wall time against its inherent
parts (cold compile + warm compile + timing), and the load average and other processes' CPU use
(a shared machine says so). Exit status 0 when every conclusive figure agrees within
`--tolerance` (10%) — an imprecise one (`speed_words`) claims only its interval, so there the
independent figure must fall inside it — and none was inconclusive or busy, 1 otherwise.

The `--table` form measures every target of the files that has example inputs and prints a table
(what scripts/gpu-check runs on a GPU machine, and what BENCHMARKS.md records).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[2]
try:
    import compile_lens  # noqa: F401
except ImportError:  # running from the checkout before `make setup`
    sys.path.insert(0, str(REPO / "server"))

from compile_lens.protocol import Benchmark, InputRecipe, TargetSpec  # noqa: E402
from compile_lens.speed_words import imprecise  # noqa: E402

OUT = sys.stdout
DEFAULT_MODELS = str(REPO / "benchmarks" / "models" / "speedup_models.py")
DEFAULT_NAMES = ("TinyMLP", "MLP3", "SmallConv", "TinyGPT2")


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
    """In this process (the `--table` form)."""
    from compile_lens.worker.measure.run.benchmark import run_benchmark

    target, root = build(path, spec)
    started = time.perf_counter()
    result = run_benchmark(target, path=path, root=root, device=device, mode=mode,
                           max_seconds=max_seconds, progress=lambda s, **kw: log(f"  {spec.name}: {s}"))
    return result, time.perf_counter() - started


class _Answered(Exception):
    pass


async def _via_worker(path: str, spec: TargetSpec, device: str, mode: str, max_seconds: float) -> tuple[Any, float]:
    from compile_lens.jobs.lanes import Limits, WorkerSlot, worker_env
    from compile_lens.protocol import AnalyzeJob

    root = str(Path(path).resolve().parent)
    slot = WorkerSlot("check", sys.executable, root, worker_env(None), spare=False)
    got: dict[str, Any] = {}
    try:
        await slot.info(120)  # torch imported: not part of the measurement
        job = AnalyzeJob(id=1, path=str(Path(path).resolve()), root=root, targets=[spec], trace=False,
                         recompiles=False, benchmark=True, device=device, mode=mode, max_seconds=max_seconds)
        started = time.perf_counter()

        def on_event(event: Any) -> None:
            if event.event == "progress":
                log(f"  {spec.name}: {event.stage}")
            elif event.event == "target" and event.result is not None:
                # a result is sent again as it grows (the forward's part first): the check wants the forward
                got["result"], got["wall"] = event.result, time.perf_counter() - started
                forward = (event.result.parts or {}).get("forward")
                if event.result.benchmark is not None and (forward is None or forward.status != "pending"):
                    raise _Answered  # the figures are in; the parts after them are not timed

        with contextlib.suppress(_Answered):
            await slot.run(job, on_event, Limits(timeout_s=60.0, memory_limit_mb=16384))
    finally:
        await slot.stop()
    result = got.get("result")
    if result is None or result.benchmark is None:
        raise RuntimeError(result.error.message if result is not None and result.error else "no figures came back")
    return result.benchmark, got["wall"]


INDEPENDENT = r"""
import copy, json, statistics, sys, time, psutil, torch, torch.utils.benchmark as tbench
sys.path.insert(0, {root!r})
{imports}
model = {init}
args = {inputs}
model = model.to({device!r}).eval() if isinstance(model, torch.nn.Module) else model
args = tuple(a.to({device!r}) if isinstance(a, torch.Tensor) else a for a in args)
compiled = torch.compile(copy.deepcopy(model) if isinstance(model, torch.nn.Module) else model{mode})
with torch.no_grad():
    for _ in range(3):  # compile and warm up before timing
        compiled(*args)
threads = torch.get_num_threads()
stmt = "with torch.no_grad():\n    f(*args)"
timers = {{"eager": tbench.Timer(stmt, globals={{"f": model, "args": args}}, num_threads=threads),
          "compiled": tbench.Timer(stmt, globals={{"f": compiled, "args": args}}, num_threads=threads)}}
me = psutil.Process()
def busy_s():  # all CPUs' busy seconds (guest time is inside user time)
    t = psutil.cpu_times()
    return sum(getattr(t, f) for f in t._fields if f not in ("idle", "iowait", "guest", "guest_nice"))
def own_s():
    t = me.cpu_times()
    return t.user + t.system
pairs = []
for i in range({repeats}):
    # alternate which side goes first; note what other processes took meanwhile (% of one CPU)
    order = ("eager", "compiled") if i % 2 == 0 else ("compiled", "eager")
    w0, b0, o0 = time.perf_counter(), busy_s(), own_s()
    got = {{side: timers[side].blocked_autorange(min_run_time={min_run_time}).median for side in order}}
    others = 100 * ((busy_s() - b0) - (own_s() - o0)) / (time.perf_counter() - w0)
    pairs.append((got["eager"], got["compiled"], others))
# a pair during which others took more than the cores our threads leave idle, plus half a core, was
# slowed by them (on 2 cores: one thread of the two pre-empted stalls every parallel region)
limit = 100 * (0.5 + max(0, (psutil.cpu_count() or 1) - threads))
quiet = [p for p in pairs if p[2] <= limit]
used = quiet if len(quiet) >= 3 else pairs
speedups = sorted(e / c for e, c, _ in used)
print("RESULT " + json.dumps({{"eager_ms": statistics.median(e for e, _, _ in used) * 1e3,
      "compiled_ms": statistics.median(c for _, c, _ in used) * 1e3, "speedup": statistics.median(speedups),
      "speedups": speedups, "threads": threads, "pairs": len(pairs), "quiet_pairs": len(quiet),
      "others_cpu": [round(p[2]) for p in pairs], "busy": len(quiet) < 3}}))
"""


def independent_forward(path: str, spec: TargetSpec, device: str, mode: str, min_run_time: float,
                        repeats: int) -> dict:
    """Eager vs compiled forward, the plain way, in a fresh process: nothing shared with Compile Lens."""
    file = Path(path).resolve()
    if spec.inputs and spec.inputs.init:
        init = spec.inputs.init
    else:  # a module is built with no arguments; a function is compiled as it is
        init = f"{spec.name}()" if spec.kind == "module" else spec.name
    code = INDEPENDENT.format(
        root=str(file.parent), imports=f"from {file.stem} import *\nimport torch", init=init,
        inputs=spec.inputs.text if spec.inputs else "()", device=device, repeats=repeats,
        min_run_time=min_run_time, mode="" if mode == "default" else f", mode={mode!r}")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(file.parent))
    line = next((row for row in done.stdout.splitlines() if row.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"independent run failed: {done.stderr[-800:]}")
    return json.loads(line[len("RESULT "):])


def _load() -> float:
    return os.getloadavg()[0]


def check_one(path: str, spec: TargetSpec, args: argparse.Namespace) -> dict:
    load0 = _load()
    log(f"measuring {path}:{spec.name} with Compile Lens (a worker job, inputs {spec.inputs.text}) ...")
    ours, wall = asyncio.run(_via_worker(path, spec, args.device, args.mode, args.max_seconds))
    log("independent torch.utils.benchmark measurement (fresh process) ...")
    theirs = independent_forward(path, spec, ours.device, args.mode, args.min_run_time, args.repeats)
    f = ours.forward
    ratio = f.speedup / theirs["speedup"]
    stages = ours.stages_s or {}
    inherent = (ours.compile_s.get("cold") or 0) + (ours.compile_s.get("warm") or 0) + stages.get("timing", 0.0)
    return {"target": f"{os.path.relpath(path)}:{spec.name}", "benchmark": asdict(ours), "independent": theirs,
            "ratio": ratio, "agree": f.conclusive and not theirs["busy"] and _agrees(f, theirs["speedup"], ratio, args.tolerance),
            "wall_s": wall,
            "inherent_s": inherent, "load": [load0, _load()]}


def _agrees(f: Any, independent: float, ratio: float, tolerance: float) -> bool:
    """What the tool claims holds: a precise figure's median within `tolerance` of the independent
    one; an imprecise one (conclusive, interval wider than MAX_CI_WIDTH) claims only its interval,
    so the independent figure must fall inside it (widened by `tolerance`)."""
    if not imprecise(f):
        return abs(ratio - 1) <= tolerance
    lo, hi = f.speedup_ci
    return lo * (1 - tolerance) <= independent <= hi * (1 + tolerance)


def _ci(t: dict) -> str:
    ci = t.get("speedup_ci")
    return f"{ci[0]:.2f}–{ci[1]:.2f}" if ci else "-"


def check(args: argparse.Namespace) -> int:
    targets = args.targets or [f"{DEFAULT_MODELS}:{n}" for n in DEFAULT_NAMES]
    rows = []
    for item in targets:
        path, _, name = item.rpartition(":")
        if not path:
            raise SystemExit("give each target as FILE:NAME")
        spec = find_spec(path, name, args.inputs, args.init)
        for attempt in range(1 + args.retries):
            try:
                row = check_one(path, spec, args)
            except Exception as exc:  # noqa: BLE001 - report it in the table and go on
                row = {"target": f"{os.path.relpath(path)}:{name}", "error": str(exc)[:200]}
                break
            if (row["benchmark"]["forward"]["conclusive"] and not row["independent"]["busy"]) or attempt == args.retries:
                break
            log(f"  {'inconclusive' if not row['benchmark']['forward']['conclusive'] else 'independent run busy'} "
                f"(load {row['load'][1]:.1f}); measuring again")
        rows.append(row)
    import torch

    emit(f"machine: {_machine()}, torch {torch.__version__}, device {args.device}, mode {args.mode}, "
         f"max-seconds {args.max_seconds:g}; independent: {args.repeats} pairs of blocked_autorange"
         f"(min_run_time={args.min_run_time:g}), order alternating, median over its quiet pairs")
    head = ("target", "tool fwd x", "tool 95% CI", "conclusive", "independent x", "ratio", "agree",
            "tool eager/comp ms", "indep eager/comp ms", "indep quiet pairs", "cold s", "warm s", "timing s", "wall s",
            "wall/inherent", "load before/after", "others' CPU %")
    emit("| " + " | ".join(head) + " |")
    emit("|" + "---|" * len(head))
    bad = 0
    for r in rows:
        if "error" in r:
            emit(f"| {r['target']} | error: {r['error']} |")
            bad += 1
            continue
        b, t, ind = r["benchmark"], r["benchmark"]["forward"], r["independent"]
        bad += 0 if r["agree"] else 1
        emit("| " + " | ".join([
            r["target"], f"{t['speedup']:.3f}", _ci(t), "yes" if t["conclusive"] else "**no**",
            f"{ind['speedup']:.3f}", f"{r['ratio']:.3f}", "yes" if r["agree"] else "**no**",
            f"{t['eager_ms']:.4f} / {t['compiled_ms']:.4f}", f"{ind['eager_ms']:.4f} / {ind['compiled_ms']:.4f}",
            f"{ind['quiet_pairs']}/{ind['pairs']}" + (" **busy**" if ind["busy"] else ""),
            _s(b["compile_s"].get("cold")), _s(b["compile_s"].get("warm")),  # the first look: no warm compile yet
            f"{(b.get('stages_s') or {}).get('timing', 0):.1f}", f"{r['wall_s']:.1f}",
            f"{r['wall_s'] / r['inherent_s']:.2f}" if r["inherent_s"] else "-",
            f"{r['load'][0]:.1f} / {r['load'][1]:.1f}",
            f"{b.get('contention', {}).get('other_cpu_percent', float('nan')):.0f}"]) + " |")
    for r in rows:
        if "benchmark" in r:
            emit(f"- {r['target']}: {r['benchmark']['verdict']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


def _s(seconds: Optional[float]) -> str:
    return "–" if seconds is None else f"{seconds:.1f}"


def _machine() -> str:
    from compile_lens.worker.measure.workload.devices import cpu_name

    return f"{cpu_name()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


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
            _s(b["compile_s"].get("cold")), _s(b["compile_s"].get("warm")),  # the first look: no warm compile yet
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
    parser.add_argument("targets", nargs="*", help="FILE:NAME to check (default: the four models of speedup_models.py)")
    parser.add_argument("--table", nargs="+", dest="files", metavar="FILE", help="measure every target of these files")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda (default auto)")
    parser.add_argument("--mode", default="default", help="torch.compile mode")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="budget of one benchmark")
    parser.add_argument("--min-run-time", type=float, default=0.3, help="independent Timer's min_run_time")
    parser.add_argument("--repeats", type=int, default=12, help="independent eager/compiled pairs")
    parser.add_argument("--retries", type=int, default=1, help="measure again when the tool says inconclusive")
    parser.add_argument("--tolerance", type=float, default=0.10, help="allowed |ratio - 1|")
    parser.add_argument("--inputs", help="example inputs, e.g. '(torch.randn(64, 512),)'")
    parser.add_argument("--init", help="how to build the module, e.g. 'Net(hidden=64)'")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    if args.files:
        return table(args)
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
