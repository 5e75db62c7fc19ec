"""Eager vs compiled accuracy: outputs of one forward (eval, no_grad) and parameter gradients of one
backward (train), same weights and seed, compared per dtype's tolerance (`TOLERANCES`)."""

from __future__ import annotations

from typing import Any, Optional

import torch

from ....protocol import Precision
from ..run.isolated import isolated
from ..workload import precision
from ..workload.model import Model, seeded, tensors_in

TOLERANCES = {  # dtype -> (rtol, atol) for eager vs compiled; fusion reorders float arithmetic
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (5e-2, 1e-2),
}


def tolerance(dtypes: list[torch.dtype]) -> tuple[float, float]:
    """The loosest (rtol, atol) of the dtypes compared."""
    pairs = [TOLERANCES.get(d, TOLERANCES[torch.float32]) for d in dtypes] or [TOLERANCES[torch.float32]]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def compare(expected: list[torch.Tensor], actual: list[torch.Tensor]) -> dict[str, Any]:
    """max abs / max rel (to the tensor's scale) difference, and whether any element is out of tolerance."""
    result: dict[str, Any] = {"abs": 0.0, "rel": 0.0, "exceeds": False, "problem": None, "dtype": None}
    if len(expected) != len(actual):
        result["problem"] = f"{len(actual)} tensors instead of {len(expected)}"
        return result
    dtypes = [t.dtype for t in expected if t.is_floating_point()]
    # under autocast (or TF32) an fp32 output was computed through bf16/fp16 (TF32) ops: held to their tolerance
    floor = precision.tolerance_dtype()
    rtol, atol = tolerance(dtypes + ([floor] if floor is not None and dtypes else []))
    result["dtype"] = str(max(dtypes, key=lambda d: TOLERANCES.get(d, (0, 0))[0])).replace("torch.", "") if dtypes else None
    if floor is not None and dtypes and TOLERANCES[floor][0] >= tolerance(dtypes)[0]:
        result["dtype"] = f"{str(floor).replace('torch.', '')} ({(precision.current() or Precision()).value})"
    for e, a in zip(expected, actual):
        if e.shape != a.shape:
            result["problem"] = f"shape {tuple(a.shape)} instead of {tuple(e.shape)}"
            return result
        e64, a64 = e.detach().double().cpu(), a.detach().double().cpu()
        both_nan = e64.isnan() & a64.isnan()
        if bool((e64.isnan() ^ a64.isnan()).any()):
            result["problem"] = "NaN in one result but not the other"
            return result
        diff = torch.where(both_nan, torch.zeros_like(e64), (e64 - a64).abs())
        diff = torch.nan_to_num(diff, nan=0.0, posinf=0.0)  # equal infinities give inf - inf = nan
        if diff.numel() == 0:
            continue
        scale = float(torch.nan_to_num(e64.abs(), nan=0.0, posinf=0.0).max())
        worst = float(diff.max())
        result["abs"] = max(result["abs"], worst)
        result["rel"] = max(result["rel"], worst / max(scale, atol))
        limit = atol + rtol * torch.nan_to_num(e64.abs(), nan=0.0)
        if bool((diff > limit).any()):
            result["exceeds"] = True
    result["rtol"], result["atol"] = rtol, atol
    return result


def _output_accuracy(eager: Model, compiled: Model, errors: dict[str, Any], notes: list[str],
                     compiled_out: Any = None) -> None:
    """Outputs of one forward (eval mode, no_grad, same seed) of eager vs compiled."""
    eager.use(False)
    compiled.use(False)
    out_e = [t.clone() for t in tensors_in(seeded(eager.forward))]
    out_c = [t.clone() for t in tensors_in(compiled_out if compiled_out is not None else seeded(compiled.forward))]
    again = [t.clone() for t in tensors_in(seeded(eager.forward, seed=1))]
    itself = compare(out_e, again)["abs"]
    _record(compare(out_e, out_c), "output", errors, notes, itself)


def compare_workload(wl: str, eager: Model, compiled: Model, errors: dict[str, Any], notes: list[str], first: Any,
                     unmeasured: dict[str, str]) -> None:
    """The comparison for workload `wl` ("forward" | "train"), `first` the compiled side's first
    call; `isolated`: a comparison that fails leaves its figures unset and says why in `unmeasured`
    (the figures are only set once a comparison finishes, `_record`)."""
    with isolated("accuracy", unmeasured):
        if wl == "forward":
            _output_accuracy(eager, compiled, errors, notes, first)
        else:
            _grad_accuracy(eager, compiled, errors, notes, first)


def _grads(model: Model, seed: int) -> list[tuple[str, Optional[torch.Tensor]]]:
    assert model.module is not None
    model.use(True)
    model.zero_grad()
    seeded(model.loss_backward, seed)
    grads = [(n, None if p.grad is None else p.grad.detach().clone()) for n, p in model.module.named_parameters()]
    model.zero_grad()
    return grads


def _grad_accuracy(eager: Model, compiled: Model, errors: dict[str, Any], notes: list[str],
                   compiled_grads: Optional[list[tuple[str, Optional[torch.Tensor]]]] = None) -> None:
    """Parameter gradients after one backward (train mode, same weights and seed)."""
    eager.use(True)
    compiled.use(True)
    ge, gc_ = _grads(eager, 0), (compiled_grads if compiled_grads is not None else _grads(compiled, 0))
    itself = compare([g for _, g in ge if g is not None], [g for _, g in _grads(eager, 1) if g is not None])["abs"]
    expected, actual = [], []
    for (name, e), (_, c) in zip(ge, gc_):
        if e is None and c is None:
            continue
        if e is None or c is None:
            notes.append(f"accuracy: the gradient of `{name}` is missing in the "
                         f"{'eager' if e is None else 'compiled'} model")
            errors["exceeds"] = True
            continue
        expected.append(e)
        actual.append(c)
    _record(compare(expected, actual), "grad", errors, notes, itself)


def _record(cmp: dict[str, Any], what: str, errors: dict[str, Any], notes: list[str], itself: float) -> None:
    """Keep one comparison's figures and say what is wrong. A model that draws random numbers
    (dropout in training, `rand_like`) differs from itself under another seed (`itself`, its largest
    difference), and Inductor draws them differently: its comparison says nothing about accuracy,
    so it is reported as not made rather than as a difference."""
    label = "outputs" if what == "output" else "gradients"
    if itself > 0 and not cmp["problem"]:
        notes.append(f"accuracy not compared: {label} — the model draws random numbers "
                     f"({'in training, e.g. dropout' if what == 'grad' else 'in forward'}: eager against itself "
                     f"with another seed differs by up to {itself:.3g}), and Inductor draws them differently; "
                     "torch._inductor.config.fallback_random = True makes them match eager's")
        return
    if cmp["problem"]:
        notes.append(f"accuracy: compiled {label} differ: {cmp['problem']}")
        errors["exceeds"] = True
        return
    errors[f"{what}_abs"], errors[f"{what}_rel"] = cmp["abs"], cmp["rel"]
    if cmp["exceeds"]:
        errors["exceeds"] = True
        notes.append(f"accuracy: compiled {label} differ from eager by up to {cmp['abs']:.3g} "
                     f"(relative {cmp['rel']:.3g}), beyond {cmp['dtype'] or 'float32'} tolerance "
                     f"(rtol {cmp['rtol']:g}, atol {cmp['atol']:g})")
