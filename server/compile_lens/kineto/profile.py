"""What one rank's GPU did, from its folded trace (`fold.Folded`): `summarise(folded) -> RankProfile`.

- **Busy and idle, as HTA computes them.** Busy is the union of the device activities' intervals
  (kernels, copies, sets on every stream), split into compute, memory and communication; the GPU
  idle share is the time between the first activity's start and the last one's end that no activity
  covers, over that span. Where a trace has two or more `ProfilerStep`s, the last step is left out
  (the profiler usually stops inside it) and so is any activity no launch before it made: HTA's
  rule, so the two agree on the same file.
- **Per step**: the activities launched inside the step's host range, the same figures over their span.
  The live measurement's `compile_lens.call:<i>` ranges (`calls`, one call each, not a step)
  are windows of the same kind (`fold.Window`), read the same way.
- **Launch-bound**, with why: the GPU idle a large share of its span *and* either many short kernels
  (launches cost a few µs each: kernels that short cannot hide them) or CPU ops that took longer
  on the host than their kernels took on the GPU.
- **CUDA graphs**: graph launches are counted. A replayed graph's kernels carry its launch's
  correlation id; when a trace holds graph launches and none of their kernels, the profiler did not
  record the replays and the GPU idle share would be falsely high (HTA#290): it is not given, and why.
- **Whose kernel**: each launch's innermost CPU op on its own thread, and (`with_stack=True`) its
  innermost Python frame outside libraries: `file.py(LINE): function`, LINE being the function's
  `def` line (the profiler's Python tracer records frames as they are entered).
"""

from __future__ import annotations

import bisect
import statistics
from array import array
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Optional

from .fold import COMPUTE, KINDS, OP, PYTHON, Folded, Frame, Window, frame_of

LAUNCH_BOUND = 0.30  # GPU idle this share of its span: launches and host work, not kernels, set the pace
SHORT_KERNEL_US = 10.0  # a median kernel this short is of the order of its launch (~5 µs)
TOP = 10


@dataclass
class KernelRow:
    name: str
    us: float
    count: int
    share: float  # of the rank's busy time
    op: Optional[str]  # the CPU op that launched it most (by GPU time)
    frames: list[tuple[Frame, float]] = field(default_factory=list)  # innermost user frames, by GPU time


@dataclass
class WindowFigures:
    name: str
    number: int
    host_us: float  # the window's host range
    busy_us: dict[str, float]
    span_us: float  # first activity start → last activity end
    gpu_idle_share: Optional[float]
    kernels: int
    union_us: float = 0.0  # the time any activity ran (busy, all kinds together)


@dataclass
class RankProfile:
    path: str
    rank: Optional[int]
    device: Optional[str]
    events: int
    kernels: int  # device activities counted (kernels, copies, sets)
    busy_us: dict[str, float]
    span_us: float
    gpu_idle_share: Optional[float]
    idle_note: Optional[str]  # why there is no idle share, or what bounds it
    steps: list[WindowFigures]
    calls: list[WindowFigures]  # the live measurement's call ranges
    launch_bound: Optional[bool]
    launch_why: list[str]
    cudagraph_launches: int
    cudagraph_kernels: int
    top_kernels: list[KernelRow]
    kernel_us: dict[str, float]  # every kernel name's time (provenance puts them on lines)
    clock: str  # "gpu"; "cpu" for a CPU-only profile whose Inductor C++ kernels are named (`cpp.enable_kernel_profile`)
    frames: list[tuple[Frame, float, list[str]]]  # every user frame: GPU µs and its kernels' names
    with_stack: bool
    truncated: bool
    scope: Optional[str]  # what part of the trace the rank's figures cover, when not all of it


def merged_busy(intervals: list[tuple[float, float]]) -> tuple[float, float]:
    """(union length, span) of (start, end) intervals."""
    if not intervals:
        return 0.0, 0.0
    intervals.sort()
    busy = 0.0
    cur_s, cur_e = intervals[0]
    first, last = cur_s, cur_e
    for s, e in intervals[1:]:
        last = max(last, e)
        if s > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    busy += cur_e - cur_s
    return busy, last - first


def _ascending(values: array) -> bool:
    return all(values[i] <= values[i + 1] for i in range(len(values) - 1))


def _by_start(f: Folded, hosts: array) -> array:
    """A thread's host ranges by start, a parent before the child that starts with it (two stable sorts,
    float keys: a tuple key per range would be the largest thing the reader ever holds)."""
    if all((f.h_ts[a], -f.h_end[a]) <= (f.h_ts[b], -f.h_end[b])  # Kineto writes a thread's CPU ops in order
           for a, b in zip(hosts, hosts[1:])):
        return hosts
    order = sorted(hosts, key=lambda h: -f.h_end[h])
    order.sort(key=f.h_ts.__getitem__)
    return array("l", order)


class _Launches:
    """Launches by correlation id, each with its innermost CPU op and user frame (host range indices),
    in typed arrays: this is the reader's largest state after the fold's own."""

    def __init__(self, f: Folded) -> None:
        n = len(f.l_corr)
        if _ascending(f.l_corr):  # launches are written in time order, and ids grow with time
            self.corr, self.ts = f.l_corr, f.l_ts
            tids = f.l_tid
        else:
            order = sorted(range(n), key=f.l_corr.__getitem__)
            self.corr = array("q", (f.l_corr[i] for i in order))
            self.ts = array("d", (f.l_ts[i] for i in order))
            tids = array("q", (f.l_tid[i] for i in order))
            del order
        self.op = array("l", [-1]) * n  # the innermost CPU op, else `record_function` range
        self.frame = array("l", [-1]) * n  # the innermost Python function outside libraries
        by_tid: dict[int, array] = {}
        for j in range(n):
            by_tid.setdefault(tids[j], array("l")).append(j)
        hosts: dict[int, array] = {}
        for h in range(len(f.h_ts)):
            hosts.setdefault(f.h_tid[h], array("l")).append(h)
        user: dict[int, bool] = {}
        for tid, launches in by_tid.items():
            if not _ascending(array("d", (self.ts[j] for j in launches))):
                launches = array("l", sorted(launches, key=self.ts.__getitem__))
            ranges = _by_start(f, hosts.pop(tid, array("l")))
            stack: list[int] = []
            k = 0
            for j in launches:
                t = self.ts[j]
                while k < len(ranges) and f.h_ts[ranges[k]] <= t:
                    while stack and f.h_end[stack[-1]] < f.h_ts[ranges[k]]:
                        stack.pop()
                    stack.append(ranges[k])
                    k += 1
                while stack and f.h_end[stack[-1]] < t:
                    stack.pop()
                annotation = -1
                for h in reversed(stack):
                    cat = f.h_cat[h]
                    if cat == PYTHON:
                        if self.frame[j] < 0:
                            name = f.h_name[h]
                            if name not in user:
                                user[name] = frame_of(f.names[name]) is not None
                            if user[name]:
                                self.frame[j] = h
                    elif cat == OP:
                        if self.op[j] < 0:
                            self.op[j] = h
                    elif annotation < 0:
                        annotation = h
                    if self.op[j] >= 0 and (self.frame[j] >= 0 or not f.with_stack):
                        break
                if self.op[j] < 0:
                    self.op[j] = annotation

    def find(self, corr: int) -> int:
        i = bisect.bisect_left(self.corr, corr)
        return i if i < len(self.corr) and self.corr[i] == corr else -1


def _figures(f: Folded, rows: list[int], window: Window) -> WindowFigures:
    busy = dict.fromkeys(KINDS, 0.0)
    by_kind: dict[int, list[tuple[float, float]]] = defaultdict(list)
    everything = []
    for i in rows:
        iv = (f.d_start[i], f.d_start[i] + f.d_dur[i])
        by_kind[f.d_kind[i]].append(iv)
        everything.append(iv)
    for kind, ivs in by_kind.items():
        busy[KINDS[kind]] = merged_busy(ivs)[0]
    union, span = merged_busy(everything)
    return WindowFigures(window.name, window.number, window.end - window.start, busy, span,
                       (span - union) / span if span > 0 else None, len(rows), union)


def _per_window(f: Folded, windows: list[Window], launch_ts: array) -> list[WindowFigures]:
    """Each window's activities (a step's or a call's): those launched inside its host range (an
    activity with no launch: by its start)."""
    if not windows:
        return []
    starts = [s.start for s in windows]
    rows: list[list[int]] = [[] for _ in windows]
    for i in range(len(f.d_start)):
        t = launch_ts[i] if launch_ts[i] >= 0 else f.d_start[i]
        k = bisect.bisect_right(starts, t) - 1
        if k >= 0 and t <= windows[k].end:
            rows[k].append(i)
    return [_figures(f, r, s) for r, s in zip(rows, windows)]


def _unique(steps: list[Window]) -> list[Window]:
    seen: set[int] = set()
    out = []
    for s in steps:  # a step named by both a CPU op and an annotation is one step
        if s.number not in seen:
            seen.add(s.number)
            out.append(s)
    return out


def summarise(f: Folded) -> RankProfile:
    launches = _Launches(f)
    n = len(f.d_start)
    launch_of = array("l", (launches.find(f.d_corr[i]) if f.d_corr[i] >= 0 else -1 for i in range(n)))
    launch_ts = array("d", (launches.ts[j] if j >= 0 else -1.0 for j in launch_of))
    steps = _unique(f.steps)
    scope = None
    rows = list(range(n))
    graph_launches = len(f.graph_launch_ts)
    if len(steps) >= 2:  # HTA's rule: the last step is left out, and what no launch before it made
        cut = steps[-1].start
        rows = [i for i in rows if 0 <= launch_ts[i] < cut]
        graph_launches = sum(1 for t in f.graph_launch_ts if t < cut)
        scope = (f"steps {steps[0].number}–{steps[-2].number} of {steps[0].number}–{steps[-1].number}: "
                 "the last step is left out (the profiler stops inside it)")
    whole = _figures(f, rows, Window("whole", -1, 0.0, 0.0))
    graph_kernels = sum(1 for i in rows if f.d_corr[i] in f.graph_corrs) if f.graph_corrs else 0
    idle = whole.gpu_idle_share
    note = None
    if n == 0:
        idle, note = None, "no GPU activity in this trace"
    elif graph_launches and graph_kernels == 0:
        idle, note = None, (f"{graph_launches} CUDA-graph launches and none of their kernels in this trace (the "
                            "profiler did not record the replays): the GPU idle share would read falsely high")
    elif graph_launches:
        note = f"{graph_launches} CUDA-graph launches; their {graph_kernels} kernels recorded are counted"

    kernels = _Kernels(f, rows, launches, launch_of, sum(whole.busy_us.values()) or 1.0)
    bound, why = _launch_bound(f, idle, kernels.durations, kernels.op_gpu)
    calls = _per_window(f, f.calls, launch_ts)
    return RankProfile(
        path=f.path, rank=f.rank, device=f.device_name(), events=f.events, kernels=len(rows), busy_us=whole.busy_us,
        span_us=whole.span_us, gpu_idle_share=idle, idle_note=note, steps=_per_window(f, steps, launch_ts),
        calls=calls, launch_bound=bound, launch_why=why, cudagraph_launches=graph_launches,
        cudagraph_kernels=graph_kernels, top_kernels=kernels.top,
        kernel_us={f.names[k]: t for k, t in kernels.us.items()} or dict(f.cpu_kernel_us), clock="gpu" if n else "cpu",
        frames=kernels.user_frames, with_stack=f.with_stack, truncated=f.truncated, scope=scope)


class _Kernels:
    """The activities in scope by kernel name: GPU time and count, the CPU op that launched each most,
    the user frames above that op; per CPU op (host range) the GPU time it launched; compute durations."""

    def __init__(self, f: Folded, rows: list[int], launches: _Launches, launch_of: array, busy: float) -> None:
        self.us: Counter = Counter()
        count: Counter = Counter()
        ops: dict[int, Counter] = defaultdict(Counter)
        frames: dict[int, Counter] = defaultdict(Counter)
        self.op_gpu: Counter = Counter()  # host range index -> GPU µs it launched
        frame_us: Counter = Counter()  # Python function name id -> GPU µs
        frame_kernels: dict[int, Counter] = defaultdict(Counter)
        self.durations: list[float] = []
        for i in rows:
            name, d = f.d_name[i], f.d_dur[i]
            self.us[name] += d
            count[name] += 1
            if f.d_kind[i] == COMPUTE:
                self.durations.append(d)
            j = launch_of[i]
            if j < 0:
                continue
            if launches.op[j] >= 0:
                ops[name][f.h_name[launches.op[j]]] += d
                self.op_gpu[launches.op[j]] += d
            if launches.frame[j] >= 0:
                fid = f.h_name[launches.frame[j]]
                frames[name][fid] += d
                frame_us[fid] += d
                frame_kernels[fid][name] += d
        self.top = [KernelRow(f.names[name], t, count[name], t / busy,
                              f.names[ops[name].most_common(1)[0][0]] if ops[name] else None,
                              [(_user(f, fid), s) for fid, s in frames[name].most_common(3)])
                    for name, t in self.us.most_common(TOP)]
        self.user_frames = [(_user(f, fid), s, [f.names[k] for k, _ in frame_kernels[fid].most_common(3)])
                            for fid, s in frame_us.most_common()]


def _user(f: Folded, name_id: int) -> Frame:
    frame = frame_of(f.names[name_id])
    assert frame is not None  # only user frames are kept (`_Launches`)
    return frame


def _launch_bound(f: Folded, idle: Optional[float], durations: list[float], op_gpu: Counter) -> tuple[Optional[bool], list[str]]:
    if idle is None:
        return None, []
    why: list[str] = []
    if durations:
        median = statistics.median(durations)
        if median < SHORT_KERNEL_US:
            why.append(f"{len(durations)} compute kernels, median {median:.1f} µs: each about as short as its launch")
    ops = [h for h in op_gpu if f.h_cat[h] == OP]  # a `record_function` range is no op's CPU cost
    host = sum(f.h_end[h] - f.h_ts[h] for h in ops)
    gpu = sum(op_gpu[h] for h in ops)
    if gpu > 0 and host > gpu:
        why.append(f"the ops that launched kernels took {host / gpu:.1f}× their kernels' GPU time on the CPU")
    if idle >= LAUNCH_BOUND:
        gaps = f"the GPU sat idle {idle:.0%} of its span between kernels"
        return bool(why), [gaps, *why] if why else [gaps + " (waits or host work, not launches: no short kernels or slow ops)"]
    return False, [f"the GPU was busy {1 - idle:.0%} of its span", *why]


def calls_idle_share(calls: list[WindowFigures], timed_us: Optional[float] = None) -> Optional[float]:
    """The live measurement's figure (`Timing.gpu_idle_share`, the CUDA-graphs lever's before/after): over
    the quieter half of the profiled calls (each call's host range at or below the median: a call the OS
    preempted is not steady state), the GPU idle within a call — the timed call (unprofiled: the profiler
    slows launches, not kernels; else the range) less the time any activity ran — over busy + idle. A
    call with no device activity (a CPU profile) idled the GPU throughout: 1.0. None without calls."""
    if not calls:
        return None
    wall, busy = calls_busy(calls)
    idle = max(0.0, (timed_us or wall) - busy)
    return idle / (busy + idle) if busy + idle > 0 else None


def calls_busy(calls: list[WindowFigures]) -> tuple[float, float]:
    """Over the quieter half of the calls (each call's host range at or below the median), the mean
    range and the mean time any device activity ran in a call: the live line costs' device clock."""
    walls = sorted(c.host_us for c in calls)
    median = walls[(len(walls) - 1) // 2]
    kept = [c for c in calls if c.host_us <= median]
    return sum(c.host_us for c in kept) / len(kept), sum(c.union_us for c in kept) / len(kept)
