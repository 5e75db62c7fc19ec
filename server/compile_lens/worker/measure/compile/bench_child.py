"""`python -m compile_lens.worker.measure.compile.bench_child <job json>`: the cold compile, measured in a fresh
process with an empty Inductor cache (see `benchmark.run_benchmark`, which starts it).

The job names the user's file, the target spec, the device, the compile mode, the workloads
("train" and/or "forward"; the first one is the one measured for memory) and the tasks, in order:

With `gated` set the child builds the model, then waits for "go" on its stdin before any task
(`compile.children.Early`: started as the job arrives, its imports beside the parent's).

- "compile": time the first compiled call of each workload. With the parent's empty Inductor
  cache dir this is the cold compile. Before it, the import of Dynamo and Inductor is timed on
  its own (`import_s`, part of the first figure): the parent adds it to the warm compile it
  measures in its own process, where those modules are already loaded.
- "first_look": after "compile" (the forward's child): the forward's first paired timing rounds, eager
  and just-compiled, as torch's own check of a model times them in a fresh process
  (`timing.per_workload.first_look`): the figure the user waits for, sent before the parent's warm compile.
  A failure here is `{"why": …}` under "first_look", never the cold compile's.
- "memory_eager" / "memory_compiled": the allocator peak of one call of the first workload
  (`worker/measure/memory/peak.py`: profiler memory events on CPU, `max_memory_allocated` on CUDA). The parent
  measures memory itself; these tasks remain for checking the method in a clean process.

User code may print anything: the result travels only in the file named by `result_path`,
written whole (rename) just before exit. Job and result are typed (`cold_job.ColdJob`, `ColdResult`);
an error is the result's `error` (a Problem).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import sys
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Callable

from ....processes import watch_parent

if TYPE_CHECKING:  # the child imports them after watching its parent (`run`)
    from .cold_job import ColdJob, ColdResult, FirstLook


def _write(path: str, result: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(tmp, path)


def run(job: ColdJob) -> ColdResult:
    # torch and the package are imported here, not at the top: `main` watches its parent first
    from ....remote_cache import remote_counts
    from ...loader import TargetError
    from ..memory import peak as mem
    from ..run import benchmark as bench
    from .cold_job import ChildPeaks, ColdResult
    from .dynamo_watch import _metrics

    device, workloads = job.device, job.workloads
    result = ColdResult()
    where = {"stage": "importing"}
    try:
        eager, make_compiled = _build(job, where)
        if job.gated and not _go():  # started early, beside the parent's import and trace
            return ColdResult(stopped=True)
        compiled: Any = None
        memory = ChildPeaks(method=mem.method(device, workloads[0]))
        # the compiles' settings held for every task after them (never closed: the process ends):
        # a compile after them (a recompile, a guard variant) then reads the cache entries they
        # wrote — the provenance level is part of the FX-graph cache key — instead of missing them
        held = contextlib.ExitStack()
        for task in job.tasks:
            if task == "compile":
                compiled = _compile(job, result, where, make_compiled, compiled, held)
                # what the compile did, read before any later task adds to torch's counters
                result.cache = bench.cache_counts()
                result.remote_cache = remote_counts(_metrics(), device)
            elif task == "first_look" and compiled is not None:
                where["stage"] = "timing the forward"
                result.first_look = _first_look(job, eager, compiled)
            elif task == "memory_eager":
                where["stage"] = "measuring eager peak memory"
                memory.eager = mem.peak_of(eager.run(workloads[0]), eager.zero_grad, device)
            elif task == "memory_compiled":
                where["stage"] = "measuring compiled peak memory"
                compiled = compiled or make_compiled()
                memory.compiled = mem.peak_of(compiled.run(workloads[0]), compiled.zero_grad, device)
        result.memory = memory
    except TargetError as exc:
        result.error = exc.problem
    except Exception as exc:  # noqa: BLE001 - user code or a compile failure: report it
        result.error = _problem(exc, job, where["stage"])
    return result


def _first_look(job: ColdJob, eager: Any, compiled: Any) -> FirstLook:
    from ..timing.per_workload import first_look
    from .cold_job import FirstLook

    try:
        eager.use(False)
        return first_look(eager, compiled, job.device)
    except Exception as exc:  # noqa: BLE001 - the parent then times the forward itself
        return FirstLook(why=f"{type(exc).__name__}: {str(exc).strip()[:200]}")


def _go() -> bool:
    """Wait (idle) for the parent's word: this process was started as the job arrived, so that its
    imports and the model's build run beside the parent's own; the timed compile starts only once
    the parent has nothing else running (a compile beside the parent's trace would be timed with it).
    False: the parent closed the pipe without a word (it needs no cold compile after all)."""
    return sys.stdin.readline().strip() == "go"


def _build(job: ColdJob, where: dict[str, str]) -> tuple[Any, Callable[[], Any]]:
    """The user's target, built and on the device: its eager Model, and how to compile it."""
    import torch

    from ...loader import build_target, import_file
    from ..run import benchmark as bench
    from ..workload import precision

    path, device, spec = job.path, job.device, job.spec
    module = import_file(path, job.root)
    precision.use(asdict(spec), device)  # the parent's autocast / TF32: the cold compile is the same program
    target = build_target(module, spec, path)
    where["stage"] = "building the model"
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

    def make_compiled() -> Any:
        fn = torch.compile(obj, **bench.compile_kwargs(target, job.mode))
        return bench.Model(fn, obj if is_module else None, args, job.step_begin)

    return eager, make_compiled


def _compile(job: ColdJob, result: ColdResult, where: dict[str, str],
             make_compiled: Callable[[], Any], compiled: Any, held: contextlib.ExitStack) -> Any:
    """The cold compile of each workload, timed from Dynamo's and Inductor's import on; the compiled
    Model. Its Inductor settings stay on in `held` (the process's remaining tasks call what it compiled)."""
    import torch

    from ....torch_text import cache_keys

    device, workloads = job.device, job.workloads

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)

    where["stage"] = "importing Dynamo and Inductor"
    t0 = time.perf_counter()
    import torch._dynamo  # noqa: F401 - what torch.compile's first call imports
    import torch._inductor.compile_fx  # noqa: F401
    result.import_s = time.perf_counter() - t0
    import torch._inductor.config as inductor_config

    from ..lines.provenance import timed_patch
    from . import per_frame as compile_frames
    from .per_line import recorded
    # what these compiles looked up in the FX-graph cache: why a later compile missed (`cache_keys`)
    # the timed compiles' settings (provenance tracking: `provenance.timed_patch`), so the warm compile hits this one's entries
    held.enter_context(inductor_config.patch(timed_patch()))
    # Dynamo's tracing per line (`compile.per_line`: its own trace_source records, a few ms a compile)
    with cache_keys.recorded() as result.fx_keys, recorded() as traced:
        for wl in workloads:
            where["stage"] = f"compiling the {'train step' if wl == 'train' else 'forward'}"
            sync()
            t0 = time.perf_counter()
            if compiled is None:  # the first workload's time includes torch.compile() itself
                compiled = make_compiled()
            compiled.run(wl)()
            sync()
            result.compile_s[wl] = time.perf_counter() - t0 + (result.import_s if wl == workloads[0] else 0.0)
    # the cold compile per frame (torch's compilation metrics), Dynamo's part of it per line
    result.compile_time = compile_frames.collect(traced, job.root)
    return compiled


def _problem(exc: Exception, job: ColdJob, stage: str) -> Any:
    """What went wrong, said for the stage it went wrong in."""
    from ....protocol import Problem
    from ...loader import describe
    from ..run import benchmark as bench

    path, device, line = job.path, job.device, job.spec.line
    if bench.is_oom(exc):
        return Problem("oom", f"out of memory on {device} while {stage}: {describe(exc)[:200]}",
                       path, line,
                       "use smaller example inputs (a smaller batch), or measure on another device")
    if stage == "importing":
        return Problem("import", f"importing {os.path.basename(path)} failed: {describe(exc)[:300]}",
                       path, None, "run the file with python to see the full error")
    return Problem("call", f"{stage} of `{job.spec.name}` failed: {describe(exc)[:300]}",
                   path, line,
                   "run the model under torch.compile in a plain script to see the full error")


def serve(run_job: Callable[[dict], dict], argv: list[str]) -> int:
    """A fresh child's whole life: the job from argv, its result into the job's result file (the
    parent reads only that: stdout is left to the user's prints). Also the levers' child."""
    job = json.loads(argv[1])
    watch_parent(exit_code=3)  # exit when the worker that started us goes away: no orphan compiles
    _write(job["result_path"], run_job(job))
    sys.stdout.flush()
    sys.stderr.flush()
    return 0


def run_json(data: dict[str, Any]) -> dict[str, Any]:
    """The process boundary: the job's JSON in, the result's JSON out (typed in between)."""
    from .cold_job import ColdJob

    return run(ColdJob.from_json(data)).json()


def main(argv: list[str]) -> int:
    return serve(run_json, argv)


if __name__ == "__main__":
    code = main(sys.argv)
    # Skip interpreter teardown (Inductor's compile pools, atexit hooks): the result is written.
    os._exit(code)
