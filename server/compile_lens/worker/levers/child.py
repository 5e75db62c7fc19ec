"""`python -m compile_lens.worker.levers.child <job json>`: one side of a lever (`variants`) compiled
in a fresh process with an empty Inductor cache (the parent's `measure.compile.cold.run_child`).

- cold: `import torch._dynamo` and Inductor, the compile call and the first forward (eval, no_grad),
  as the measurement's cold compile is timed (`measure/compile/bench_child`); then, with `shapes`, one call
  at each of those input shapes (the recompile sweep's), each compile it causes included;
- warm: Dynamo reset and Inductor's in-memory caches cleared, the same calls again: they read the
  on-disk caches the cold calls filled, as re-running an unchanged script does;
- compiles: the frames compiled during the cold calls (torch's compilation metrics), and how many
  of them were recompiles (a compile id "N/k" with k > 0).

The result travels in the file named by `result_path`, as bench_child's does.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict
from typing import Any, Callable


def run(job: dict[str, Any]) -> dict[str, Any]:
    from ..loader import TargetError
    from ..measure.compile.bench_child import _problem

    result: dict[str, Any] = {}
    where = {"stage": "importing"}
    try:
        calls, compile_it = _build(job, where)
        where["stage"] = "importing Dynamo and Inductor"
        t0 = time.perf_counter()
        import torch._dynamo  # noqa: F401 - what torch.compile's first call imports
        import torch._inductor.compile_fx  # noqa: F401
        import_s = time.perf_counter() - t0
        from ..measure.compile.dynamo_watch import _clear_in_memory_caches

        torch._dynamo.utils.clear_compilation_metrics()
        where["stage"] = f"compiling ({job['variant']})"
        cpu0 = _cpu_s()
        result["cold_s"] = import_s + _first_calls(compile_it, calls)
        result["cold_cpu_s"] = _cpu_s() - cpu0  # what load on the machine barely changes (`judge`)
        ids = [str(getattr(m, "compile_id", "") or "") for m in torch._dynamo.utils.get_compilation_metrics()]
        result["compiles"] = len(ids)
        result["recompiles"] = sum(1 for i in ids if "/" in i and not i.rstrip("]").endswith("/0"))
        where["stage"] = f"compiling again from the disk cache ({job['variant']})"
        _clear_in_memory_caches()
        result["warm_s"] = import_s + _first_calls(compile_it, calls)
        result["descendants_cpu_s"] = descendants_cpu_s()  # ours, though the parent cannot wait for them
    except TargetError as exc:
        result["error"] = asdict(exc.problem)
    except Exception as exc:  # noqa: BLE001 - user code or a compile failure: report it
        result["error"] = asdict(_problem(exc, job, where["stage"]))
    return result


def _build(job: dict[str, Any], where: dict[str, str]) -> tuple[list[tuple], Callable[[], Callable]]:
    """The argument tuples to call with, and how to compile a fresh copy of the model as `variant` says."""
    import copy

    import torch

    from ...protocol import TargetSpec, from_dict
    from ..breaks.variations import batch_variations, sequence_variations
    from ..loader import build_target, import_file
    from ..measure.workload.devices import to_device
    from ..measure.workload.model import compile_kwargs
    from .variants import compile_variant

    path, device = job["path"], job["device"]
    module = import_file(path, job["root"])
    target = build_target(module, from_dict(TargetSpec, job["spec"]), path)
    where["stage"] = "building the model"
    base = target.make()
    if isinstance(base, torch.nn.Module):
        base = base.to(device).eval()
    args = to_device(target.args, device)
    calls = [args]
    wanted = set(job.get("shapes") or ())
    if wanted:
        calls += [v.args for v in batch_variations(args) + sequence_variations(args) if v.label in wanted]
    kwargs = compile_kwargs(target, job["mode"])

    def compile_it() -> Callable:
        # a fresh copy for each variant that compiles something; the model as written keeps the
        # compiled blocks its own code set up (a deepcopy would not carry them)
        fresh = isinstance(base, torch.nn.Module) and job["variant"] != "as_written"
        return compile_variant(job["variant"], copy.deepcopy(base) if fresh else base, kwargs)

    return calls, compile_it


def _first_calls(compile_it: Callable[[], Callable], calls: list[tuple]) -> float:
    """Seconds from `torch.compile` to the end of one call at each argument tuple."""
    import torch

    t0 = time.perf_counter()
    fn = compile_it()
    with torch.no_grad():
        for args in calls:
            fn(*args)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def _cpu_s() -> float:
    """This process's CPU time, its waited-for children's, and its live descendants' (Inductor's
    compile workers run for the process's whole life and are never waited for: without them a cold
    compile's C++ builds would not count, while a load that builds inline would)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + descendants_cpu_s()


def descendants_cpu_s() -> float:
    """The CPU time of this process's live descendants (their own, and their waited-for children's)."""
    import contextlib

    import psutil

    total = 0.0
    with contextlib.suppress(psutil.Error):
        for proc in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                t = proc.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
    return total


def main(argv: list[str]) -> int:
    from ..measure.compile.bench_child import serve

    return serve(run, argv)


if __name__ == "__main__":
    code = main(sys.argv)
    os._exit(code)  # skip interpreter teardown (Inductor's compile pools): the result is written
