"""How each side of a lever is compiled, by name: the same code builds it in the fresh child (cold
and warm compile) and in the worker (steady time), so both figures are of one program.

- "as_written": the model called as it is (after a regional edit, it compiles its own blocks);
- "default": `torch.compile(model)`, with the mode and the decorator's options the measurement uses;
- "regional": each repeated block compiled once and reused (`block.compile()`), the rest eager;
- "dynamic": `torch.compile(model, dynamic=True)`;
- "static": `torch.compile(model, dynamic=False)`;
- "guard_filter:<name>": `torch.compile(model, options={"guard_filter_fn": torch.compiler.<name>})`;
- "cudagraphs": `torch.compile(model, mode="reduce-overhead")` (CUDA graphs, on a GPU);
- "autotune": `torch.compile(model, mode="max-autotune-no-cudagraphs")` (kernel autotuning, on a GPU).
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from .blocks import modules_of, repeated_blocks

GUARD_FILTERS = {  # torch.compiler's filters, each with the assumption it makes (pytorch#155083)
    "skip_guard_on_inbuilt_nn_modules_unsafe":
        "torch.nn's own modules (Linear, LayerNorm…) keep their attributes after the first call",
    "skip_guard_on_all_nn_modules_unsafe":
        "no module (yours included) changes an attribute the forward reads after the first call",
    "skip_guard_on_globals_unsafe":
        "no global the forward reads changes after the first call",
}


def guard_filters() -> dict[str, str]:
    """The guard filters this torch has, with their assumptions."""
    return {name: words for name, words in GUARD_FILTERS.items() if callable(getattr(torch.compiler, name, None))}


def compile_variant(variant: str, obj: Any, kwargs: dict[str, Any]) -> Any:
    """`obj` compiled the way `variant` says (`kwargs`: the measurement's own `torch.compile` arguments)."""
    if variant == "as_written":  # the model compiles what it compiles itself (an applied regional edit)
        return obj
    if variant == "default":
        return torch.compile(obj, **kwargs)
    if variant == "regional":
        blocks = repeated_blocks(obj)
        if blocks is None:
            raise ValueError("no repeated blocks to compile one by one")
        for block in modules_of(obj, blocks):
            block.compile(**kwargs)
        return obj
    if variant in ("dynamic", "static"):
        return torch.compile(obj, **{**kwargs, "dynamic": variant == "dynamic"})
    if variant == "cudagraphs":
        return torch.compile(obj, **{**kwargs, "mode": "reduce-overhead"})
    if variant == "autotune":
        return torch.compile(obj, **{**kwargs, "mode": "max-autotune-no-cudagraphs"})
    if variant.startswith("guard_filter:"):
        name = variant.split(":", 1)[1]
        if kwargs.get("mode") is not None:  # torch takes `mode=` or `options=`, never both
            raise ValueError(f"a guard filter is an `options=` entry, which torch refuses beside mode={kwargs['mode']!r}")
        return torch.compile(obj, **mode_kwargs(kwargs), options={"guard_filter_fn": getattr(torch.compiler, name)})
    raise ValueError(f"unknown variant {variant!r}")


def mode_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`torch.compile` arguments without a None mode (`options=` and `mode=` cannot be given together)."""
    return {k: v for k, v in kwargs.items() if not (k == "mode" and v is None)}


def shape_label_ok(label: Optional[str]) -> bool:
    return bool(label) and (label.startswith("batch ") or label.startswith("sequence "))
