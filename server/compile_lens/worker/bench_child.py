"""`python -m compile_lens.worker.bench_child <job json>`: compile time and peak memory, measured in
a fresh process (see `benchmark.run_benchmark`, which starts it).

The job names the user's file, the target spec, the device, the compile mode, the workloads
("train" and/or "forward"; the first one is the one measured for memory) and the tasks, in order:

- "compile": time the first compiled call of each workload. With the parent's empty Inductor
  cache dir this is the cold compile; with the dir a cold run filled, the warm one.
- "memory_eager" / "memory_compiled": peak memory of one call of the first workload, after two
  warm-up calls, with the last step's gradients dropped first (the step allocates them again, as
  every step after `zero_grad()` does). One model only: eager runs on it, then it is compiled.
  On CUDA `torch.cuda.max_memory_allocated` after `reset_peak_memory_stats` (includes the
  weights and inputs). On CPU the growth of peak RSS above the current RSS: free memory is
  handed back to the OS first (`gc.collect`, `malloc_trim`), then VmHWM is reset by writing "5"
  to /proc/self/clear_refs and read after the call; the median of three calls. Page-granular and
  including allocator overhead; memory the allocator reuses without growing RSS does not show,
  so it is a lower bound, near zero for tiny models.

User code may print anything: the result travels only in the file named by `result_path`,
written whole (rename) just before exit. An error becomes `{"error": Problem}` in that file.
"""

from __future__ import annotations

import copy
import ctypes
import gc
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import asdict
from typing import Any, Callable, Optional


def _watch_parent() -> None:
    """Exit when the worker that started us goes away: no orphan compiles."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _write(path: str, result: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(tmp, path)


def _status_bytes(field: str) -> Optional[int]:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for row in f:
                if row.startswith(field + ":"):
                    return int(row.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _trim() -> None:
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def cpu_peak(call: Callable[[], Any]) -> Optional[int]:
    """Growth of peak RSS over one call, or None where VmHWM cannot be reset."""
    _trim()
    base = _status_bytes("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return None
    call()
    peak = _status_bytes("VmHWM")
    if base is None or peak is None:
        return None
    return max(0, peak - base)


def cuda_peak(call: Callable[[], Any], device: str) -> int:
    import torch

    torch.cuda.synchronize(device)
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    call()
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device))


def memory_method(device: str, workload: str) -> str:
    what = "one train step" if workload == "train" else "one forward"
    if device.startswith("cuda"):
        return f"torch.cuda.max_memory_allocated over {what} (includes weights and inputs)"
    return (f"peak RSS growth over {what} in a fresh process (CPU: page-granular, "
            "includes allocator overhead, a lower bound)")


def peak_of(call: Callable[[], Any], model: Any, device: str) -> Optional[int]:
    """Peak of one call after two warm-up calls; the last step's gradients are dropped first, so
    the call allocates them again, as every training step does after `zero_grad()`."""
    for _ in range(2):
        call()
    if device.startswith("cuda"):
        model.zero_grad()
        return cuda_peak(call, device)
    runs = []
    for _ in range(3):
        model.zero_grad()
        runs.append(cpu_peak(call))
    if any(r is None for r in runs):
        return None
    return int(statistics.median(runs))  # type: ignore[arg-type]


def run(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    from ..protocol import Problem, TargetSpec, from_dict
    from . import benchmark as bench
    from .loader import TargetError, build_target, describe, import_file

    path, root, device = job["path"], job["root"], job["device"]
    workloads: list[str] = job["workloads"]
    result: dict[str, Any] = {"compile_s": {}, "memory": {}, "notes": []}
    stage = "importing"
    try:
        module = import_file(path, root)
        spec = from_dict(TargetSpec, job["spec"])
        target = build_target(module, spec, path)
        stage = "building the model"
        obj = target.make()
        is_module = isinstance(obj, torch.nn.Module)
        if is_module and spec.kind != "module":
            obj = copy.deepcopy(obj)  # the user's own instance stays untouched
        if is_module:
            obj = obj.to(device)
        args = bench.to_device(target.args, device)
        # One model only (no accuracy here): eager runs on it, then it is compiled. On CUDA the
        # peak then counts one set of weights, as in the user's program.
        eager = bench.Model(obj, obj if is_module else None, args, False)
        compiled: Any = None

        def make_compiled() -> Any:
            fn = torch.compile(obj, **bench.compile_kwargs(target, job["mode"]))
            return bench.Model(fn, obj if is_module else None, args, bool(job.get("step_begin")))

        def call(model: Any, workload: str) -> Callable[[], Any]:
            return model.run(workload)

        def sync() -> None:
            if device.startswith("cuda"):
                torch.cuda.synchronize(device)

        memory: dict[str, Any] = {"eager": None, "compiled": None,
                                  "method": memory_method(device, workloads[0])}
        for task in job["tasks"]:
            if task == "compile":
                for wl in workloads:
                    stage = f"compiling the {'train step' if wl == 'train' else 'forward'}"
                    sync()
                    t0 = time.perf_counter()
                    if compiled is None:  # the first workload's time includes torch.compile() itself
                        compiled = make_compiled()
                    call(compiled, wl)()
                    sync()
                    result["compile_s"][wl] = time.perf_counter() - t0
            elif task == "memory_eager":
                stage = "measuring eager peak memory"
                memory["eager"] = peak_of(call(eager, workloads[0]), eager, device)
            elif task == "memory_compiled":
                stage = "measuring compiled peak memory"
                compiled = compiled or make_compiled()
                memory["compiled"] = peak_of(call(compiled, workloads[0]), compiled, device)
        if memory["eager"] is None and memory["compiled"] is None and any(
                t.startswith("memory") for t in job["tasks"]):
            memory["method"] = "unavailable: /proc/self/clear_refs cannot be written here"
        result["memory"] = memory
        if "compile" in job["tasks"]:
            result["cache"] = bench.cache_counts()
    except TargetError as exc:
        result["error"] = asdict(exc.problem)
    except Exception as exc:  # noqa: BLE001 - user code or a compile failure: report it
        if bench.is_oom(exc):
            problem = Problem("oom", f"out of memory on {device} while {stage}: {describe(exc)[:200]}",
                              path, job["spec"].get("line"),
                              "use smaller example inputs (a smaller batch), or measure on another device")
        elif stage == "importing":
            problem = Problem("import", f"importing {os.path.basename(path)} failed: {describe(exc)[:300]}",
                              path, None, "run the file with python to see the full error")
        else:
            problem = Problem("call", f"{stage} of `{job['spec'].get('name')}` failed: {describe(exc)[:300]}",
                              path, job["spec"].get("line"),
                              "run the model under torch.compile in a plain script to see the full error")
        result["error"] = asdict(problem)
    return result


def main(argv: list[str]) -> int:
    job = json.loads(argv[1])
    _watch_parent()
    # Protect nothing on stdout: the parent reads only the result file. Keep user prints flowing.
    result = run(job)
    _write(job["result_path"], result)
    sys.stdout.flush()
    sys.stderr.flush()
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    # Skip interpreter teardown (Inductor's compile pools, atexit hooks): the result is written.
    os._exit(code)
