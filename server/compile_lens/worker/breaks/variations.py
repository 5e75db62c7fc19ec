"""The input variations of a recompile sweep: what a user's real calls would change.

Each variation is a new argument tuple (or a switch of module or global state) built from the
target's example inputs: other batch sizes and sequence lengths (values repeated or cut, so integer
indices stay valid), other Python scalars, train/eval, requires_grad, autocast, the user's declared
variants and recorded shapes; and, for the recompile-limit probe, endless new values of one input.
"""

from __future__ import annotations

import inspect
import itertools
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Callable

import torch


@dataclass
class Variation:
    label: str
    args: tuple
    declared: bool = False  # declared, recorded and base calls: report torch's first line
    context: Callable[[], Any] | None = None  # a context manager factory (autocast)
    setup: Callable[[], None] | None = None
    teardown: Callable[[], None] | None = None


def _resized(t: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    """`t` with dimension `dim` of length `size`, repeating or cutting its own values."""
    old = t.shape[dim]
    base = t.detach()
    if size > old:
        reps = [1] * t.dim()
        reps[dim] = math.ceil(size / max(old, 1))
        base = base.repeat(*reps) if old > 0 else _fresh(t, [*t.shape[:dim], size, *t.shape[dim + 1:]])
    out = base.narrow(dim, 0, size).clone()
    return _like(out, t)


def _fresh(t: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """A new tensor of another shape with values of the same kind as `t`'s."""
    if t.dtype == torch.bool:
        out = torch.zeros(shape, dtype=t.dtype, device=t.device)
    elif t.is_floating_point() or t.is_complex():
        out = torch.randn(shape, device=t.device).to(t.dtype)
    else:
        hi = int(t.max().item()) + 1 if t.numel() else 2
        lo = int(t.min().item()) if t.numel() else 0
        out = torch.randint(lo, max(hi, lo + 1), shape, dtype=t.dtype, device=t.device)
    return _like(out, t)


def _like(out: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    if t.requires_grad and (out.is_floating_point() or out.is_complex()):
        out.requires_grad_(True)
    for attr in ("_dynamo_dynamic_indices", "_dynamo_weak_dynamic_indices",
                 "_dynamo_static_indices", "_dynamo_unbacked_indices"):
        value = getattr(t, attr, None)
        if value is not None:
            try:
                setattr(out, attr, type(value)(value))
            except Exception:  # noqa: BLE001
                pass
    return out


def _reshaped(t: torch.Tensor, shape: list[int]) -> torch.Tensor:
    if len(shape) != t.dim():
        return _fresh(t, shape)
    out = t
    for dim, size in enumerate(shape):
        if out.shape[dim] != size:
            out = _resized(out, dim, size)
    return out


def _tensors(args: tuple) -> list[int]:
    return [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]


def _batch_sizes(b: int) -> list[int]:
    odd = next((n for n in range(b - 1, 1, -1) if n % 2), None)
    sizes = [max(2 * b, 2), odd if odd is not None else 2 * b + 1]
    return [s for s in dict.fromkeys(sizes) if s != b]


def batch_variations(args: tuple) -> list[Variation]:
    idx = [i for i in _tensors(args) if args[i].dim() >= 1]
    if not idx:
        return []
    b = args[idx[0]].shape[0]
    same = [i for i in idx if args[i].shape[0] == b]
    out = []
    for size in _batch_sizes(b):
        new = list(args)
        for i in same:
            new[i] = _resized(args[i], 0, size)
        out.append(Variation(f"batch {size}", tuple(new)))
    return out


def _is_sequence_like(t: torch.Tensor) -> bool:
    integer = not (t.is_floating_point() or t.is_complex()) and t.dtype != torch.bool
    return (integer and t.dim() >= 2) or (t.is_floating_point() and t.dim() == 3)


def sequence_variations(args: tuple) -> list[Variation]:
    seq = [i for i in _tensors(args) if _is_sequence_like(args[i])]
    if not seq:
        return []
    first = args[seq[0]]
    b, length = first.shape[0], first.shape[1]
    same = [i for i in _tensors(args)
            if args[i].dim() >= 2 and args[i].shape[0] == b and args[i].shape[1] == length]
    sizes = [length + 1, length - 1 if length - 1 >= 2 else length + 2]
    out = []
    for size in dict.fromkeys(sizes):
        new = list(args)
        for i in same:
            new[i] = _resized(args[i], 1, size)
        out.append(Variation(f"sequence {size}", tuple(new)))
    return out


def _float_inputs(args: tuple) -> list[int]:
    return [i for i in _tensors(args) if args[i].is_floating_point()]


def requires_grad_variation(args: tuple) -> list[Variation]:
    floats = _float_inputs(args)
    if not floats:
        return []
    flag = not args[floats[0]].requires_grad
    new = list(args)
    for i in floats:
        new[i] = _like(args[i].detach().clone(), args[i]).requires_grad_(flag)
    return [Variation(f"requires_grad={flag}", tuple(new))]


def autocast_variation(args: tuple, obj: Any) -> list[Variation]:
    has_float = bool(_float_inputs(args))
    if isinstance(obj, torch.nn.Module):
        has_float = has_float or any(p.is_floating_point() for p in obj.parameters())
    try:
        already = torch.is_autocast_enabled()
    except Exception:  # noqa: BLE001
        already = False
    if not has_float or already:
        return []
    tensors = [args[i] for i in _tensors(args)]
    params = list(obj.parameters()) if isinstance(obj, torch.nn.Module) else []
    device = (tensors or params)[0].device.type if (tensors or params) else "cpu"
    dtype = torch.bfloat16 if device == "cpu" else torch.float16
    available = getattr(getattr(torch.amp, "autocast_mode", None), "is_autocast_available", None)
    try:
        if available is not None and not available(device):
            return []
    except Exception:  # noqa: BLE001
        return []
    name = str(dtype).replace("torch.", "")
    return [Variation(f"autocast {name}", args,
                       context=lambda: torch.autocast(device_type=device, dtype=dtype))]


def mode_variation(args: tuple, obj: Any) -> list[Variation]:
    if not isinstance(obj, torch.nn.Module):
        return []
    was = obj.training
    return [Variation("eval mode" if was else "train mode", args,
                       setup=lambda: obj.train(not was), teardown=lambda: obj.train(was))]


def param_names(obj: Any, args: tuple) -> list[str]:
    fn = obj.forward if isinstance(obj, torch.nn.Module) else obj
    names = [f"arg{i}" for i in range(len(args))]
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return names
    for i in range(len(args)):
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                                  params[i].POSITIONAL_OR_KEYWORD):
            names[i] = params[i].name
        elif any(p.kind == p.VAR_POSITIONAL for p in params):
            star = next(p for p in params if p.kind == p.VAR_POSITIONAL)
            before = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
            names[i] = f"{star.name}[{i - before}]"
    return names


def _string_constants(obj: Any) -> list[str]:
    fn = type(obj).forward if isinstance(obj, torch.nn.Module) else obj
    code = getattr(inspect.unwrap(fn), "__code__", None)
    found: list[str] = []
    stack = [code] if code is not None else []
    while stack:
        c = stack.pop()
        for const in c.co_consts:
            if isinstance(const, str) and re.fullmatch(r"[\w.\-]{1,32}", const):
                found.append(const)
            elif inspect.iscode(const):
                stack.append(const)
    return list(dict.fromkeys(found))


def _new_values(value: Any, strings: list[str], count: int = 2) -> list[Any]:
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        if value < 0:
            return [value - k for k in range(1, count + 1)]
        out, c = [], value + 1
        while len(out) < count:
            if c >= 2:
                out.append(c)
            c += 2
        return out
    if isinstance(value, float):
        return [value * k for k in range(2, count + 2)] if value else [0.5 * k for k in range(1, count + 1)]
    if isinstance(value, str):
        picks = [s for s in strings if s != value][:count]
        return picks + [f"{value}_{k}" for k in range(2, 2 + count - len(picks))]
    return []


def _scalar_label(name: str, value: Any) -> str:
    return f"{name}={value!r}" if isinstance(value, str) else f"{name}={value}"


def scalar_variations(args: tuple, obj: Any, names: list[str]) -> list[Variation]:
    out = []
    strings: list[str] | None = None
    for i, value in enumerate(args):
        if not isinstance(value, (bool, int, float, str)):
            continue
        if isinstance(value, str) and strings is None:
            strings = _string_constants(obj)
        for new in _new_values(value, strings or []):
            changed = list(args)
            changed[i] = new
            out.append(Variation(_scalar_label(names[i], new), tuple(changed)))
    return out


def recorded_variations(args: tuple, recorded: Iterable[Any]) -> list[Variation]:
    tensor_idx = _tensors(args)
    base = [list(args[i].shape) for i in tensor_idx]
    seen: list[list[list[int]]] = []
    out = []
    for call in recorded:
        shapes = _normalise_call(call, args, tensor_idx)
        if shapes is None or shapes == base or shapes in seen:
            continue
        seen.append(shapes)
        new = list(args)
        for i, shape in zip(tensor_idx, shapes):
            new[i] = _reshaped(args[i], shape)
        label = ", ".join(str(tuple(s)) for s in shapes)
        out.append(Variation(f"recorded shape {label}", tuple(new), declared=True))
    return out


def _normalise_call(call: Any, args: tuple, tensor_idx: list[int]) -> list[list[int]] | None:
    """The shapes of one recorded call, one per tensor argument; None if they do not fit."""
    try:
        items = list(call)
    except TypeError:
        return None
    if items and all(isinstance(v, int) for v in items):
        items = [items]  # a single tensor's shape
    if len(items) == len(args) and len(args) != len(tensor_idx):
        items = [items[i] for i in tensor_idx]
    shapes = []
    for item in items[:len(tensor_idx)]:
        if not isinstance(item, (list, tuple)) or not all(isinstance(v, int) for v in item):
            return None
        shapes.append([int(v) for v in item])
    return shapes if len(shapes) == len(tensor_idx) and shapes else None


def probe_plans(args: tuple, names: list[str], scalars: set[str], sizes: set[str],
                 tried: list[tuple], count: int) -> Iterator[list[tuple[str, tuple]]]:
    """For each specialised scalar argument or tensor batch size: `count` values not tried yet."""
    for i, value in enumerate(args):
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float, str)) and names[i] in scalars:
            used = {a[i] for a in tried if len(a) > i and isinstance(a[i], (int, float, str))}
            values = itertools.islice((v for v in _endless(value) if v not in used), count)
            yield [(_scalar_label(names[i], v), args[:i] + (v,) + args[i + 1:]) for v in values]
        elif isinstance(value, torch.Tensor) and value.dim() >= 1 and names[i] in sizes:
            b = value.shape[0]
            used = {a[i].shape[0] for a in tried
                    if len(a) > i and isinstance(a[i], torch.Tensor) and a[i].dim() >= 1}
            new_sizes = itertools.islice(
                (n for n in itertools.count(2) if n not in used and n != b), count)
            same = [j for j in _tensors(args) if args[j].dim() >= 1 and args[j].shape[0] == b]
            plan = []
            for size in new_sizes:
                new = list(args)
                for j in same:
                    new[j] = _resized(args[j], 0, size)
                plan.append((f"batch {size}", tuple(new)))
            yield plan


def _endless(value: Any) -> Iterator[Any]:
    if isinstance(value, int):
        return (value + k for k in itertools.count(1) if value + k >= 2)
    if isinstance(value, float):
        return (value + 0.5 * k for k in itertools.count(1))
    return (f"{value}_{k}" for k in itertools.count(2))
