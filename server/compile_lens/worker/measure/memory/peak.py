"""Peak memory of one call, counted where tensors are allocated (not page-granular RSS).

- CUDA: `torch.cuda.max_memory_allocated` after `reset_peak_memory_stats`, minus what was
  allocated before the call (weights, inputs, the optimizer's state).
- CPU: torch's profiler with `profile_memory=True` records every allocation and free of the CPU
  allocator with its time; the peak of the running sum over the call is the most tensor memory
  the call held at once (activations, saved tensors, gradients, outputs, workspace), again
  without what existed before. Peak RSS growth, used before, saw nothing when the allocator
  reused freed pages and showed "0 B" for models that do allocate activations.

Both count tensor bytes as the allocator hands them out; allocator overhead and fragmentation
are not included.
"""

from __future__ import annotations

import gc
import os
from typing import Any, Callable, Optional

import torch


def method(device: str, workload: str) -> str:
    what = "one train step" if workload == "train" else "one forward"
    if device.startswith("cuda"):
        return (f"allocator peak over {what}: torch.cuda.max_memory_allocated above what was "
                "allocated before (weights and inputs not counted)")
    return (f"allocator peak over {what}: torch profiler memory events (profile_memory=True), tensor "
            "bytes above what was allocated before (weights and inputs not counted)")


def cuda_peak(call: Callable[[], Any], device: str) -> int:
    torch.cuda.synchronize(device)
    gc.collect()
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    call()
    torch.cuda.synchronize(device)
    return max(0, int(torch.cuda.max_memory_allocated(device)) - int(before))


def _allocations(prof: Any) -> list[tuple[int, int]]:
    """(time ns, bytes: + allocated / - freed) of every CPU allocator event, from the profiler's
    event tree (private API: None-safe walk), else from its `[memory]` events and ops."""
    found: list[tuple[int, int]] = []
    try:
        from torch._C._profiler import _EventType

        stack = list(prof.profiler.kineto_results.experimental_event_tree())
        while stack:
            node = stack.pop()
            if node.tag == _EventType.Allocation:
                extra = node.extra_fields
                if str(getattr(extra, "device", "cpu")).startswith("cpu"):
                    found.append((int(node.start_time_ns), int(extra.alloc_size)))
            stack.extend(node.children)
        return found
    except Exception:  # noqa: BLE001 - private API moved: fall back to the public events
        found = []
    for e in prof.events():
        # ops carry the net bytes of the allocations inside them; `[memory]` events the rest
        usage = getattr(e, "self_cpu_memory_usage", None) if e.name != "[memory]" else e.cpu_memory_usage
        if usage:
            found.append((int(e.time_range.start * 1000), int(usage)))
    return found


def start_memory_profile() -> Any:
    """An entered CPU `torch.profiler.profile(profile_memory=True)`; the caller exits it.

    Kineto prints "profiler_start"/"profiler_stop" lines to stderr at every profile; in a trial
    they land in the user's own output. It reads its log level once, when its first profile
    starts, so the level is set to silent (above USDT, 5, its highest) just for that moment,
    unless the user chose one; the program's environment is left as it was."""
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    chosen = "KINETO_LOG_LEVEL" in os.environ
    if not chosen:
        os.environ["KINETO_LOG_LEVEL"] = "6"
    try:
        prof.__enter__()
    finally:
        if not chosen:
            os.environ.pop("KINETO_LOG_LEVEL", None)
    return prof


def cpu_peak(call: Callable[[], Any]) -> Optional[int]:
    """Peak of the running sum of allocations over one call (bytes), or None when the profiler
    recorded nothing it could read."""
    gc.collect()
    prof = start_memory_profile()
    try:
        call()
    finally:
        prof.__exit__(None, None, None)
    return allocation_peak(prof)


def allocation_peak(prof: Any) -> Optional[int]:
    """Peak of the running sum of a finished `profile(profile_memory=True)`'s CPU allocations
    (bytes above what existed when it started), or None when it recorded nothing readable."""
    events = sorted(_allocations(prof))
    if not events:
        return None
    current = peak = 0
    for _, size in events:
        current += size
        peak = max(peak, current)
    return peak


def record_peaks(memory: dict[str, Any], calls: dict[str, tuple[Callable[[], Any], Callable[[], None]]], device: str,
                 unmeasured: dict[str, str]) -> None:
    """`memory[side]` = `peak_of` each side's (call, zero_grad), `isolated`: a failure leaves both
    unset, its why in `memory["method"]` and `unmeasured["peak memory"]`."""
    from ..run.isolated import (
        isolated,  # here: a trial imports this module inside the user's program
    )

    with isolated("peak memory", unmeasured) as part:
        for side, (call, zero_grad) in calls.items():
            memory[side] = peak_of(call, zero_grad, device)
    if part.why:
        memory.update(eager=None, compiled=None, method=part.why)
    elif memory.get("eager") is None and memory.get("compiled") is None:
        memory["method"] = "unavailable: the profiler recorded no allocations"


def peak_of(call: Callable[[], Any], zero_grad: Callable[[], None], device: str) -> Optional[int]:
    """Peak of one call after a warm-up call; the last step's gradients are dropped first, so the
    call allocates them again, as every training step does after `zero_grad()`."""
    call()
    zero_grad()
    if device.startswith("cuda"):
        return cuda_peak(call, device)
    return cpu_peak(call)
