"""Reading recorded.json for the analysis: recipes (source "recorded"), constructors, shape sequences."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Optional

from ..protocol import InputRecipe
from . import store

_FLOATS = {"float16", "float32", "float64", "bfloat16", "half", "float", "double", "complex32", "complex64", "complex128"}
_INTEGERS = {"uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "short", "int", "long"}


@dataclass
class Recorded:
    root: str
    path: str  # the recorded.json (which may not exist)
    targets: dict[str, dict] = field(default_factory=dict)  # "train.py:Net" -> entry

    def key(self, file_path: str, target_name: str) -> Optional[str]:
        real, root = os.path.realpath(file_path), os.path.realpath(self.root)
        if not real.startswith(root + os.sep):
            return None
        return os.path.relpath(real, root).replace(os.sep, "/") + ":" + target_name

    def entry(self, file_path: str, target_name: str) -> Optional[dict]:
        key = self.key(file_path, target_name)
        return self.targets.get(key) if key else None

    def recipe_for(self, file_path: str, target_name: str) -> Optional[InputRecipe]:
        """The first recorded call as a recipe, with the recorded constructor call when it replays."""
        entry = self.entry(file_path, target_name)
        call = entry.get("call") if entry else None
        if not isinstance(call, dict) or call.get("cannot_replay"):
            return None
        texts = [spec_text(arg.get("spec", {})) for arg in call.get("args", [])]
        if any(t is None for t in texts):
            return None
        text = "(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")"  # type: ignore[arg-type]
        return InputRecipe("recorded", text, self.init_for(file_path, target_name))

    def init_for(self, file_path: str, target_name: str) -> Optional[str]:
        entry = self.entry(file_path, target_name)
        init = entry.get("init") if entry else None
        return init.get("call") if isinstance(init, dict) else None

    def init_problem(self, file_path: str, target_name: str) -> Optional[str]:
        """Why the recorded constructor call cannot be replayed (None when it can, or was not recorded)."""
        entry = self.entry(file_path, target_name)
        init = entry.get("init") if entry else None
        if not isinstance(init, dict) or init.get("call"):
            return None
        args = [a for a in init.get("cannot_replay", []) if a.get("required", True)] or init.get("cannot_replay", [])
        what = ", ".join(f"`{a.get('argument')}` is a `{a.get('type')}`" for a in args) or "its arguments"
        return f"the recorded run built `{target_name}` with arguments Compile Lens cannot write out ({what})"

    def call_problem(self, file_path: str, target_name: str) -> Optional[str]:
        """Why the recorded call gives no recipe (None when it does, or nothing was recorded)."""
        entry = self.entry(file_path, target_name)
        if entry is None:
            return None
        call = entry.get("call")
        if not isinstance(call, dict):
            return (f"the recorded run built `{target_name}` but saw no call of it "
                    "(calls from inside torch.compile'd code are not seen)")
        if call.get("cannot_replay"):
            return f"the recorded call of `{target_name}` cannot be written as positional arguments ({call['cannot_replay']})"
        unknown = [a.get("name") for a in call.get("args", []) if spec_text(a.get("spec", {})) is None]
        if unknown:
            kinds = [_unknown_type(a.get("spec", {})) for a in call.get("args", []) if a.get("name") in unknown]
            return ("the recorded call of `{}` has arguments Compile Lens cannot rebuild ({})"
                    .format(target_name, ", ".join(f"`{n}`: {k}" for n, k in zip(unknown, kinds))))
        return None

    def precision_for(self, file_path: str, target_name: str) -> Optional[str]:
        """What the recorded run's first call ran in ("bf16-autocast", "tf32", "fp32"; None: not recorded)."""
        entry = self.entry(file_path, target_name)
        state = entry.get("precision") if entry else None
        if not isinstance(state, dict):
            return None
        autocast = {"bfloat16": "bf16-autocast", "float16": "fp16-autocast"}.get(str(state.get("autocast")))
        return autocast or ("tf32" if state.get("matmul_tf32") else "fp32")

    def compile_for(self, file_path: str, target_name: str) -> Optional[dict]:
        """The recorded run's `torch.compile` call of the target and the settings then (`compile_calls`)."""
        entry = self.entry(file_path, target_name)
        found = entry.get("compile") if entry else None
        return found if isinstance(found, dict) else None

    def shapes_for(self, file_path: str, target_name: str) -> list:
        """Distinct recorded calls in the order first seen: per call, one shape per tensor argument."""
        entry = self.entry(file_path, target_name)
        out = []
        for item in (entry or {}).get("shapes", []):
            shapes = item.get("shapes") if isinstance(item, dict) else None
            if isinstance(shapes, list) and shapes and all(isinstance(s, list) for s in shapes):
                out.append([list(s) for s in shapes])
        return out


def load_recorded(root: str, path: Optional[str] = None) -> Recorded:
    """What `compile-lens record` wrote for this workspace (empty when nothing was recorded)."""
    path = path or store.default_path(root)
    try:
        stat = os.stat(path)
    except OSError:
        return Recorded(root, path)
    return _load(root, path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _load(root: str, path: str, mtime_ns: int, size: int) -> Recorded:
    return Recorded(root, path, store.read(path))


def _shape(shape: list) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def spec_text(spec: Any) -> Optional[str]:
    """Python source that makes a value like the recorded one, or None when it cannot be made."""
    if not isinstance(spec, dict) or len(spec) != 1:
        return None
    (kind, value), = spec.items()
    if kind == "value" and isinstance(value, str):
        return value
    if kind in ("tuple", "list") and isinstance(value, list):
        items = [spec_text(v) for v in value]
        if any(i is None for i in items):
            return None
        if kind == "list":
            return "[" + ", ".join(items) + "]"  # type: ignore[arg-type]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"  # type: ignore[arg-type]
    if kind == "dict" and isinstance(value, dict):
        items = {k: spec_text(v) for k, v in value.items()}
        if any(v is None for v in items.values()):
            return None
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in items.items()) + "}"
    if kind == "tensor" and isinstance(value, dict):
        return _tensor_text(value)
    return None


def _tensor_text(info: dict) -> Optional[str]:
    shape, dtype = info.get("shape"), str(info.get("dtype", "float32"))
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        return None
    grad = ", requires_grad=True" if info.get("requires_grad") else ""
    if dtype in _FLOATS:
        dims = ", ".join(str(s) for s in shape) if shape else "()"
        kind = "" if dtype == "float32" else f", dtype=torch.{dtype}"
        return f"torch.randn({dims}{kind}{grad})"
    if dtype.startswith("float8"):
        dims = ", ".join(str(s) for s in shape) if shape else "()"
        return f"torch.randn({dims}).to(torch.{dtype})"
    low, high = info.get("min", 0), info.get("max", 1)
    if not isinstance(low, int) or not isinstance(high, int) or high < low:
        low, high = 0, 1
    if dtype == "bool":
        return f"torch.randint(0, 2, {_shape(shape)}).bool()"
    if dtype in _INTEGERS:
        kind = "" if dtype in ("int64", "long") else f", dtype=torch.{dtype}"
        return f"torch.randint({low}, {high + 1}, {_shape(shape)}{kind})"
    return None


def _unknown_type(spec: Any) -> str:
    if isinstance(spec, dict) and "unknown" in spec:
        return f"a `{spec['unknown']}`"
    if isinstance(spec, dict) and "tensor" in spec:
        return f"a {spec['tensor'].get('dtype')} tensor"
    return "a value it cannot rebuild"
