"""`python -m compile_lens.worker.measure.bench_child <job json>`: the cold compile, measured in a fresh
process with an empty Inductor cache (see `benchmark.run_benchmark`, which starts it).

The job names the user's file, the target spec, the device, the compile mode, the workloads
("train" and/or "forward"; the first one is the one measured for memory) and the tasks, in order:

- "compile": time the first compiled call of each workload. With the parent's empty Inductor
  cache dir this is the cold compile. Before it, the import of Dynamo and Inductor is timed on
  its own (`import_s`, part of the first figure): the parent adds it to the warm compile it
  measures in its own process, where those modules are already loaded.
- "memory_eager" / "memory_compiled": the allocator peak of one call of the first workload
  (`worker/measure/memory.py`: profiler memory events on CPU, `max_memory_allocated` on CUDA). The parent
  measures memory itself; these tasks remain for checking the method in a clean process.

User code may print anything: the result travels only in the file named by `result_path`,
written whole (rename) just before exit. An error becomes `{"error": Problem}` in that file.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
from dataclasses import asdict
from typing import Any, Callable

from ...processes import watch_parent


def _write(path: str, result: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(tmp, path)


def run(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    from ...protocol import Problem, TargetSpec, from_dict
    from ..loader import TargetError, build_target, describe, import_file
    from . import benchmark as bench
    from . import memory as mem

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
                                  "method": mem.method(device, workloads[0])}
        for task in job["tasks"]:
            if task == "compile":
                stage = "importing Dynamo and Inductor"
                t0 = time.perf_counter()
                import torch._dynamo  # noqa: F401 - what torch.compile's first call imports
                import torch._inductor.compile_fx  # noqa: F401
                result["import_s"] = time.perf_counter() - t0
                for wl in workloads:
                    stage = f"compiling the {'train step' if wl == 'train' else 'forward'}"
                    sync()
                    t0 = time.perf_counter()
                    if compiled is None:  # the first workload's time includes torch.compile() itself
                        compiled = make_compiled()
                    call(compiled, wl)()
                    sync()
                    result["compile_s"][wl] = time.perf_counter() - t0 + (
                        result["import_s"] if wl == workloads[0] else 0.0)
            elif task == "memory_eager":
                stage = "measuring eager peak memory"
                memory["eager"] = mem.peak_of(call(eager, workloads[0]), eager.zero_grad, device)
            elif task == "memory_compiled":
                stage = "measuring compiled peak memory"
                compiled = compiled or make_compiled()
                memory["compiled"] = mem.peak_of(call(compiled, workloads[0]), compiled.zero_grad, device)
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
    watch_parent(exit_code=3)  # exit when the worker that started us goes away: no orphan compiles
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
