"""Describing a recorded call in source text: a plain value as Python that rebuilds it (`value_text`), a
constructor call (`describe_init`), a call's inputs as specs (`describe_call`, `value_spec`: tensors by shape,
dtype and range). Stdlib only; runs inside the user's program, with Dynamo's frame hook off (`quietly`).
"""

from __future__ import annotations

import math
import sys
from typing import Any, Optional

from .hook_state import STATE
from .workspace import relative

MAX_ITEMS = 64  # items of a list/tuple/dict argument described


def value_text(value: Any, depth: int = 0) -> Optional[str]:
    """Python source that rebuilds a plain value, or None."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float('{value}')"
    if depth > 4:
        return None
    if isinstance(value, (tuple, list)) and len(value) <= MAX_ITEMS:
        items = [value_text(v, depth + 1) for v in value]
        if any(i is None for i in items):
            return None
        if isinstance(value, list):
            return "[" + ", ".join(items) + "]"  # type: ignore[arg-type]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"  # type: ignore[arg-type]
    if isinstance(value, dict) and len(value) <= MAX_ITEMS:
        pairs = [(value_text(k, depth + 1), value_text(v, depth + 1)) for k, v in value.items()]
        if any(k is None or v is None for k, v in pairs):
            return None
        return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.dtype):
        return str(value)
    if type(value).__name__ == "Namespace" and type(value).__module__ in ("argparse", "types"):
        fields = vars(value)
        parts = [(k, value_text(v, depth + 1)) for k, v in fields.items()]
        if len(parts) > MAX_ITEMS or any(v is None or not k.isidentifier() for k, v in parts):
            return None
        where = "argparse" if type(value).__module__ == "argparse" else "types"
        name = "Namespace" if where == "argparse" else "SimpleNamespace"
        return f"__import__('{where}').{name}(" + ", ".join(f"{k}={v}" for k, v in parts) + ")"
    fields = getattr(type(value), "__dataclass_fields__", None)
    if fields is not None and relative(getattr(sys.modules.get(type(value).__module__), "__file__", None)):
        parts = []
        for name, field in fields.items():
            if not getattr(field, "init", True):
                continue
            text = value_text(getattr(value, name, None), depth + 1)
            if text is None:
                return None
            parts.append(f"{name}={text}")
        return f"{type(value).__qualname__}({', '.join(parts)})"
    return None


def type_name(value: Any) -> str:
    kind = type(value)
    return kind.__qualname__ if kind.__module__ in ("builtins", "__main__") else f"{kind.__module__}.{kind.__qualname__}"


def describe_init(name: str, fn: Any, self: Any, args: tuple, kwargs: dict) -> dict:
    import inspect

    try:
        signature = inspect.signature(fn)
        bound = signature.bind(self, *args, **kwargs)
    except (TypeError, ValueError):
        return {"call": None, "cannot_replay": [{"argument": "*", "type": "arguments that do not fit the signature",
                                                 "required": True}]}
    params = list(signature.parameters.values())[1:]
    varargs = any(p.kind is p.VAR_POSITIONAL and bound.arguments.get(p.name) for p in params)
    parts: list = []
    missing: list = []
    for param in params:
        if param.name not in bound.arguments:
            continue
        value = bound.arguments[param.name]
        positional = param.kind is param.POSITIONAL_ONLY or (varargs and param.kind is param.POSITIONAL_OR_KEYWORD)
        required = param.default is param.empty or positional
        if param.kind is param.VAR_POSITIONAL:
            for i, item in enumerate(value):
                text = value_text(item)
                if text is None:
                    missing.append({"argument": f"*{param.name}[{i}]", "type": type_name(item), "required": True})
                parts.append(text)
            continue
        if param.kind is param.VAR_KEYWORD:
            for key, item in value.items():
                text = value_text(item)
                if text is None or not key.isidentifier():
                    missing.append({"argument": key, "type": type_name(item), "required": False})
                else:
                    parts.append(f"{key}={text}")
            continue
        text = value_text(value)
        if text is None:
            missing.append({"argument": param.name, "type": type_name(value), "required": required})
            if required:
                parts.append(None)
            continue
        parts.append(text if positional else f"{param.name}={text}")
    replayable = all(p is not None for p in parts) and not any(m["required"] for m in missing)
    return {"call": f"{name}({', '.join(parts)})" if replayable else None, "cannot_replay": missing}


def value_spec(value: Any, depth: int = 0) -> dict:
    tensor = STATE.tensor
    if tensor is not None and isinstance(value, tensor):
        info: dict = {"shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", ""),
                      "device": str(value.device), "requires_grad": bool(value.requires_grad)}
        if not value.is_floating_point() and not value.is_complex() and 0 < value.numel() <= 10**8:
            try:
                info["min"], info["max"] = int(value.min()), int(value.max())
            except Exception:  # noqa: BLE001 - meta tensors, quantized...
                pass
        return {"tensor": info}
    text = value_text(value)
    if text is not None:
        return {"value": text}
    if depth < 3 and isinstance(value, (tuple, list)) and len(value) <= MAX_ITEMS:
        return {type(value).__name__: [value_spec(v, depth + 1) for v in value]}
    if depth < 3 and isinstance(value, dict) and len(value) <= MAX_ITEMS and all(isinstance(k, str) for k in value):
        return {"dict": {k: value_spec(v, depth + 1) for k, v in value.items()}}
    return {"unknown": type_name(value)}


def describe_call(fn: Any, args: tuple, kwargs: dict, drop: str) -> dict:
    """The call as a tuple of positional arguments (what a recipe is), or why it is not one.

    `drop`: "param" (fn's first parameter is self, not in args), "both" (self is args[0] too),
    "none" (a bound method: neither).
    """
    import inspect

    try:
        params: Optional[list] = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = None
    if params and drop in ("param", "both"):
        params = params[1:]
    if drop == "both":
        args = args[1:]
    if params is None:
        return {"args": [{"name": f"args[{i}]", "spec": value_spec(v)} for i, v in enumerate(args)],
                "cannot_replay": "keyword arguments" if kwargs else None}
    try:
        bound = inspect.Signature(params).bind(*args, **kwargs).arguments
    except TypeError as exc:
        return {"args": [], "cannot_replay": f"arguments that do not fit the signature ({exc})"}
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    last = max((i for i, p in enumerate(positional) if p.name in bound), default=-1)
    out: list = []
    why = None
    for param in positional[: last + 1]:
        if param.name in bound:
            out.append({"name": param.name, "spec": value_spec(bound[param.name])})
            continue
        default = value_text(param.default) if param.default is not param.empty else None
        if default is None:
            why = f"argument `{param.name}` is left to a default that cannot be written out"
        out.append({"name": param.name, "spec": {"value": default or "None"}})
    for param in params:
        if param.kind is param.VAR_POSITIONAL and param.name in bound:
            out += [{"name": f"*{param.name}", "spec": value_spec(v)} for v in bound[param.name]]
        elif param.kind in (param.KEYWORD_ONLY, param.VAR_KEYWORD) and bound.get(param.name, {}) != {}:
            why = why or f"keyword-only argument `{param.name}`"
    return {"args": out, "cannot_replay": why}


def tf32_state(torch: Any) -> dict:
    """TF32 on CUDA as torch has it now: matmuls (`allow_tf32`, `get_float32_matmul_precision`) and
    cuDNN convolutions. Read through the legacy flags, else the `fp32_precision` ones (torch 2.9+ raises
    on a legacy read once a program set the new ones); a flag no reading gives is None."""
    backends = torch.backends

    def first(*reads: Any) -> Any:
        for read in reads:
            try:
                return read()
            except Exception:  # noqa: BLE001 - a mix of the two APIs, or an older torch
                continue
        return None

    return {
        "matmul_tf32": first(lambda: bool(backends.cuda.matmul.allow_tf32),
                             lambda: backends.cuda.matmul.fp32_precision == "tf32"),
        "float32_matmul_precision": first(torch.get_float32_matmul_precision),
        "cudnn_tf32": first(lambda: bool(backends.cudnn.allow_tf32),
                            lambda: backends.cudnn.conv.fp32_precision == "tf32"),
    }


def precision_state(args: tuple, kwargs: dict) -> dict:
    """The autocast dtype and TF32 state a call runs in, on the device of its first tensor argument
    (autocast is per device type): what the analysis measures in unless told otherwise."""
    torch = sys.modules["torch"]
    tensor = STATE.tensor
    devices = [v.device.type for v in (*args, *kwargs.values()) if tensor is not None and isinstance(v, tensor)]
    device = devices[0] if devices else "cpu"
    autocast = None
    try:
        if torch.is_autocast_enabled(device):
            autocast = str(torch.get_autocast_dtype(device)).replace("torch.", "")
    except Exception:  # noqa: BLE001 - torch before 2.4 takes no device type
        pass
    return {"device": device, "autocast": autocast, **tf32_state(torch)}
