"""The CUDA artifacts a GPU check brings back for CPU tests to replay (committed as tests/data/cuda/):
two models of the shared set (`MLPStack`, the nanoGPT-style `GPT`: benchmarks/models/speedup_models.py),
each workload (forward, train step) in fp32 and under bf16 autocast, compiled with Inductor's
provenance on. Written to OUT:

- `<model>-<workload>-<dtype>.pt.trace.json.gz`: the profiler's own Kineto trace
  (`export_chrome_trace`) of the compiled calls, profiled as the line costs profile them
  (`line_windows.profile`: each call in a `compile_lens.call:<i>` range, synchronised inside it on
  CUDA), with `record_shapes=False, with_stack=True`;
- `<model>.torch_trace.log.gz`: the TORCH_TRACE log of that model's compiles (all four), provenance
  artifacts in it (`inductor_provenance_tracking_*`);
- `timing.json`: eager against compiled per capture, timed apart from the profiler (CUDA events on a
  GPU, perf_counter on the CPU), the median of N calls;
- `check-mlp.json`: the CLI's `check --format json` of MLPStack;
- `manifest.json`: every file, what it is, the device and torch.

Ends with the figures line (`figures.emit`): the files written against those expected, each
capture's timing.

    python -m benchmarks.gpu.capture OUT_DIR [--device cuda] [--dry]

One child process per model: TORCH_TRACE is read when torch is imported, so each model's log is
its own process's. `--dry`: the CPU rehearsal (the CPU-sized models, few calls, the CLI without
the measurement).
"""

from __future__ import annotations

import argparse
import copy
import glob
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from .. import REPO
from ..figures import Figure, Result, emit

MODELS = {"mlp": "MLPStack", "gpt": "GPT"}
WORKLOADS = ("forward", "train")
DTYPES = {"fp32": "fp32", "bf16": "bf16-autocast"}
CALL = "compile_lens.call:"  # line_windows.CALL: the range the replay reads each call's window from


def dtypes(dry: bool) -> dict[str, str]:
    """The rehearsal compiles fp32 only: a compile costs ~10 s on two cores, bf16 is the same path."""
    return {"fp32": DTYPES["fp32"]} if dry else DTYPES


def models(dry: bool) -> dict[str, str]:
    """The rehearsal captures MLPStack only: GPT goes down the same path, at another compile's cost."""
    return {"mlp": MODELS["mlp"]} if dry else MODELS


def trace_name(model: str, workload: str, dtype: str) -> str:
    return f"{model}-{workload}-{dtype}.pt.trace.json.gz"


def _gzip(src: Path, dst: Path) -> None:
    with open(src, "rb") as f, gzip.open(dst, "wb") as g:
        shutil.copyfileobj(f, g)
    src.unlink()


def profile(call: Callable[[], Any], n: int, device: str) -> Any:
    """line_windows.profile's recording (one call outside first, each call in its own range and
    synchronised inside it on CUDA), with the stacks on and no shapes (what the Kineto reader reads)."""
    import torch
    from torch.profiler import ProfilerActivity

    on_cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    call()
    with torch.profiler.profile(activities=activities, record_shapes=False, with_stack=True) as prof:
        for i in range(n):
            with torch.profiler.record_function(f"{CALL}{i}"):
                call()
                if on_cuda:
                    torch.cuda.synchronize()
    return prof



def median_ms(call: Callable[[], Any], n: int, device: str) -> float:
    """Median of `n` calls, each timed alone: CUDA events on a GPU (the device's clock), else perf_counter."""
    import torch

    call()
    times = []
    for _ in range(n):
        if device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            call()
            times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


def capture_model(out: Path, device: str, key: str, dry: bool) -> dict[str, Any]:
    """In this process (TORCH_TRACE set before torch was imported): the model's four captures."""
    import torch
    import torch._inductor.config as inductor_config

    from compile_lens.worker.measure.compile.cold import inductor_cache
    from compile_lens.worker.measure.lines import provenance
    from compile_lens.worker.measure.workload import precision
    from compile_lens.worker.measure.workload.model import Model

    sys.path.insert(0, str(REPO / "benchmarks" / "models"))
    import speedup_models as m

    torch.manual_seed(0)
    base = getattr(m, MODELS[key])().to(device)
    inputs = ((torch.randn(m.MLP_BATCH, m.MLP_WIDTH, device=device),) if key == "mlp" else
              (torch.randint(0, m.GPT_VOCAB, (m.GPT_BATCH, m.GPT_SEQ), device=device),))
    n_prof, n_time = (3, 5) if dry else (20, 50)
    found: dict[str, Any] = {}
    # fp32's two first: a child cut at its limit has written those (each trace as soon as it is taken);
    # one cache folder for the model's compiles (Triton's kernels may be shared; FX graphs are not cached)
    own = tempfile.mkdtemp(prefix="compile-lens-capture-", dir=os.environ.get("COMPILE_LENS_CAPTURE_TMP"))
    for dtype, spec in dtypes(dry).items():
        for workload in WORKLOADS:
            name = trace_name(key, workload, dtype)
            try:
                with precision.applied(SimpleNamespace(precision=spec, precision_source="gpu-check"), device) as prec:
                    compiled_mod, eager_mod = copy.deepcopy(base), copy.deepcopy(base)
                    # the compile that provenance is caught from (and that TORCH_TRACE logs): no cache hit
                    with inductor_cache(own), inductor_config.patch(provenance.config_patch(device)), \
                            provenance.uncached(), provenance.catching() as caught:
                        t0 = time.perf_counter()
                        call = Model(torch.compile(compiled_mod), compiled_mod, inputs, False).run(workload)
                        call()
                        compile_s = time.perf_counter() - t0
                        graphs = caught.graphs
                    with inductor_cache(own):
                        with provenance.kernel_ranges(graphs):
                            prof = profile(call, n_prof, device)
                        compiled_ms = median_ms(call, n_time, device)  # without the profile's kernel ranges
                    eager_ms = median_ms(Model(eager_mod, eager_mod, inputs, False).run(workload), n_time, device)
                plain = out / name[:-3]
                prof.export_chrome_trace(str(plain))
                _gzip(plain, out / name)
                found[name] = {"model": MODELS[key], "workload": workload, "dtype": dtype, "precision": prec.value,
                               "graphs": len(graphs), "kernels": sum(len(g.kernels) for g in graphs),
                               "compile_s": round(compile_s, 2), "eager_ms": round(eager_ms, 4),
                               "compiled_ms": round(compiled_ms, 4), "speedup": round(eager_ms / compiled_ms, 3),
                               "timed_calls": n_time, "profiled_calls": n_prof}
            except Exception as exc:  # noqa: BLE001 - one capture's failure is said; the model's others still run
                print(f"capture {name}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                found["error:" + name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                print(json.dumps({"error:" + name: found["error:" + name]}), flush=True)
                continue
            print(json.dumps({name: found[name]}), flush=True)
    shutil.rmtree(own, ignore_errors=True)
    return found


def _child(out: Path, device: str, key: str, dry: bool, limit: float) -> tuple[dict[str, Any], str]:
    """A process per model with its own TORCH_TRACE folder; its captures and the log's file name ('' if none)."""
    scratch = Path(tempfile.mkdtemp(prefix="compile-lens-capture-"))  # removed even when the child is killed
    logs = scratch / "torch_trace"
    env = {**os.environ, "TORCH_TRACE": str(logs), "COMPILE_LENS_BENCH_DEVICE": device, "COMPILE_LENS_CAPTURE_TMP": str(scratch),
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO / "server"), str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    args = [sys.executable, "-m", "benchmarks.gpu.capture", str(out), "--device", device, "--model", key] + (["--dry"] if dry else [])
    try:
        proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=limit)
        rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, stdout = 124, exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        stderr = f"timed out after {limit:.0f} s"
    got: dict[str, Any] = {}
    for line in stdout.splitlines():  # capture_model's lines, one per capture as it is taken
        if line.startswith("{"):
            try:
                got.update(json.loads(line))
            except ValueError:  # another line that opens with a brace (torch's own print)
                continue
    log_name = ""
    files = sorted(glob.glob(str(logs / "*.log")))
    if files:  # one log per process; more would be torch's own subprocesses' (none expected)
        log_name = f"{key}.torch_trace.log.gz"
        with gzip.open(out / log_name, "wb") as g:
            for f in files:
                with open(f, "rb") as src:
                    shutil.copyfileobj(src, g)
    shutil.rmtree(scratch, ignore_errors=True)
    if rc != 0:
        got["error:" + key] = {"rc": rc, "stderr": stderr.strip().splitlines()[-3:]}
    return got, log_name


def check_json(out: Path, device: str, dry: bool, limit: float) -> tuple[str, dict[str, Any]]:
    """The CLI's JSON of MLPStack (the dry run: trace only, no measurement)."""
    path = out / "check-mlp.json"
    args = [sys.executable, "-m", "compile_lens.cli", "check", str(REPO / "benchmarks" / "models" / "speedup_models.py"),
            "--target", "MLPStack", "--format", "json", "--device", device, "--no-cache", "-q", "-o", str(path)]
    args += ["--no-benchmark", "--no-recompiles"] if dry else ["--no-recompiles", "--max-seconds", str(int(max(20, limit - 15)))]
    env = {**os.environ, "COMPILE_LENS_BENCH_DEVICE": device,
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO / "server"), os.environ.get("PYTHONPATH", "")) if p)}
    try:
        proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=limit)
        rc, err = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired:
        rc, err = 124, f"timed out after {limit:.0f} s"
    ok = rc in (0, 1) and path.exists()  # 1: findings, still a report
    return path.name, {"rc": rc, "ok": ok, **({} if ok else {"stderr": err.strip().splitlines()[-3:]})}


def _device_words(device: str) -> dict[str, Any]:
    import torch

    return {"device": device, "device_name": torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu",
            "torch": torch.__version__, "cuda": torch.version.cuda}


def capture_all(out: Path, device: str, dry: bool, budget: float) -> Result:
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    traces: dict[str, Any] = {}
    logs = {}
    # the CLI's share: what is left after the captures, at most a quarter of the budget
    chosen = models(dry)
    for i, key in enumerate(chosen):
        left = budget * 0.75 - (time.perf_counter() - started)
        got, log_name = _child(out, device, key, dry, max(10.0, left / (len(chosen) - i)))
        traces.update(got)
        if log_name:
            logs[log_name] = {"model": MODELS[key], "what": "TORCH_TRACE log of this model's compiles "
                              f"(forward and train step; {', '.join(dtypes(dry))}), provenance_tracking_level=1"}
    errors = {k: v for k, v in traces.items() if k.startswith("error:")}
    traces = {k: v for k, v in traces.items() if not k.startswith("error:")}
    (out / "timing.json").write_text(json.dumps(
        {"what": "eager vs compiled, median ms of the timed calls, timed apart from the profiler "
                 + ("(CUDA events)" if device.startswith("cuda") else "(perf_counter)"), "captures": traces}, indent=1))
    check_name, check = check_json(out, device, dry, max(15.0, budget - (time.perf_counter() - started)))
    files: dict[str, Any] = {}
    for name, rec in traces.items():
        files[name] = {"what": f"Kineto trace (torch.profiler export_chrome_trace) of {rec['profiled_calls']} compiled "
                               f"{rec['workload']} calls of {rec['model']} ({rec['dtype']}), each in a {CALL}<i> range, "
                               "record_shapes=False, with_stack=True", **{k: rec[k] for k in ("model", "workload", "dtype")}}
    files.update(logs)
    files["timing.json"] = {"what": "eager vs compiled timed apart from the profiler (median of N)"}
    if check["ok"]:
        files[check_name] = {"what": "compile-lens check --format json of MLPStack"
                             + (" (--no-benchmark: the dry run)" if dry else "")}
    manifest = {"format": 2, **_device_words(device), "dry": dry, "root": str(REPO / "benchmarks" / "models"),
                "files": files, "errors": errors, "check": check}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return result(traces, len(chosen), len(logs), errors, check, dry)


def result(traces: dict[str, Any], n_models: int, n_logs: int, errors: dict[str, Any], check: dict[str, Any],
           dry: bool) -> Result:
    """The files written against those expected (the goals), each capture's compile and timing; the
    CLI's JSON missing is the verdict (its exit status is no figure)."""
    expected = n_models * len(WORKLOADS) * len(dtypes(dry))
    figures = {"traces": Figure(len(traces), "count", "higher", expected),
               "logs": Figure(n_logs, "count", "higher", n_models),
               "errors": Figure(len(errors), "count", "lower", 0)}
    for name, rec in traces.items():
        key = name.split(".pt.")[0]
        figures |= {f"{key}.speedup": Figure(rec["speedup"], "x"), f"{key}.compile_s": Figure(rec["compile_s"], "s"),
                    f"{key}.eager_ms": Figure(rec["eager_ms"], "ms"), f"{key}.compiled_ms": Figure(rec["compiled_ms"], "ms")}
    notes = {"check_rc": check["rc"], **({"errors": list(errors)} if errors else {}),
             **({"check": check.get("stderr")} if not check["ok"] else {})}
    return Result(figures, ok=False if not check["ok"] else None, notes=notes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dry", action="store_true")
    parser.add_argument("--budget", type=float, default=120.0, help="seconds for the whole capture")
    parser.add_argument("--model", choices=sorted(MODELS), help=argparse.SUPPRESS)  # the per-model child
    args = parser.parse_args()
    out = Path(args.out)
    if args.model:
        capture_model(out, args.device, args.model, args.dry)
        return 0
    got = capture_all(out, args.device, args.dry, args.budget)
    emit(got)
    return 0 if got.verdict() else 1


if __name__ == "__main__":
    sys.exit(main())
