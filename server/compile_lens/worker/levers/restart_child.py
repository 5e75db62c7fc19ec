"""`python -m compile_lens.worker.levers.restart_child <job json>`: one restart path of the
`aot_artifact` lever, each in a fresh process with an empty Inductor cache (`aot_artifact` starts them):

- "default": the default compile's cold and warm first call (`child.run`), then torch's Mega-Cache
  (`torch.compiler.save_cache_artifacts`) written to `job["mega"]`: what a team would ship;
- "mega_load": `torch.compiler.load_cache_artifacts` of that file, then `torch.compile` and the first call;
- "aot_save": `torch.compile(fullgraph=True).aot_compile(...)` at the example inputs (eval, no_grad,
  as the first call runs), the artifact written by `save_compiled_function` to `job["aot"]`;
- "aot_load": `torch.compiler.load_compiled_function` of that file and the first call, its output
  checked against the eager model's.

A restart's seconds run from importing Dynamo and Inductor to the end of the first call, as the cold
compile's do (`child`); building the model is outside them on every path. A target Dynamo cannot
trace to one graph comes back as `{"graph_breaks": torch's message}`: `aot_compile` needs one graph;
one whose guards torch cannot save as `{"unsaveable": torch's message}` (a guard on an object's
identity, `ID_MATCH`, as transformers' GPT-2 has on torch 2.13).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict
from typing import Any, Callable

from .child import _build, _cpu_s, descendants_cpu_s
from .child import run as run_side


def run(job: dict[str, Any]) -> dict[str, Any]:
    from ..loader import TargetError
    from ..measure.compile.bench_child import _problem

    task = job["task"]
    if task == "default":
        result = run_side(job)
        if "error" not in result:
            result.update(_save_mega(job["mega"]))
        return result
    result: dict[str, Any] = {}
    where = {"stage": "importing"}
    try:
        calls, model_of = _build(dict(job, variant="as_written"), where)
        args, model = calls[0], model_of()
        reference = _eager_output(model, args) if task == "aot_load" else None  # before the clock starts
        where["stage"] = f"restarting ({task})"
        t0, cpu0 = time.perf_counter(), _cpu_s()
        import torch
        import torch._dynamo  # noqa: F401 - what torch.compile's first call imports
        import torch._inductor.compile_fx  # noqa: F401

        with torch.no_grad():
            if task == "aot_save":
                result.update(_aot_save(job, model, args))
            elif task == "aot_load":
                result.update(_aot_load(job["aot"], model, args, reference))
            elif task == "mega_load":
                result.update(_mega_load(job, model, args))
            else:
                raise ValueError(f"unknown restart task {task!r}")
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        result["cold_s"] = time.perf_counter() - t0
        result["cold_cpu_s"] = _cpu_s() - cpu0
        result["descendants_cpu_s"] = descendants_cpu_s()
    except TargetError as exc:
        result["error"] = asdict(exc.problem)
    except Exception as exc:  # noqa: BLE001 - user code or a compile failure: report it
        if job["task"] == "aot_save" and _is_graph_break(exc):
            return {"graph_breaks": _first_line(exc)}
        if job["task"] == "aot_save" and "cannot be serialized" in str(exc):  # e.g. torch's ID_MATCH guards
            return {"unsaveable": f"{type(exc).__name__}: {_first_line(exc).rstrip('.')}"}
        result["error"] = asdict(_problem(exc, job, where["stage"]))
    return result


def _entry(model: Any) -> tuple[Callable, Callable[[tuple], tuple]]:
    """What `aot_compile` compiles, and the arguments it takes: a module's `forward` takes the module
    (the artifact holds the code, never the weights), a function its own arguments."""
    import torch

    model = getattr(model, "_orig_mod", model)  # a module the user's file compiled already: its own forward
    if isinstance(model, torch.nn.Module):
        return type(model).forward, lambda args: (model, *args)
    return model, lambda args: tuple(args)


def _aot_save(job: dict[str, Any], model: Any, args: tuple) -> dict[str, Any]:
    import torch

    from .variants import mode_kwargs

    fn, with_model = _entry(model)
    kwargs = mode_kwargs(job.get("compile_kwargs") or {})
    compiled = torch.compile(fn, **{**kwargs, "fullgraph": True}).aot_compile((with_model(args), {}))
    compiled(*with_model(args))
    compiled.save_compiled_function(job["aot"])
    return {"bytes": os.path.getsize(job["aot"])}


def _eager_output(model: Any, args: tuple) -> Any:
    import torch

    from ..measure.workload.model import first_float_tensor

    with torch.no_grad():
        return first_float_tensor(model(*args))


def _aot_load(path: str, model: Any, args: tuple, want: Any) -> dict[str, Any]:
    """The artifact loaded and called; the largest difference of its output from the eager one."""
    import torch

    from ..measure.workload.model import first_float_tensor

    _, with_model = _entry(model)
    with open(path, "rb") as f:
        loaded = torch.compiler.load_compiled_function(f)
    out = first_float_tensor(loaded(*with_model(args)))
    same = out is not None and want is not None and out.shape == want.shape
    return {"max_abs_error": float((out.float() - want.float()).abs().max()) if same else None}


def _mega_load(job: dict[str, Any], model: Any, args: tuple) -> dict[str, Any]:
    import torch

    from .variants import mode_kwargs

    with open(job["mega"], "rb") as f:
        info = torch.compiler.load_cache_artifacts(f.read())
    torch.compile(model, **mode_kwargs(job.get("compile_kwargs") or {}))(*args)
    counts = {name: len(v) for name in ("inductor_artifacts", "aot_autograd_artifacts", "pgo_artifacts")
              if hasattr(v := getattr(info, name, None), "__len__")}
    return {"artifacts": counts}


def _save_mega(path: str) -> dict[str, Any]:
    """The default compile's Mega-Cache in `path`, or why there is none."""
    import torch

    save = getattr(torch.compiler, "save_cache_artifacts", None)
    if save is None:
        return {"mega_missing": f"torch {torch.__version__} has no torch.compiler.save_cache_artifacts"}
    saved = save()
    if not saved or not saved[0]:
        return {"mega_missing": "torch saved no cache artifacts for the default compile"}
    with open(path, "wb") as f:
        f.write(saved[0])
    return {"mega_bytes": len(saved[0])}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _is_graph_break(exc: BaseException) -> bool:
    """The fullgraph trace stopped at a graph break (torch's `Unsupported`, or aot_compile's refusal)."""
    from torch._dynamo.exc import Unsupported

    return isinstance(exc, Unsupported) or "Graph breaks are not supported" in str(exc)


def main(argv: list[str]) -> int:
    from ..measure.compile.bench_child import serve

    return serve(run, argv)


if __name__ == "__main__":
    code = main(sys.argv)
    os._exit(code)  # skip interpreter teardown (Inductor's compile pools): the result is written
