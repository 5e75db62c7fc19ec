"""Shaping an example tensor for the layer a parameter reaches (a `Linear`, `Conv2d`, `Embedding`...)."""

from __future__ import annotations

import ast
from typing import Optional

from .follow import _Use
from .layers import SIZE_ARG, Class, Ref, layer_kind, self_attr
from .values import _arg

BATCH = 8  # a small default batch for inferred inputs

SEQ = 16  # sequence length of inferred token and time-series inputs
SIDE = 32  # side of inferred images
_BAG = 4  # indices per bag of an inferred EmbeddingBag input with offsets

_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict"}

_SPATIAL = {"1d": (SIDE,), "2d": (SIDE, SIDE), "3d": (8, 16, 16)}
_NORM_SPATIAL = {"1d": (), "2d": (16, 16), "3d": (8, 8, 8)}
_INTEGER_ANNOTATIONS = {"LongTensor", "IntTensor", "ShortTensor", "ByteTensor", "CharTensor"}
_JAXTYPING_INTS = {"Int", "Int8", "Int16", "Int32", "Int64", "Long", "UInt8", "Integer", "Bool"}
_JAXTYPING_FLOATS = {"Float", "Float16", "Float32", "Float64", "BFloat16", "Shaped", "Real", "Num", "Inexact"}


def _shape_text(shape: tuple) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _randn(shape: tuple) -> str:
    return f"torch.randn{_shape_text(shape)}" if len(shape) > 1 else f"torch.randn({shape[0]})"


def _positive(value: object) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _tensor_for(use: _Use) -> tuple[Optional[str], str]:  # noqa: C901 - one case per layer kind
    """A tensor expression for the parameter, or None and why."""
    layer, env = use.ref.node, use.ref.env
    assert isinstance(layer, ast.Call)
    kind = layer_kind(layer)
    where = f"`{ast.unparse(layer)}`"
    if kind in ("TransformerEncoder", "TransformerDecoder"):
        inner_node = next((kw.value for kw in layer.keywords if kw.arg in ("encoder_layer", "decoder_layer")), None)
        if inner_node is None and layer.args:
            inner_node = layer.args[0]
        ref = _inner_layer(inner_node, use.ref.owner or use.owner, env)
        if ref is None:
            return None, f"cannot tell the layer {where} repeats"
        return _tensor_for(_Use(ref, use.position, use.site, use.owner))
    position = use.position
    roles = {"input": 0, "src": 0, "tgt": 0 if kind.startswith("TransformerDecoder") else 1,
             "query": 0, "key": 1, "value": 2, "memory": 1, "offsets": 1}
    if isinstance(position, str):
        position = roles.get(position, position)
    index, keyword = SIZE_ARG.get(kind, (0, "in_channels"))
    if kind.startswith("Lazy"):
        size: object = 3 if "Conv" in kind else 16
    elif kind == "Transformer":
        size = _arg(layer, index, keyword, env) or 512
    else:
        size = _arg(layer, index, keyword, env)
    batch_first = _arg(layer, 99, "batch_first", env) is True
    if kind in ("LayerNorm", "RMSNorm") and isinstance(size, (tuple, list)) and size and all(_positive(s) for s in size):
        return _randn(_ranked((BATCH, *size), use.rank, len(size))) if position == 0 else None, where
    size = _positive(size)
    if size is None:
        return None, f"cannot read the size of {where}"
    if kind in ("Embedding", "EmbeddingBag"):
        bags = kind == "EmbeddingBag" and (len(use.site.args) > 1 or any(k.arg == "offsets" for k in use.site.keywords))
        if position == 0:
            shape = (BATCH * _BAG,) if bags else _ranked((BATCH, SEQ), use.rank, 0)
            return f"torch.randint(0, {size}, {_shape_text(shape)})", where
        if position == 1 and bags:
            return f"torch.arange(0, {BATCH * _BAG}, {_BAG})", where
        return None, f"cannot tell argument {use.position} of {where}"
    if kind in ("LSTM", "GRU", "RNN", "TransformerEncoderLayer", "TransformerDecoderLayer", "Transformer",
                "MultiheadAttention"):
        limit = 3 if kind == "MultiheadAttention" else 2 if kind in ("TransformerDecoderLayer", "Transformer") else 1
        if not isinstance(position, int) or position >= limit:
            return None, f"cannot tell argument {use.position} of {where}"
        if kind == "MultiheadAttention" and position > 0:
            size = _positive(_arg(layer, 99, "kdim" if position == 1 else "vdim", env)) or size
        shape = (BATCH, SEQ, size) if batch_first else (SEQ, BATCH, size)
        return _randn(shape), where
    if position != 0:
        return None, f"cannot tell argument {use.position} of {where}"
    dims = kind[-2:] if kind[-2:] in _SPATIAL else ""
    if kind in ("Linear", "LazyLinear"):
        return _randn(_ranked((BATCH, size), use.rank, 1)), where
    if kind in ("Bilinear", "BatchNorm1d", "LazyBatchNorm1d"):
        return _randn((BATCH, size)), where
    if kind in ("LayerNorm", "RMSNorm"):
        return _randn(_ranked((BATCH, SEQ, size), use.rank, 1)), where
    if kind == "GroupNorm":
        return _randn((BATCH, size, 16, 16)), where
    if dims and ("Conv" in kind):
        return _randn(((2 if dims == "3d" else BATCH), size, *_SPATIAL[dims])), where
    if dims and ("BatchNorm" in kind or "InstanceNorm" in kind):
        rest = _NORM_SPATIAL[dims] if "BatchNorm" in kind or dims != "1d" else (SIDE,)
        return _randn(((2 if dims == "3d" else BATCH), size, *rest)), where
    return None, f"cannot shape an input for {where}"


def _ranked(shape: tuple, rank: Optional[int], kept: int) -> tuple:
    """`shape` with as many dimensions as `forward` unpacks (`B, T, C = x.size()`): the last `kept`
    are the layer's and stay; the leading ones are batch, then sequence, then small extra sizes."""
    if rank is None or rank == len(shape) or rank < max(kept, 1):
        return shape
    lead = (BATCH, SEQ, *([4] * rank))[: rank - kept]
    return (*lead, *shape[len(shape) - kept:]) if kept else lead


def _inner_layer(node: Optional[ast.expr], owner: Class, env: dict[str, object]) -> Optional[Ref]:
    """The `encoder_layer` of a TransformerEncoder: inline, a local of __init__, or `self.layer`."""
    if isinstance(node, ast.Call):
        return Ref(node, env, owner)
    if isinstance(node, ast.Name) and node.id in owner.locals:
        return owner.locals[node.id]
    if node is not None and self_attr(node):
        return owner.layers.get(node.attr)  # type: ignore[union-attr]
    return None
