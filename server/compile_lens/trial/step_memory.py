"""The peak memory of one training step on the CPU, inside the user's program (trial hook).

torch has no CPU counterpart of `torch.cuda.max_memory_allocated`, so one steady step — the middle
one of `--steps` (past warm-up; the fourth without it), the same index in both runs — runs under
torch's profiler with `profile_memory=True`, and the peak of its allocations' running sum is the
most tensor memory the step held at once (activations, gradients, optimizer work), above what
existed when it began, as the benchmark measures one train step (`worker/measure/memory/peak.py`). The profiler
slows that step, so the summary leaves it out of the step times. Stdlib only at import.
"""

from __future__ import annotations

from typing import Any

_profiler: Any = None  # the profile over the step being measured
_figure: dict = {}  # {"bytes", "step", "compiled"} once measured, or {"note"} when it could not be


def profiled_step(steps_limit: int) -> int:
    return max(1, steps_limit // 2) if steps_limit else 3


def start(index: int, steps_limit: int) -> None:
    """At the start of step `index`: profile it if it is the one measured."""
    global _profiler
    if _profiler is not None or _figure or index != profiled_step(steps_limit):
        return
    try:
        from compile_lens.worker.measure.memory.peak import start_memory_profile

        _profiler = start_memory_profile()
    except Exception as exc:  # noqa: BLE001 - never change what the program does
        _profiler = None
        _figure["note"] = f"not measured: the profiler did not start ({type(exc).__name__}: {exc})"


def running() -> bool:
    return _profiler is not None


def end(step: dict) -> None:
    """At the end of the measured step: stop, read its peak, mark the step `profiled`."""
    global _profiler
    profiler, _profiler = _profiler, None
    step["profiled"] = True
    try:
        profiler.__exit__(None, None, None)
        from compile_lens.worker.measure.memory.peak import allocation_peak

        peak = allocation_peak(profiler)
        if peak is None:
            _figure["note"] = "not measured: torch's profiler recorded no allocation it could read"
        else:
            _figure.update(bytes=peak, step=step["index"], compiled=bool(step.get("compiles")))
    except Exception as exc:  # noqa: BLE001
        _figure["note"] = f"not measured: {type(exc).__name__}: {exc}"


def figures(steps_limit: int) -> dict:
    """`peak_memory_bytes` with `memory_method`, or None with `memory_note`, for the run's record."""
    if "bytes" not in _figure:
        return {"peak_memory_bytes": None, "memory_note": _figure.get("note") or (
            f"not measured: the run ended before step {profiled_step(steps_limit)}, the one profiled on the CPU")}
    method = (
        f"allocator peak of step {_figure['step']}: torch profiler memory events (profile_memory=True), tensor "
        "bytes above what existed when the step began (weights, optimizer state and inputs not counted)")
    if _figure["compiled"]:
        method += "; the step compiled, so compiling is included"
    return {"peak_memory_bytes": _figure["bytes"], "memory_method": method}
