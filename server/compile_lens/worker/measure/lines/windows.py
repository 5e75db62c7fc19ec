"""The profiled calls of a line-cost measurement (`line_costs`), on the profiler's clocks.

- **One call, one time window.** Each profiled call runs inside a range `compile_lens.call:<i>`;
  an event belongs to the call whose window holds its start, whatever thread ran it. A parent
  chain is not enough: on CUDA autograd runs the backward on its own device thread, whose events
  have no parent in the call's range (seen on an H200: the train step's profile was the size of
  the forward's). The same rule on the CPU and on CUDA, so the CPU tests exercise it (a
  TorchScript `fork` runs its ops on another thread, as the device thread does).
- **CPU:** an event's time is its self CPU time; a call's total is their sum.
- **CUDA:** an event's time is the device time of the kernels it launched (the profiler correlates
  each kernel with the op or range open when it was launched: `self_device_time_total`). A
  call's device-busy time is the time any device activity (kernel, copy, set) launched in its
  window ran, and its window's length, read back from the profile's exported trace by the reader
  `compile-lens import` runs (`kineto.profile.calls_busy`, held to HTA on real GPU traces); what no
  op took of it is "kernels without a line"; the GPU idle within the call is the timed call
  (unprofiled: the profiler slows the launches, not the kernels) less that busy time. Lines and
  reasons then add up to busy + idle: the profile's total on CUDA (`device_parts`).
- **Quiet calls:** the mean over the quieter half of the calls (each call's total at or below the
  median): a call the OS preempted is not steady state, as the timing's medians say.
- **GPU idle share:** read by the one profiler-trace reader (`compile_lens.kineto`), from the profile
  exported as the Kineto trace a user's own profile is (`gpu_idle_share`): the line costs' figure
  (`Timing.gpu_idle_share`) and the CUDA-graphs lever's before and after are what `compile-lens import`
  reads from a run recorded anywhere, and the real GPU traces the tests read test this arithmetic.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import os
import tempfile
import weakref
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import torch

from ....kineto.fold import fold
from ....kineto.profile import RankProfile, calls_busy, calls_idle_share, summarise
from ....protocol import PROFILE_DIR_ENV

CALL = "compile_lens.call:"  # one range per profiled call
WHY_KERNELS_NO_LINE = "kernels without a line"
WHY_GPU_IDLE = "GPU idle within the call (launch overhead, Python, waits)"


def cuda(device: str) -> bool:
    return device.startswith("cuda")


def self_us(evt: Any, device: str) -> float:
    if cuda(device):
        return float(getattr(evt, "self_device_time_total", 0.0) or 0.0)
    return float(evt.self_cpu_time_total)


def total_us(evt: Any, device: str) -> float:
    if cuda(device):
        return float(getattr(evt, "device_time_total", 0.0) or 0.0)
    return float(evt.cpu_time_total)


def nearest(evt: Any, test: Callable[[Any], bool]) -> Any:
    """The closest ancestor on the event's own thread that passes `test`."""
    p = evt.cpu_parent
    while p is not None and not test(p):
        p = p.cpu_parent
    return p


def profile(call: Callable[[], Any], n: int, device: str, mode: Any = None) -> Any:
    """`n` calls of `call` under the profiler (CPU ops; CUDA kernels on a GPU), each in its own
    `compile_lens.call:<i>` range and, on CUDA, synchronised inside it: its kernels end in its window."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda(device) else [])
    call()  # one call outside the profile: lazy initialisations are not steady state
    with torch_profile(activities=activities) as prof, (mode if mode is not None else contextlib.nullcontext()):
        for i in range(n):
            with torch.profiler.record_function(f"{CALL}{i}"):
                call()
                if cuda(device):
                    torch.cuda.synchronize()
    return prof


@dataclass
class Calls:
    """The quieter half of a profile's calls: their host events, and per call (means) the window's
    length and, on CUDA, the device-busy time of the activities in it."""

    events: list[Any]
    n: int
    wall_us: float = 0.0
    busy_us: float = 0.0


def _host(evt: Any) -> bool:
    cpu = getattr(getattr(torch.autograd, "DeviceType", None), "CPU", None)
    return cpu is None or getattr(evt, "device_type", cpu) == cpu


def calls(prof: Any, device: str) -> Calls:
    """Every event given to the call whose window holds its start (any thread), the quieter half kept."""
    events = [e for e in prof.events() if not getattr(e, "is_async", False)]
    ranges = sorted((e for e in events if _host(e) and e.name.startswith(CALL)), key=lambda e: e.time_range.start)
    if not ranges:
        return Calls([], 1)
    starts = [r.time_range.start for r in ranges]

    def window(evt: Any) -> Optional[int]:
        at = evt.time_range.start
        i = bisect.bisect_right(starts, at) - 1
        return i if i >= 0 and at <= ranges[i].time_range.end else None

    host: dict[int, list[Any]] = defaultdict(list)
    for evt in events:
        i = window(evt)
        if i is not None and _host(evt):  # a device activity's time is the reader's (`calls_busy`)
            host[i].append(evt)

    def wall(i: int) -> float:
        return ranges[i].time_range.end - ranges[i].time_range.start

    def total(i: int) -> float:
        return wall(i) if cuda(device) else sum(self_us(e, device) for e in host[i])

    totals = sorted((total(i), i) for i in range(len(ranges)))
    median = totals[(len(totals) - 1) // 2][0]
    kept = [i for t, i in totals if t <= median]
    n = len(kept)
    if cuda(device):  # the device clock as `compile-lens import` reads it: the same quieter half, by range
        wall_us, busy_us = calls_busy(read_back(prof).calls)
        return Calls([e for i in kept for e in host[i]], n, wall_us, busy_us)
    return Calls([e for i in kept for e in host[i]], n, sum(wall(i) for i in kept) / n, 0.0)


def device_parts(found: Calls, named_us: float, timed_us: Optional[float]) -> tuple[float, dict[str, float]]:
    """CUDA: the profile's total per call (busy + idle) and the two parts no op's kernels took:
    kernels without a line (the busy time no named op's kernels account for) and the GPU idle
    within the call (the timed call less the busy time; the profile's own window when there is
    no timed call). `named_us`: what the lines and the named reasons took, per call."""
    busy = max(found.busy_us, named_us)
    call_us = timed_us if timed_us else found.wall_us
    idle = max(0.0, call_us - busy)
    return busy + idle, {WHY_KERNELS_NO_LINE: busy - named_us, WHY_GPU_IDLE: idle}


_LABEL: contextvars.ContextVar[str] = contextvars.ContextVar("compile_lens_profile", default="calls")


@contextlib.contextmanager
def labelled(label: str) -> Iterator[None]:
    """Name the profiles taken inside (a kept file is `<label>-<side>-….pt.trace.json`: the target and workload)."""
    token = _LABEL.set(label)
    try:
        yield
    finally:
        _LABEL.reset(token)


def export(prof: Any, side: str, folder: Optional[str] = None) -> str:
    """The profile as the Kineto trace (`export_chrome_trace`) a user's own profile is: into `folder`
    when given (kept for Perfetto, TensorBoard or `compile-lens import`), else a temporary file."""
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{_LABEL.get()}-{side}-")
    fd, path = tempfile.mkstemp(prefix=name, suffix=".pt.trace.json", dir=folder)
    os.close(fd)
    prof.export_chrome_trace(path)
    return path


_READ: weakref.WeakKeyDictionary[Any, RankProfile] = weakref.WeakKeyDictionary()


def read_back(prof: Any, side: str = "compiled") -> RankProfile:
    """The profile as the import's reader reads its exported trace (once: torch exports a profile only
    once); the file kept in `check --profile-dir`'s folder, else removed."""
    found = _READ.get(prof)
    if found is None:
        kept = os.environ.get(PROFILE_DIR_ENV) or None
        path = export(prof, side, kept)
        try:
            found = _READ[prof] = summarise(fold(path))
        finally:
            if kept is None:
                os.unlink(path)
    return found


def keep(prof: Any, side: str) -> None:
    """Under `check --profile-dir`: write the profile there (a profile the reader already read is there)."""
    if os.environ.get(PROFILE_DIR_ENV) and prof not in _READ:
        read_back(prof, side)


def gpu_idle_share(prof: Any, timed_us: Optional[float] = None) -> Optional[float]:
    """The share of a profiled call the GPU sat idle (`kineto.profile.calls_idle_share` over the
    profile's `compile_lens.call:<i>` ranges, read back from its exported trace by the reader
    `compile-lens import` uses); None where it has no call ranges, 1.0 for a CPU profile."""
    return calls_idle_share(read_back(prof).calls, timed_us)
