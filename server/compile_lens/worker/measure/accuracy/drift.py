"""Where accuracy first drifts: the first module, in the order modules finish their forward, whose
compiled output differs from eager's beyond its dtype's tolerance while its inputs still agree.

Run only when the accuracy check found a difference beyond tolerance (`accuracy`). One more compile
of a copy of the model with a forward hook on every submodule that keeps the module's inputs and
output: Dynamo traces the hooks into the graph, so the kept values are the compiled graph's own
intermediate values (the extra graph outputs may change a fusion, never what a module computes). The
same hooks on the eager model, same weights and seed, give the other side. Modules finish children
first, so the first module that differs with agreeing inputs is the one that made the difference,
not its parent (whose output differs too) or a later one (whose inputs already differ). A difference
that starts between modules (code in a parent's `forward`) names that parent: its children agree and
its output does not.

For gradients (the outputs agree, the train step's gradients do not): the module whose own
parameters' gradients differ first in backward order (the reverse of the forward's); the gradients
flowing into it are not compared (`inputs_max_abs` None).

The line is the module's `forward` definition: a difference is not narrowed below a module.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Callable, Optional

import torch

from ....protocol import AccuracyDrift
from ..workload.model import seeded, tensors_in
from .compare import compare

Kept = list[tuple[str, list[torch.Tensor], list[torch.Tensor]]]  # (module name, inputs, outputs) in finishing order


def _hooked(model: torch.nn.Module, kept: Kept) -> list[Any]:
    handles = []
    for name, module in model.named_modules():
        if not name:
            continue  # the model itself: its output is what the accuracy check compared

        def keep(mod: Any, args: Any, out: Any, name: str = name) -> None:
            kept.append((name, [t.detach() for t in tensors_in(args)], [t.detach() for t in tensors_in(out)]))

        handles.append(module.register_forward_hook(keep))
    return handles


def _run(model: torch.nn.Module, call: Callable[[torch.nn.Module], Any]) -> Kept:
    kept: Kept = []
    handles = _hooked(model, kept)
    try:
        seeded(lambda: call(model))
    finally:
        for h in handles:
            h.remove()
    return kept


def _where(model: torch.nn.Module, name: str) -> tuple[Optional[str], Optional[int]]:
    """The file and `def forward` line of the module `name` (its class's own forward; "": the model's)."""
    try:
        forward = type(model.get_submodule(name)).forward
        return inspect.getsourcefile(forward), inspect.getsourcelines(forward)[1]
    except (OSError, TypeError, AttributeError):
        return None, None


def output_drift(eager: torch.nn.Module, args: tuple, compile_kwargs: dict[str, Any]) -> Optional[AccuracyDrift]:
    """The first module whose compiled output differs with its inputs agreeing (eval mode, no_grad);
    None when no module's does."""
    compiled = copy.deepcopy(eager).eval()
    eager.eval()
    torch._dynamo.reset()  # the hooks change the graph: a compile of its own, nothing cached reused
    fn = torch.compile(compiled, **compile_kwargs)

    def call(model: torch.nn.Module, fn: Any = fn) -> Any:
        with torch.no_grad():
            return (fn if model is compiled else model)(*args)

    try:
        expected, actual = _run(eager, call), _run(compiled, call)
    finally:
        torch._dynamo.reset()
    if [n for n, _, _ in expected] != [n for n, _, _ in actual]:
        return None  # the compiled run finished other modules (a branch taken differently): no pairing
    for (name, e_in, e_out), (_, c_in, c_out) in zip(expected, actual):
        out = compare(e_out, c_out)
        if not out["exceeds"] or out["problem"]:
            continue
        inputs = compare(e_in, c_in)
        if inputs["exceeds"] or inputs["problem"]:
            continue  # it received a difference made before it
        path, line = _where(eager, name)
        return AccuracyDrift(name, path, line, out["abs"], out["rel"], inputs["abs"], "output")
    return None


def grad_drift(eager: torch.nn.Module, args: tuple, grads_eager: list[tuple[str, Optional[torch.Tensor]]],
               grads_compiled: list[tuple[str, Optional[torch.Tensor]]]) -> Optional[AccuracyDrift]:
    """The module whose own parameters' gradients differ first in backward order: the reverse of the
    order modules finish their forward (one eager forward with the hooks, no_grad)."""

    def call(model: torch.nn.Module) -> Any:
        with torch.no_grad():
            return model(*args)

    finished = [name for name, _, _ in _run(eager, call)] + [""]  # the model's own parameters last
    pairs = {n: (e, c) for (n, e), (_, c) in zip(grads_eager, grads_compiled) if e is not None and c is not None}
    for module in reversed(finished):
        own = [pairs[key] for key in (f"{module}.{p}" if module else p for p, _ in
                                      eager.get_submodule(module).named_parameters(recurse=False)) if key in pairs]
        if not own:
            continue
        found = compare([e for e, _ in own], [c for _, c in own])
        if found["exceeds"] and not found["problem"]:
            path, line = _where(eager, module)
            return AccuracyDrift(module, path, line, found["abs"], found["rel"], None, "grad")
    return None


def measure(eager: torch.nn.Module, args: tuple, compile_kwargs: dict[str, Any], grads: Callable[[], tuple]) -> AccuracyDrift:
    """Where the difference the accuracy check found starts: a module's output; else, with outputs
    that agree module by module, the first module's own gradients in backward order (`grads()`: the
    eager and compiled gradients, as the accuracy check takes them); else the model's own forward."""
    found = output_drift(eager, args, compile_kwargs)
    if found is None:
        eager.train()
        found = grad_drift(eager, args, *grads())
    if found is None:
        path, line = _where(eager, "")
        found = AccuracyDrift("", path, line, None, None, None, "output")
    return found


def after_accuracy(job: Any, eager: Any, compiled_obj: torch.nn.Module, limit: float) -> AccuracyDrift:
    """`benchmark`'s step when the accuracy check found a difference beyond tolerance (`job`, `eager`:
    its `_Job` and `_Eager`); the drift's words join the measurement's notes."""
    from ..workload.model import Model, compile_kwargs
    from .compare import _grads

    job.stage("finding where accuracy drifts", f"finding where {job.name}'s accuracy first drifts…", limit_s=limit)
    kwargs = compile_kwargs(job.target, job.mode)
    compiled = Model(torch.compile(compiled_obj, **kwargs), compiled_obj, eager.args, job.step_begin)
    found = measure(eager.obj, eager.args, kwargs, lambda: (_grads(eager.model, 0), _grads(compiled, 0)))
    job.notes.append(words(found))
    return found


def words(drift: AccuracyDrift) -> str:
    """`accuracy drift: output first differs at `blocks.1.scale` (model.py:4): max abs 0.0165, max rel 0.0101;
    its inputs agree to 2.38e-07`: the note the hover, the CLI and the report show."""
    import os

    where = f" ({os.path.basename(drift.path)}:{drift.line})" if drift.path and drift.line else ""
    what, verb = ("output", "differs") if drift.of == "output" else ("gradients", "differ")
    if not drift.module:
        return (f"accuracy drift: no submodule's {what} {verb} with its inputs agreeing: the difference is made in "
                f"the model's own forward{where}")
    text = f"accuracy drift: {what} first {verb} at `{drift.module}`{where}: max abs {drift.max_abs:.3g}, max rel {drift.max_rel:.3g}"
    if drift.inputs_max_abs is not None:
        text += f"; its inputs agree to {drift.inputs_max_abs:.3g}"
    return text
