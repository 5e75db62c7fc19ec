"""Example inputs for models from libraries, read from what each library publishes about its models.

Runs in the worker after import, on a built model whose inputs the source alone could not tell:
- transformers: `main_input_name` and the `config` (vocab size, max positions, image size and
  channels), with `dummy_inputs` for the shape of any other main input;
- timm: `pretrained_cfg["input_size"]` (older timm: `default_cfg`);
- torchvision-style classifiers: the first convolution's `in_channels` at 224×224, the size
  torchvision documents for its classification weights;
- an `nn.Sequential` subclass: the first layer's size (a Linear's `in_features`, an Embedding's vocab);
- a subclass of a torch.nn layer (`class Stem(nn.Conv2d)`): that layer's input size.
A wrapper whose `forward` hands its argument to one of these (its first such child) gets the same
inputs. Each guess carries where it came from ("from GPT2Config"), shown to the user as a guess.
Nothing here imports a library: classes are recognised by name and module, so a model from a
library that is not installed (or a stand-in with the same attributes) is read the same way.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Optional

import torch

BATCH = 2  # small: these models are real-sized, and a guess only has to run
SEQ = 16  # token sequence length, under the model's maximum positions
IMAGE = 224  # torchvision's documented input size for its classification weights
AUDIO = 16000  # one second at 16 kHz, the rate speech models in transformers expect


@dataclass
class Guess:
    text: str  # an argument tuple, evaluated in the module's namespace (torch in scope)
    origin: str  # "from GPT2Config", for the user


def guess_inputs(model: Any, forward: Any) -> Optional[Guess]:
    """Inputs for `model` (called through `forward`), from the model itself or the first child that
    a library describes; None when no library tells."""
    params = _parameters(forward)
    # what a library publishes wins over a shape read from the layers (a wrapper's first conv is
    # its backbone's, whose timm config says the real image size)
    for describe in (_published, _from_layers):
        for candidate in [model, *_children(model)]:
            # a torch.nn layer is read only as the model itself (`class Stem(nn.Conv2d)` built by
            # its directive's `init=`): a wrapper's children register in any order, not call order
            found = describe(candidate) or (_torch_layer(candidate) if describe is _from_layers and candidate is model else None)
            if found is None:
                continue
            tensors, main, origin = found
            texts = _match(params, tensors, main)
            if texts is not None:
                return Guess("(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")", origin)
    return None


def _parameters(forward: Any) -> list[inspect.Parameter]:
    try:
        sig = inspect.signature(forward)
    except (TypeError, ValueError):
        return []
    return [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _match(params: list[inspect.Parameter], tensors: dict[str, str], main: str) -> Optional[list[str]]:
    """The positional arguments for `forward`: the main input for its one required parameter (or
    its first, when none is required, as in transformers' own models), others by name."""
    required = [p for p in params if p.default is inspect.Parameter.empty]
    if not required:  # transformers' own forward: every input optional, the main one first
        return [tensors[main]] if params else None
    if len(required) == 1:
        return [tensors.get(required[0].name, tensors[main])]
    texts = []
    for i, p in enumerate(required):
        if p.name in tensors:
            texts.append(tensors[p.name])
        elif i == 0:
            texts.append(tensors[main])
        else:
            return None  # a second required input no library names: do not invent it
    return texts


def _children(model: Any) -> list[Any]:
    children = getattr(model, "children", None)
    return list(children()) if callable(children) else []


def _published(model: Any) -> Optional[tuple[dict[str, str], str, str]]:
    """(argument texts by parameter name, the main one's name, where they came from) or None."""
    return _transformers(model) or _timm(model)


def _from_layers(model: Any) -> Optional[tuple[dict[str, str], str, str]]:
    return _classifier(model) or _sequential(model)


def _is_from(model: Any, class_name: str, package: str) -> bool:
    return any(c.__name__ == class_name and c.__module__.split(".")[0] == package for c in type(model).__mro__)


def _transformers(model: Any) -> Optional[tuple[dict[str, str], str, str]]:
    if not _is_from(model, "PreTrainedModel", "transformers"):
        return None
    config = getattr(model, "config", None)
    main = getattr(model, "main_input_name", None) or "input_ids"
    origin = f"from {type(config).__name__}" if config is not None else "from transformers' dummy_inputs"
    tensors: dict[str, str] = {}
    if main == "input_ids":
        text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
        vocab = _positive(getattr(text_config, "vocab_size", None))
        if vocab is None:
            return None
        limits = [_positive(getattr(text_config, k, None)) for k in ("max_position_embeddings", "n_positions", "n_ctx")]
        seq = min([SEQ] + [v for v in limits if v])
        tensors = {"input_ids": f"torch.randint(0, {vocab}, ({BATCH}, {seq}))",
                   "attention_mask": f"torch.ones({BATCH}, {seq}, dtype=torch.long)",
                   "token_type_ids": f"torch.zeros({BATCH}, {seq}, dtype=torch.long)"}
        tensors["labels"] = tensors["input_ids"]
    elif main == "pixel_values":
        vision = getattr(config, "vision_config", None) or config
        side = getattr(vision, "image_size", None) or IMAGE
        height, width = (side, side) if isinstance(side, int) else tuple(side)[:2]
        channels = _positive(getattr(vision, "num_channels", None)) or 3
        tensors = {"pixel_values": f"torch.randn({BATCH}, {channels}, {height}, {width})"}
    elif main == "input_values":
        tensors = {"input_values": f"torch.randn({BATCH}, {AUDIO})"}
    else:
        dummy = getattr(model, "dummy_inputs", None)
        value = dummy.get(main) if isinstance(dummy, dict) else None
        if not isinstance(value, torch.Tensor):
            return None
        tensors = {main: _like(value)}
        origin = "from transformers' dummy_inputs"
    return tensors, main, origin


def _timm(model: Any) -> Optional[tuple[dict[str, str], str, str]]:
    for attr in ("pretrained_cfg", "default_cfg"):
        cfg = getattr(model, attr, None)
        size = cfg.get("input_size") if isinstance(cfg, dict) else None
        if isinstance(size, (tuple, list)) and len(size) == 3 and all(_positive(s) for s in size):
            channels, height, width = size
            return {"x": f"torch.randn({BATCH}, {channels}, {height}, {width})"}, "x", f"from timm {attr}"
    return None


def _classifier(model: Any) -> Optional[tuple[dict[str, str], str, str]]:
    """A torchvision-style image classifier: its first layer is a 2-d convolution and it ends in a Linear."""
    leaves = [m for m in model.modules() if not _children(m) and any(True for _ in m.parameters(recurse=False))] \
        if isinstance(model, torch.nn.Module) else []
    if not leaves or not isinstance(leaves[0], torch.nn.Conv2d) or not any(isinstance(m, torch.nn.Linear) for m in leaves):
        return None
    channels = leaves[0].in_channels
    origin = f"from its first convolution ({channels} channels) at {IMAGE}×{IMAGE}, torchvision's default image size"
    return {"x": f"torch.randn({BATCH}, {channels}, {IMAGE}, {IMAGE})"}, "x", origin


def _sequential(model: Any) -> Optional[tuple[dict[str, str], str, str]]:
    if not isinstance(model, torch.nn.Sequential) or not len(model):
        return None
    first = next((m for m in model.modules() if not _children(m) and any(True for _ in m.parameters(recurse=False))), None)
    if isinstance(first, torch.nn.Linear):
        return {"x": f"torch.randn({BATCH}, {first.in_features})"}, "x", "from its first layer (Linear)"
    if isinstance(first, torch.nn.Embedding):
        return {"x": f"torch.randint(0, {first.num_embeddings}, ({BATCH}, {SEQ}))"}, "x", "from its first layer (Embedding)"
    return None


_SPATIAL = {1: "32", 2: "32, 32", 3: "8, 16, 16"}  # as discovery shapes a first convolution's input


def _torch_layer(model: Any) -> Optional[tuple[dict[str, str], str, str]]:
    """A subclass of a torch.nn layer (its `forward` the layer's), sized by its own attributes."""
    name = type(model).__name__
    if isinstance(model, torch.nn.Linear):
        text, what = f"torch.randn({BATCH}, {model.in_features})", f"{model.in_features} features"
    elif isinstance(model, torch.nn.modules.conv._ConvNd) and len(model.kernel_size) in _SPATIAL:
        text = f"torch.randn({BATCH}, {model.in_channels}, {_SPATIAL[len(model.kernel_size)]})"
        what = f"{model.in_channels} channels"
    elif isinstance(model, torch.nn.Embedding):
        text, what = f"torch.randint(0, {model.num_embeddings}, ({BATCH}, {SEQ}))", f"{model.num_embeddings} rows"
    else:
        return None
    base = next(c.__name__ for c in type(model).__mro__ if c.__module__.startswith("torch.nn"))
    return {"x": text, "input": text}, "input", f"from the {base} it is ({what})" if base != name else f"from its size ({what})"


def _like(value: torch.Tensor) -> str:
    shape = ", ".join(str(s) for s in value.shape) + ("," if value.dim() == 1 else "")
    if value.dtype.is_floating_point:
        return f"torch.randn(({shape}))"
    top = int(value.max()) + 1 if value.numel() else 1
    return f"torch.randint(0, {max(top, 1)}, ({shape}))"


def _positive(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def left_out(forward: Any, args: tuple) -> list[str]:
    """Optional parameters of `forward` the call `forward(*args)` leaves at their defaults."""
    try:
        sig = inspect.signature(forward)
        bound = sig.bind_partial(*args)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.name not in bound.arguments and p.default is not inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
