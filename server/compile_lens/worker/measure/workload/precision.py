"""The precision a measurement runs in, as the user's program runs it (`TargetSpec.precision`, chosen
on the server by `discovery/precision.py`):

- **autocast** ("bf16-autocast", "fp16-autocast"): `torch.autocast(device_type, dtype)` entered
  around every call of the workload, eager and compiled alike — the forward, and the train step's
  forward and loss; the backward runs outside it, as torch's AMP recipe has it. Each call enters its
  own context, as a training loop does per step (autocast keeps its casts of the weights until the
  outermost context exits: one context around many steps would serve stale casts after an
  optimizer step, and time a cast the user's loop pays every step as free).
- **TF32** ("tf32"): on CUDA, matmuls (`torch.set_float32_matmul_precision("high")`) and cuDNN
  convolutions (`torch.backends.cudnn.allow_tf32`) in TensorFloat32; no effect on the CPU, said so.
- "fp32": torch's defaults set explicitly (on CUDA: matmul TF32 off, cuDNN convolutions TF32 on).
- none chosen: nothing is changed; the figures name what was in effect (the user's module may have
  set TF32 when it was imported).

`applied` sets it for one measurement and restores the global flags after; `use` sets it for the
rest of a fresh process (the cold child, which must compile the same program as its parent).
`Model` (`workload`) reads the active autocast when it is built; accuracy's tolerances follow it
(`tolerance_dtype`). The figures name it: `current()` is `Benchmark.precision`.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import torch

from ....protocol import Precision
from ....record.describe import tf32_state

AUTOCAST = {"bf16-autocast": torch.bfloat16, "fp16-autocast": torch.float16}
TORCH_DEFAULTS = "matmul TF32 off, cuDNN convolutions TF32 on"


@dataclass
class _Active:
    precision: Precision
    device_type: str
    dtype: Optional[torch.dtype] = None  # the autocast dtype; None: no autocast


_ACTIVE: Optional[_Active] = None


def current() -> Optional[Precision]:
    """What the measurement in progress runs in (None outside `applied`/`use`)."""
    return _ACTIVE.precision if _ACTIVE is not None else None


@contextlib.contextmanager
def applied(spec: Any, device: str) -> Iterator[Precision]:
    """The target's precision on `device` for the measurement inside; the flags as they were after."""
    global _ACTIVE
    before, flags = _ACTIVE, _saved_flags()
    try:
        _ACTIVE = _apply(getattr(spec, "precision", "") or "", getattr(spec, "precision_source", "") or "", device)
        yield _ACTIVE.precision
    finally:
        _restore(flags)
        _ACTIVE = before


def use(spec: dict, device: str) -> Precision:
    """`applied` for the rest of this process (the cold child): `spec` as the job carries it."""
    global _ACTIVE
    _ACTIVE = _apply(spec.get("precision") or "", spec.get("precision_source") or "", device)
    return _ACTIVE.precision


def wrapped(call: Callable) -> Callable:
    """`call` with the active autocast entered around each call (itself when there is none)."""
    active = _ACTIVE
    if active is None or active.dtype is None:
        return call
    device_type, dtype = active.device_type, active.dtype

    def under_autocast(*args: Any, **kwargs: Any) -> Any:
        with torch.autocast(device_type, dtype=dtype):
            return call(*args, **kwargs)

    return under_autocast


def context() -> Callable[[], Any]:
    """A factory of the active autocast context (a no-op one when there is none): for the train
    step's forward and loss together."""
    active = _ACTIVE
    if active is None or active.dtype is None:
        return contextlib.nullcontext
    device_type, dtype = active.device_type, active.dtype
    return lambda: torch.autocast(device_type, dtype=dtype)


def tolerance_dtype() -> Optional[torch.dtype]:
    """The dtype whose tolerance eager vs compiled is held to at least: autocast's, or fp16's for
    TF32 on CUDA (the same 10-bit mantissa); None in fp32."""
    active = _ACTIVE
    if active is None:
        return None
    if active.dtype is not None:
        return active.dtype
    if active.precision.value == "tf32" and active.device_type == "cuda":
        return torch.float16
    return None


def _apply(value: str, source: str, device: str) -> _Active:
    device_type = torch.device(device).type
    source = source or "default"
    if value in AUTOCAST:
        dtype = AUTOCAST[value]
        problem = autocast_problem(device, dtype)
        if problem:
            return _Active(Precision("fp32", source, f"{value}: not on this device ({device_type}: {problem}); "
                                                     "measured in fp32", asked=value), device_type)
        name = str(dtype).replace("torch.", "")
        detail = f"torch.autocast('{device_type}', dtype=torch.{name}) around the forward and the loss"
        if device_type == "cuda":
            detail += f"; {_tf32_words()}"
        return _Active(Precision(value, source, detail), device_type, dtype)
    if value == "tf32":
        if device_type != "cuda":
            return _Active(Precision("tf32", source, "tf32: no effect on the CPU (measured in fp32)"
                                     if device_type == "cpu" else f"tf32: no effect on {device_type}"), device_type)
        _set_matmul("high", "tf32")
        _set_cudnn(True)
        return _Active(Precision("tf32", source, "matmul and cuDNN convolutions in TF32 "
                                                 "(torch.set_float32_matmul_precision('high'))"), device_type)
    if value == "fp32":
        if device_type == "cuda":
            _set_matmul("highest", "ieee")
            _set_cudnn(True)
            return _Active(Precision("fp32", source, f"torch's defaults: {TORCH_DEFAULTS}"), device_type)
        return _Active(Precision("fp32", source, "fp32"), device_type)
    # nothing chosen: what is in effect (torch's defaults, unless the imported code changed them)
    if device_type != "cuda":
        return _Active(Precision("fp32", "default", "torch's defaults"), device_type)
    state = tf32_state(torch)
    words = _tf32_words(state)
    said = f"torch's defaults: {words}" if words == TORCH_DEFAULTS else f"as the imported code set it: {words}"
    return _Active(Precision("tf32" if state["matmul_tf32"] else "fp32", "default", said), device_type)


def autocast_problem(device: str, dtype: torch.dtype) -> Optional[str]:
    """Why autocast to `dtype` does not run on `device` (None: it does): a tiny matmul under it must
    come out in `dtype` (torch disables an unsupported autocast with a warning, it does not raise)."""
    device_type = torch.device(device).type
    try:
        if not torch.amp.is_autocast_available(device_type):
            return "torch has no autocast for it"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autocast(device_type, dtype=dtype):
                a = torch.ones(2, 2, device=device)
                out = a @ a
        return None if out.dtype == dtype else f"autocast to {str(dtype).replace('torch.', '')} is disabled there"
    except Exception as exc:  # noqa: BLE001 - whatever this build says about it
        return f"{type(exc).__name__}: {str(exc)[:120]}"


def _tf32_words(state: Optional[dict] = None) -> str:
    state = state if state is not None else tf32_state(torch)
    matmul = "matmul TF32 on" if state.get("matmul_tf32") else "matmul TF32 off"
    conv = "cuDNN convolutions TF32 on" if state.get("cudnn_tf32") in (True, None) else "cuDNN convolutions TF32 off"
    return f"{matmul}, {conv}"


def _saved_flags() -> dict:
    """The global flags `_apply` may change, to put back: the legacy reading where torch gives one."""
    saved: dict = {}
    with contextlib.suppress(Exception):
        saved["matmul"] = torch.get_float32_matmul_precision()
    with contextlib.suppress(Exception):
        saved["matmul_new"] = torch.backends.cuda.matmul.fp32_precision
    with contextlib.suppress(Exception):
        saved["cudnn"] = bool(torch.backends.cudnn.allow_tf32)
    with contextlib.suppress(Exception):
        saved["cudnn_new"] = torch.backends.cudnn.conv.fp32_precision
    return saved


def _restore(saved: dict) -> None:
    now = _saved_flags()
    if now == saved:
        return  # nothing was changed: touching the flags anyway could mix torch's two APIs
    if "matmul" in saved:
        _set_matmul(saved["matmul"], saved.get("matmul_new"))
    elif "matmul_new" in saved:
        with contextlib.suppress(Exception):
            torch.backends.cuda.matmul.fp32_precision = saved["matmul_new"]
    if "cudnn" in saved:
        _set_cudnn(saved["cudnn"], saved.get("cudnn_new"))


def _set_matmul(legacy: str, new: Optional[str]) -> None:
    """torch 2.9+ raises on a legacy call after the new API was used (and the reverse): try both."""
    try:
        torch.set_float32_matmul_precision(legacy)
    except Exception:  # noqa: BLE001
        if new:
            with contextlib.suppress(Exception):
                torch.backends.cuda.matmul.fp32_precision = new


def _set_cudnn(on: bool, new: Optional[str] = None) -> None:
    try:
        torch.backends.cudnn.allow_tf32 = on
    except Exception:  # noqa: BLE001
        with contextlib.suppress(Exception):
            torch.backends.cudnn.conv.fp32_precision = new or ("tf32" if on else "ieee")
