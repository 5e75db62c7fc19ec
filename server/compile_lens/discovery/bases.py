"""What a class inherits: the classes of the workspace it derives from (this file's, or one a
workspace file it imports defines) and, past them, the library class its `forward` comes from.

`class MyConv(nn.Conv1d)` runs `nn.Conv1d.forward`: its input is shaped as an `nn.Conv1d` built
with the arguments `super().__init__(...)` passes (`layers.Class` records that call). Plain `ast`:
an imported file is read and parsed, never imported.
"""

from __future__ import annotations

import ast
import os
from typing import Optional

from ..lints.facts import dotted_name
from .values import ancestry

HOMES = "<homes>"  # imported class -> the constants of the file that defines it (not a Python name)
IMPORTS = "<imports>"  # local name -> what the file's imports make it (`import_names`)

# torch.nn layers whose forward the guess can shape, with their constructors' positional
# parameters and how many of them are required: a subclass with no `__init__` of its own is
# built with these (`Conv1d(80, 384, kernel_size=3)` as the file calls it).
_CONV = ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias", "padding_mode")
_CONV_T = ("in_channels", "out_channels", "kernel_size", "stride", "padding", "output_padding", "groups", "bias",
           "dilation", "padding_mode")
_NORM = ("num_features", "eps", "momentum", "affine", "track_running_stats")
_RNN = ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional")
_TRANSFORMER_LAYER = ("d_model", "nhead", "dim_feedforward", "dropout", "activation", "layer_norm_eps",
                      "batch_first", "norm_first", "bias")
TORCH_LAYERS: dict[str, tuple[tuple[str, ...], int]] = {
    "Linear": (("in_features", "out_features", "bias"), 2),
    "Bilinear": (("in1_features", "in2_features", "out_features", "bias"), 3),
    "Embedding": (("num_embeddings", "embedding_dim", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq",
                   "sparse"), 2),
    "EmbeddingBag": (("num_embeddings", "embedding_dim", "max_norm", "norm_type", "scale_grad_by_freq", "mode",
                      "sparse"), 2),
    "LayerNorm": (("normalized_shape", "eps", "elementwise_affine", "bias"), 1),
    "RMSNorm": (("normalized_shape", "eps", "elementwise_affine"), 1),
    "GroupNorm": (("num_groups", "num_channels", "eps", "affine"), 2),
    "LSTM": (_RNN + ("proj_size",), 2), "GRU": (_RNN, 2),
    "RNN": (("input_size", "hidden_size", "num_layers", "nonlinearity", "bias", "batch_first", "dropout",
             "bidirectional"), 2),
    "MultiheadAttention": (("embed_dim", "num_heads", "dropout", "bias", "add_bias_kv", "add_zero_attn", "kdim",
                            "vdim", "batch_first"), 2),
    "TransformerEncoderLayer": (_TRANSFORMER_LAYER, 2), "TransformerDecoderLayer": (_TRANSFORMER_LAYER, 2),
    "Sequential": ((), 0),
}
for _dims in ("1d", "2d", "3d"):
    TORCH_LAYERS["Conv" + _dims] = (_CONV, 3)
    TORCH_LAYERS["ConvTranspose" + _dims] = (_CONV_T, 3)
    for _norm in ("BatchNorm", "InstanceNorm"):
        TORCH_LAYERS[_norm + _dims] = (_NORM, 1)


def import_names(tree: ast.Module) -> dict[str, str]:
    """Local name -> what it names: `from torch import nn` gives nn -> torch.nn, `from .blocks
    import Block` Block -> .blocks.Block."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                names[alias.asname or alias.name] = f"{module}.{alias.name}" if module.strip(".") else module + alias.name
    return names


def qualified(base: ast.expr, imports: dict[str, str]) -> str:
    """`nn.Conv1d` -> torch.nn.Conv1d, as the file's imports spell it; "" for a call or subscript."""
    name = dotted_name(base)
    if not name:
        return ""
    head, _, rest = name.partition(".")
    head = imports.get(head, head)
    return f"{head}.{rest}" if rest else head


def torch_layer(name: str) -> str:
    """`Conv1d` when `name` (qualified) is a torch.nn layer the guess can shape, else ""."""
    parts = name.split(".")
    inside_torch = parts[0] == "torch" and len(parts) > 2 and parts[1] == "nn"
    return parts[-1] if (inside_torch or parts[0] == "nn") and parts[-1] in TORCH_LAYERS else ""


def library_base(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> Optional[tuple[ast.ClassDef, ast.expr]]:
    """The first base past the workspace's classes (`nn.Conv1d` for `class Conv1d(nn.Conv1d)`,
    also through `class A(B)` with B of the workspace), with the class that names it: where an
    inherited `forward` comes from. None when each base is a workspace class (or `nn.Module`,
    whose `forward` is no one's)."""
    for node in ancestry(cls, classes):
        for base in node.bases:
            if not (isinstance(base, ast.Name) and base.id in classes) and \
                    not (dotted_name(base) or "").split(".")[-1].endswith(("Module", "object", "ABC", "Generic", "Mixin")):
                return node, base  # (a mixin adds methods, rarely `forward`: the next base is looked at)
    return None


def super_init(call: ast.Call, owner: ast.ClassDef) -> Optional[tuple[Optional[ast.expr], list[ast.expr]]]:
    """For `super().__init__(a, b)` (or `super(Owner, self).__init__`, `Base.__init__(self, a, b)`)
    in `owner`'s `__init__`: (the base it calls — its first for `super()` — and the positional
    arguments); None for any other call."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and f.attr == "__init__"):
        return None
    if isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) and f.value.func.id == "super":
        return (owner.bases[0] if owner.bases else None), list(call.args)
    if dotted_name(f.value) and any(dotted_name(b) == dotted_name(f.value) for b in owner.bases) \
            and call.args and isinstance(call.args[0], ast.Name) and call.args[0].id == "self":
        return f.value, list(call.args[1:])
    return None


# --- classes imported from workspace files ---------------------------------------------------------

_parsed: dict[tuple[str, int, int], Optional[ast.Module]] = {}  # (file, mtime, size) -> its tree


def imported_names(tree: ast.Module, path: str, root: str, local: set[str]) -> dict[str, tuple[str, ast.Module]]:
    """When a class of this file derives from a class it imports (`from .base import Base`): each
    name imported from a workspace file, as local name -> (its name there, that file's tree), for
    the base and the values its arguments name (`WIDTH`). Nothing when no base is imported."""
    if not path:
        return {}
    wanted = {b.id for node in tree.body if isinstance(node, ast.ClassDef)
              for b in node.bases if isinstance(b, ast.Name) and b.id not in local}
    found: dict[str, tuple[str, ast.Module]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or not wanted & {a.asname or a.name for a in node.names}:
            continue
        other = _workspace_file(node, path, root)
        theirs = _parse(other) if other else None
        if theirs is not None:
            found.update({(a.asname or a.name): (a.name, theirs) for a in node.names if a.name != "*"})
    return found


def _workspace_file(node: ast.ImportFrom, path: str, root: str) -> str:
    """The workspace file `from X import ...` reads (as `deps.workspace_imports` finds it), or ""."""
    parts = (node.module or "").split(".") if node.module else []
    if node.level:
        base = os.path.dirname(path)
        for _ in range(node.level - 1):
            base = os.path.dirname(base)
        bases = [base]
    else:
        bases = [b for b in (root, os.path.dirname(path)) if b]
    for base in bases:
        stem = os.path.join(base, *parts)
        for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
            if os.path.isfile(candidate) and os.path.realpath(candidate) != os.path.realpath(path):
                return candidate
    return ""


def _parse(path: str) -> Optional[ast.Module]:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    key = (os.path.realpath(path), stat.st_mtime_ns, stat.st_size)
    if key not in _parsed:
        if len(_parsed) > 512:  # a long session edits many files: forget the old versions
            _parsed.clear()
        try:
            with open(path, encoding="utf-8") as f:
                _parsed[key] = ast.parse(f.read())
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            _parsed[key] = None
    return _parsed[key]
