"""The user's settings: the VS Code `compileLens.*` keys without the prefix, typed."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

# setting key -> dataclass field
_KEYS = {
    "device": "device",
    "worker.timeoutSeconds": "timeout_s",
    "worker.memoryLimitMB": "memory_limit_mb",
    "benchmark.onSave": "benchmark_on_save",
    "benchmark.mode": "mode",
    "benchmark.maxSeconds": "max_seconds",
}
DEVICES = ("auto", "cpu", "cuda")
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass
class Settings:
    device: str = "auto"
    timeout_s: float = 60.0  # the longest one step (import, one trace, one benchmark stage) may take
    memory_limit_mb: int = 4096  # the worker's whole process tree, RSS
    benchmark_on_save: bool = True
    mode: str = "default"
    max_seconds: float = 60.0

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
            try:
                value = _coerce(value, type(default))
            except (TypeError, ValueError):
                problems.append(f"setting {key}={value!r} is not a {type(default).__name__}; using {default!r}")
                continue
            if (name == "device" and value not in DEVICES) or (name == "mode" and value not in MODES) or (
                isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0):
                problems.append(f"setting {key}={value!r} is not allowed; using {default!r}")
                continue
            setattr(settings, name, value)
        return settings, problems

    def as_client(self) -> dict[str, Any]:
        names = {v: k for k, v in _KEYS.items()}
        return {names[f.name]: getattr(self, f.name) for f in fields(self)}


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
        return kind(value)
    if not isinstance(value, kind):
        raise TypeError
    return value
