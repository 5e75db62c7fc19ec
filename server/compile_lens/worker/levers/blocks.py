"""The repeated children of a model: a `ModuleList`/`Sequential` of one class, or two or more
attributes of one class. Regional compilation compiles one of them and reuses it for the rest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

MIN_BLOCKS = 2


@dataclass
class Blocks:
    attribute: str  # "blocks", "transformer.h", or "" for attributes of the model itself
    names: list[str]  # the children's dotted names in the model ("blocks.0", ..., or "enc1", "enc2")
    block_class: str  # "Block"
    parameters: int  # in all the blocks: the biggest group is the one regional compilation is about

    @property
    def count(self) -> int:
        return len(self.names)


def _is_torch_own(cls: type) -> bool:
    """A torch.nn layer (Linear, LayerNorm): compiling one alone is not regional compilation."""
    return cls.__module__.startswith("torch.")


def repeated_blocks(model: nn.Module) -> Optional[Blocks]:
    """The group of repeated children with the most parameters, or None when nothing repeats."""
    found: list[Blocks] = []
    for prefix, module in model.named_modules():
        children = list(module.named_children())
        if isinstance(module, (nn.ModuleList, nn.Sequential)):
            groups = {type(c) for _, c in children}
            if len(children) >= MIN_BLOCKS and len(groups) == 1 and not _is_torch_own(next(iter(groups))):
                found.append(_group(prefix, [n for n, _ in children], children))
            continue
        by_class: dict[type, list[tuple[str, nn.Module]]] = {}
        for name, child in children:
            if not isinstance(child, (nn.ModuleList, nn.Sequential, nn.ModuleDict)):
                by_class.setdefault(type(child), []).append((name, child))
        for cls, group in by_class.items():
            if len(group) >= MIN_BLOCKS and not _is_torch_own(cls):
                found.append(_group(prefix, [n for n, _ in group], group, attribute_list=False))
    return max(found, key=lambda b: (b.parameters, b.count), default=None)


def _group(prefix: str, names: list[str], children: list[tuple[str, nn.Module]],
           attribute_list: bool = True) -> Blocks:
    dotted = [f"{prefix}.{n}" if prefix else n for n in names]
    params = sum(p.numel() for _, c in children for p in c.parameters())
    return Blocks(prefix if attribute_list else prefix, dotted, type(children[0][1]).__name__, params)


def modules_of(model: nn.Module, blocks: Blocks) -> list[nn.Module]:
    found = dict(model.named_modules())
    return [found[n] for n in blocks.names]


def already_regional(model: nn.Module, blocks: Blocks) -> bool:
    """The blocks compile themselves already (`block.compile()` in the model's own code)."""
    return any(getattr(m, "_compiled_call_impl", None) is not None for m in modules_of(model, blocks))


def nested_region_supported() -> Optional[str]:
    """None when this torch has `torch.compiler.nested_compile_region`, else why not."""
    if callable(getattr(torch.compiler, "nested_compile_region", None)):
        return None
    return f"torch {torch.__version__} has no torch.compiler.nested_compile_region"
