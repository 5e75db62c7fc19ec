"""The device a measurement runs on: which one, moving inputs to it, naming it, and its failures
(out of memory). Also used by `bench_child`."""

from __future__ import annotations

import gc
import platform
from typing import Any, Optional

import torch


def resolve_device(device: str) -> tuple[str, Optional[str]]:
    """The device to measure on, and a note when it is not the one asked for."""
    wanted = (device or "auto").lower()
    if wanted == "auto":
        return ("cuda" if torch.cuda.is_available() else "cpu"), None
    if wanted.startswith("cuda"):
        if torch.cuda.is_available():
            return wanted, None
        why = "this torch build has no CUDA" if torch.version.cuda is None else "no GPU is visible"
        return "cpu", f"device: cuda was asked for but {why} (torch {torch.__version__}); measured on cpu"
    if wanted == "cpu":
        return "cpu", None
    return "cpu", f"device: unknown device {device!r}; measured on cpu"


def to_device(obj: Any, device: str) -> Any:
    """Move tensors (inside tuples, lists and dicts too) to `device`; keep leaf-ness and grad flags."""
    if isinstance(obj, torch.Tensor):
        if obj.device == torch.device(device):
            return obj
        moved = obj.detach().to(device)
        return moved.requires_grad_(obj.requires_grad) if obj.is_floating_point() else moved
    if isinstance(obj, tuple):
        items = [to_device(v, device) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
    if isinstance(obj, list):
        return [to_device(v, device) for v in obj]
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    return obj


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for row in f:
                if row.startswith("model name"):
                    return row.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"{cpu_name()} ({torch.get_num_threads()} threads)"


def is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "out of memory" in text or "can't allocate memory" in text or "not enough memory" in text)


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
