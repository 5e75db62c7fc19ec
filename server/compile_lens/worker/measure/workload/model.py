"""What a measurement calls: one side of the comparison (`Model`: its forward under no_grad, its
training step), the loss a training step uses, how `torch.compile` is called, and what the inputs
and outputs hold. Also used by `bench_child`."""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterator, Optional

import torch

from ...loader import BuiltTarget
from . import precision

LR = 1e-3  # the eager SGD step of the training step; small so weights barely drift while timing


def tensors_in(obj: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    """Every tensor in an output, in a stable order (tuples, lists, dicts, dataclass-likes)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth > 8:  # a self-referencing output object: stop somewhere
        return
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            yield from tensors_in(v, depth + 1)
    elif isinstance(obj, dict):
        for k in obj:
            yield from tensors_in(obj[k], depth + 1)
    elif hasattr(obj, "__dict__") and not callable(obj) and not isinstance(obj, type):
        for v in vars(obj).values():
            yield from tensors_in(v, depth + 1)


def first_float_tensor(out: Any) -> Optional[torch.Tensor]:
    return next((t for t in tensors_in(out) if t.is_floating_point()), None)


def scalar_loss(out: Any) -> torch.Tensor:
    """The training step's loss: mean square of the first floating-point output."""
    t = first_float_tensor(out)
    if t is None:
        raise ValueError("no floating-point tensor in the output")
    return t.float().pow(2).mean()


def describe_inputs(args: tuple) -> str:
    def one(v: Any) -> str:
        if isinstance(v, torch.Tensor):
            dtype = str(v.dtype).replace("torch.", "")
            grad = " requires_grad" if v.requires_grad else ""
            return f"{dtype}[{', '.join(map(str, v.shape))}]{grad}"
        if isinstance(v, (tuple, list)):
            inner = ", ".join(one(x) for x in v)
            return f"({inner})" if isinstance(v, tuple) else f"[{inner}]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {one(x)}" for k, x in v.items()) + "}"
        text = repr(v)
        return text if len(text) <= 24 else text[:21] + "..."
    return ", ".join(one(a) for a in args)


def compile_kwargs(target: BuiltTarget, mode: str) -> dict[str, Any]:
    """`torch.compile` arguments: the setting's mode, plus `dynamic`/`fullgraph` from a decorator."""
    kwargs: dict[str, Any] = {"mode": None if mode in ("", "default") else mode}
    options = getattr(target.spec, "compile_options", None) or {}
    for key in ("dynamic", "fullgraph"):
        if key in options:
            kwargs[key] = options[key]
    return kwargs


def uses_cudagraphs(mode: str) -> bool:
    return mode == "reduce-overhead" or mode == "max-autotune"


class Model:
    """One side of the comparison: something to call and (for modules) its parameters."""

    def __init__(self, call: Callable, module: Optional[torch.nn.Module], args: tuple, step_begin: bool):
        # `call` runs in the measurement's precision (`precision.applied`), eager and compiled alike:
        # autocast entered around each call, as the user's loop does per step
        self.call, self.module, self.args, self.step_begin = precision.wrapped(call), module, args, step_begin
        self._plain, self._cast = call, precision.context()
        self._opt: Optional[torch.optim.Optimizer] = None

    def use(self, train: bool) -> None:
        """Train or eval mode. Set once before timing: `Module.train()` walks every submodule,
        which would add microseconds to each timed call of a small model."""
        if self.module is not None:
            self.module.train(train)

    def run(self, workload: str) -> Callable[[], Any]:
        """The call to time for a workload ("forward" | "train"), with the module's mode set."""
        self.use(workload == "train")
        return self.train_step if workload == "train" else self.forward

    def forward(self) -> Any:
        """One forward under no_grad (eval mode: call `use(False)` first)."""
        if self.step_begin:  # CUDA graphs: a new iteration may overwrite the last one's outputs
            torch.compiler.cudagraph_mark_step_begin()
        with torch.no_grad():
            return self.call(*self.args)

    def loss_backward(self) -> Any:
        """Forward and backward of the scalar loss (train mode: call `use(True)` first)."""
        if self.step_begin:
            torch.compiler.cudagraph_mark_step_begin()
        with self._cast():  # the forward and the loss under autocast; the backward outside it
            out = self._plain(*self.args)
            loss = scalar_loss(out)
        loss.backward()
        return out

    def train_step(self) -> None:
        """forward, loss, backward, an eager SGD step."""
        assert self.module is not None
        if self._opt is None:
            params = [p for p in self.module.parameters() if p.requires_grad]
            self._opt = torch.optim.SGD(params, lr=LR)
        self._opt.zero_grad(set_to_none=True)
        self.loss_backward()
        self._opt.step()

    def zero_grad(self) -> None:
        if self.module is not None:
            for p in self.module.parameters():
                p.grad = None


def train_step_problem(obj: Any, out: Any) -> Optional[str]:
    """Why a training step cannot be measured for this target (None: it can)."""
    if not isinstance(obj, torch.nn.Module):
        return "a plain function has no parameters to train; forward only"
    if not any(p.requires_grad for p in obj.parameters()):
        return "the module has no trainable parameters; forward only"
    t = first_float_tensor(out)
    if t is None:
        return "no floating-point tensor in the output to make a loss from; forward only"
    if not t.requires_grad:
        return "the first floating-point output does not require grad; forward only"
    return None


def _same_weights_copy(model: torch.nn.Module, target: BuiltTarget, device: str) -> torch.nn.Module:
    """A second model with the eager model's weights and buffers."""
    try:
        return copy.deepcopy(model)
    except Exception:  # noqa: BLE001 - some modules do not deepcopy; rebuild and load the state
        other = target.make()
        other = (other if target.spec.kind == "module" else copy.deepcopy(other)).to(device)
        other.load_state_dict(model.state_dict())
        return other


def seeded(fn: Callable[[], Any], seed: int = 0) -> Any:
    torch.manual_seed(seed)
    return fn()
