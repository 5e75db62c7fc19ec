"""The user's settings: the VS Code `compileLens.*` keys without the prefix, typed."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Optional

from .cost import BILL_FIELDS, CostInputs
from .protocol import OPT_IN
from .remote_cache import parse as parse_remote

# setting key -> dataclass field
_KEYS = {
    "device": "device",
    "worker.timeoutSeconds": "timeout_s",
    "worker.memoryLimitMB": "memory_limit_mb",
    "worker.spare": "spare_worker",
    "benchmark.onSave": "benchmark_on_save",
    "benchmark.mode": "mode",
    "benchmark.maxSeconds": "max_seconds",
    "benchmark.precision": "precision",
    "benchmark.optIn": "opt_in",
    "gpuBusyThreshold": "gpu_busy_threshold",
    "remoteCache": "remote_cache",
    "lineCosts.inlayHints": "line_hints",
    # the GPU bill (compile_lens/cost.py): the team's own figures; unset (null) means not known
    **{f.key: f.cost for f in BILL_FIELDS},
}
# What each bill key must be, said in the words a rejected value is answered with
_BILL_WORDS = {f.cost: f.words for f in BILL_FIELDS}
_OPTIONAL = {"memory_limit_mb": int, "spare_worker": bool} | {f.cost: f.kind for f in BILL_FIELDS if f.optional} | {"remote_cache": str}
DEVICES = ("auto", "cpu", "cuda")
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# autocast / TF32 the measurement runs in (`discovery/precision.py`); "auto": as recorded, else torch's defaults
PRECISIONS = ("auto", "fp32", "tf32", "bf16-autocast", "fp16-autocast")


@dataclass
class Settings(CostInputs):
    """The editor's settings, and the GPU bill's inputs (`bill.*`, inherited from `cost.CostInputs`)."""

    device: str = "auto"
    timeout_s: float = 60.0  # the longest the worker may go silent (the import, one trace, one stage of a measurement)
    memory_limit_mb: Optional[int] = None  # the worker's whole process tree (PSS); None: half of the machine's
    # a second trace worker kept imported, to replace a crashed one at once; None: where the machine
    # has cores for it (`jobs.lanes.spare_by_default`)
    spare_worker: Optional[bool] = None
    benchmark_on_save: bool = True
    mode: str = "default"
    max_seconds: float = 60.0
    precision: str = "auto"
    # parts of the measurement run whatever max_seconds says (`protocol.OPT_IN`: "strict_export", "batch_sweep", …)
    opt_in: list[str] = field(default_factory=list)
    # percent: background measurements wait while others use the GPU above it (gpu/); a training run
    # keeps a GPU at 80-100 %, an idle notebook at 0
    gpu_busy_threshold: float = 50.0
    remote_cache: Optional[str] = None  # redis://HOST:PORT of the team's Inductor cache; None: the environment's
    line_hints: bool = True  # after a measurement, inlay hints on the costly lines (render/line_costs.py)

    @classmethod
    def from_client(cls, raw: Any) -> tuple[Settings, list[str]]:
        """Accept flat (`{"worker.timeoutSeconds": 5}`) or nested (`{"worker": {...}}`) keys.

        Returns the settings and one message per value that was ignored, for the log.
        """
        settings, problems = cls(), []
        for key, value in _flatten(raw if isinstance(raw, dict) else {}).items():
            name = _KEYS.get(key.removeprefix("compileLens."))
            if name is None:
                continue
            default = getattr(settings, name)
            if name == "opt_in":
                try:
                    settings.opt_in = opt_in_parts(value)
                except (TypeError, ValueError) as exc:
                    problems.append(f"setting {key}={value!r}: {exc or 'must be a list of parts'}; using []")
                continue
            if value is None and name in _OPTIONAL:
                setattr(settings, name, None)  # null: not known (VS Code's default)
                continue
            given = value
            try:
                value = _coerce(value, _OPTIONAL.get(name, type(default)))
            except (TypeError, ValueError):
                problems.append(f"setting {key}={value!r} " + (f"must be {_BILL_WORDS[name]}; it is not used"
                                if name in _BILL_WORDS else f"is not a {_OPTIONAL.get(name, type(default)).__name__}; using {default!r}"))
                continue
            if name == "remote_cache":
                try:
                    value = parse_remote(value).url if value.strip() else None
                except ValueError as exc:
                    problems.append(f"setting {key}: {exc}; measuring without a remote cache")
                    continue
            lowest_ok = name in ("restarts_per_run", "gpu_busy_threshold") and value == 0
            if (name == "device" and value not in DEVICES) or (name == "mode" and value not in MODES) or (
                    name == "precision" and value not in PRECISIONS) or (
                    name == "gpu_busy_threshold" and value > 100) or (
                    isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0 and not lowest_ok):
                problems.append(f"setting {key}={given!r} " + (f"must be {_BILL_WORDS[name]}; it is not used"
                                if name in _BILL_WORDS else f"is not allowed; using {default!r}"))
                continue
            setattr(settings, name, value)
        return settings, problems

    def as_client(self) -> dict[str, Any]:
        names = {v: k for k, v in _KEYS.items()}
        return {names[f.name]: getattr(self, f.name) for f in fields(self)}


def opt_in_parts(value: Any) -> list[str]:
    """`benchmark.optIn` (a list) or `check --with` (one comma-separated string) as `protocol.OPT_IN`
    names, in the order given, each once (`strict-export` is `strict_export`). ValueError names the
    first one that is not a part and the parts that are; TypeError: not a list of strings."""
    words = value.split(",") if isinstance(value, str) else value
    if not isinstance(words, (list, tuple)) or not all(isinstance(w, str) for w in words):
        raise TypeError
    parts = [w.strip().replace("-", "_") for w in words if w.strip()]
    bad = next((w for w in parts if w not in OPT_IN), None)
    if bad is not None:
        raise ValueError(f"`{bad}` is not a part that can be opted in (parts: {', '.join(OPT_IN)})")
    return list(dict.fromkeys(parts))


def _flatten(raw: dict, prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict) and full.removeprefix("compileLens.") not in _KEYS:
            flat.update(_flatten(value, full + "."))
        else:
            flat[full] = value
    return flat


def _coerce(value: Any, kind: type) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise TypeError
    if kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError
        if kind is int and value != int(value):
            raise ValueError  # 1.5 GPUs is a mistake, not 1
        return kind(value)
    if not isinstance(value, kind):
        raise TypeError
    return value
