"""One profiler trace (one rank) folded into what its GPU did: `fold(path) -> Folded`.

Kept per event, in typed arrays (`array`, a few bytes an event, never a dict per event): the device
activities (kernels, copies, sets: start, duration, correlation id, name, kind), the launches (the
runtime/driver calls that carry a correlation id: thread, start), and the host ranges a launch can
sit in (CPU ops and, with `with_stack=True`, the Python functions of the user's own files — most of a
stack trace's frames are libraries', and only the user's can name a line: thread, start, end, name).
Names are interned. Everything is resolved once the file is read (`profile.summarise`).

What counts as what, as HTA counts it (the independent reference the tests hold this to):
communication is a kernel named `nccl…Kernel` (rccl's too); memory is a copy or a set (`Memcpy…`,
`Memset…`, `dma…`) or an activity of those categories; every other kernel is compute.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from typing import Any, Optional

from .stream import TraceFile

COMM_RE = re.compile(r"^(nccl|rccl).*Kernel", re.IGNORECASE)
MEMORY_RE = re.compile(r"^(Memcpy|Memset|dma)")
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}  # lower-cased; old Kineto: "Kernel"
MEMORY_CATS = {"gpu_memcpy", "gpu_memset", "memcpy", "memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime", "hip_runtime", "hip_driver"}
HOST_CATS = {"cpu_op", "user_annotation", "python_function"}
GRAPH_LAUNCHES = ("cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch")
COMPUTE, MEMORY, COMMUNICATION = 0, 1, 2
OP, ANNOTATION, PYTHON = 0, 1, 2  # host ranges: a CPU op, a `record_function` range, a Python function
KINDS = ("compute", "memory", "communication")
STEP_RE = re.compile(r"^ProfilerStep\s*#\s*(\d+)$")
CALL_PREFIX = "compile_lens.call:"  # the live measurement's own ranges: one per profiled call
# Inductor's C++ kernels as a CPU profile names them: `graph_0_cpp_fused_relu_0` (`cpp.enable_kernel_profile`),
# `compile_lens.kernel:0:cpp_fused_relu_0` (the live measurement's own ranges, `provenance.kernel_ranges`)
CPU_KERNEL_RE = re.compile(r"^(?:graph_\d+_|compile_lens\.kernel:\d+:)?(cpp_fused_\w+)$")
PY_FRAME_RE = re.compile(r"^(?P<path>.+?)\((?P<line>\d+)\): (?P<func>.+)$")
LIBRARY_PARTS = ("site-packages/", "dist-packages/", "/lib/python3", "torch/", "<frozen ", "<string>")


@dataclass
class Frame:
    path: str  # as the run wrote it (`PathMap` maps it onto a workspace)
    line: int  # the function's `def` line
    function: str


def frame_of(name: str) -> Optional[Frame]:
    """A Python function event's frame, None for a library's, a built-in or a name not of that form."""
    m = PY_FRAME_RE.match(name)
    if m is None:
        return None
    path = m.group("path").replace("\\", "/")
    if any(part in path for part in LIBRARY_PARTS) or path.startswith("<"):
        return None
    return Frame(path, int(m.group("line")), m.group("func"))


def kind_of(cat: str, name: str) -> int:
    if COMM_RE.match(name):
        return COMMUNICATION
    if cat in MEMORY_CATS or MEMORY_RE.match(name):
        return MEMORY
    return COMPUTE


@dataclass
class Window:
    """A profiled window on the host: a `ProfilerStep#N` (a step: one iteration of the user's loop, as
    their `prof.step()` marks it), or one of the live measurement's call ranges (one call, not a step)."""

    name: str
    number: int
    start: float
    end: float


@dataclass
class Folded:
    path: str
    meta: dict[str, Any] = field(default_factory=dict)
    truncated: bool = False
    bytes_read: int = 0
    events: int = 0
    names: list[str] = field(default_factory=list)  # interned names: an id is an index
    # device activities
    d_start: array = field(default_factory=lambda: array("d"))
    d_dur: array = field(default_factory=lambda: array("d"))
    d_corr: array = field(default_factory=lambda: array("q"))
    d_name: array = field(default_factory=lambda: array("l"))
    d_kind: array = field(default_factory=lambda: array("b"))
    devices: set[int] = field(default_factory=set)
    # launches (runtime/driver calls with a correlation id)
    l_corr: array = field(default_factory=lambda: array("q"))
    l_tid: array = field(default_factory=lambda: array("q"))
    l_ts: array = field(default_factory=lambda: array("d"))
    l_name: array = field(default_factory=lambda: array("l"))
    graph_launch_ts: list[float] = field(default_factory=list)  # few: one per replay
    graph_corrs: set[int] = field(default_factory=set)  # a replayed graph's kernels carry its launch's id
    # host ranges: CPU ops and Python functions, by thread
    h_tid: array = field(default_factory=lambda: array("q"))
    h_ts: array = field(default_factory=lambda: array("d"))
    h_end: array = field(default_factory=lambda: array("d"))
    h_name: array = field(default_factory=lambda: array("l"))
    h_cat: array = field(default_factory=lambda: array("b"))  # OP, ANNOTATION or PYTHON
    cpu_kernel_us: dict[str, float] = field(default_factory=dict)  # Inductor's C++ kernels: their CPU time by name
    steps: list[Window] = field(default_factory=list)
    calls: list[Window] = field(default_factory=list)
    with_stack: bool = False

    @property
    def rank(self) -> Optional[int]:
        info = self.meta.get("distributedInfo")
        rank = info.get("rank") if isinstance(info, dict) else None
        return rank if isinstance(rank, int) else None

    def device_name(self) -> Optional[str]:
        props = self.meta.get("deviceProperties")
        if not isinstance(props, list):
            return None
        by_id = {p.get("id"): p.get("name") for p in props if isinstance(p, dict)}
        for dev in sorted(self.devices):
            if by_id.get(dev):
                return str(by_id[dev])
        named = [n for n in by_id.values() if n]
        return str(named[0]) if named else None


def _tid(value: Any) -> int:
    """Threads are numbers in Kineto's JSON, strings in some writers' ("stream 7"): a stable int either way."""
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        return hash(value) & 0x7FFFFFFFFFFF


def fold(path: str) -> Folded:
    trace = TraceFile(path)
    out = Folded(path)
    ids: dict[str, int] = {}
    user_names: dict[int, bool] = {}  # Python function name id -> a user frame (`frame_of`)

    def intern(name: str) -> int:
        i = ids.get(name)
        if i is None:
            i = ids[name] = len(out.names)
            out.names.append(name)
        return i

    for e in trace.events():
        out.events += 1
        if e.get("ph") != "X":
            continue
        cat = str(e.get("cat") or "").lower()
        name = str(e.get("name") or "")
        try:
            ts = float(e["ts"])
            dur = float(e.get("dur") or 0.0)
        except (KeyError, TypeError, ValueError):
            continue  # an event without a time has no place on a timeline
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        corr = args.get("correlation")
        if cat in DEVICE_CATS:
            out.d_start.append(ts)
            out.d_dur.append(max(0.0, dur))
            out.d_corr.append(corr if isinstance(corr, int) else -1)
            out.d_name.append(intern(name))
            out.d_kind.append(kind_of(cat, name))
            dev = args.get("device", e.get("pid"))
            if isinstance(dev, int):
                out.devices.add(dev)
        elif cat in LAUNCH_CATS:
            if name in GRAPH_LAUNCHES:
                out.graph_launch_ts.append(ts)
                if isinstance(corr, int):
                    out.graph_corrs.add(corr)
            if isinstance(corr, int):
                out.l_corr.append(corr)
                out.l_tid.append(_tid(e.get("tid")))
                out.l_ts.append(ts)
                out.l_name.append(intern(name))
        elif cat in HOST_CATS:
            m = STEP_RE.match(name)
            if m:  # a step is a window, not an op: no kernel is "launched by" it
                out.steps.append(Window(name, int(m.group(1)), ts, ts + dur))
                continue
            if name.startswith(CALL_PREFIX) and name[len(CALL_PREFIX):].isdigit():
                out.calls.append(Window(name, int(name[len(CALL_PREFIX):]), ts, ts + dur))
                continue
            out.h_tid.append(_tid(e.get("tid")))
            out.h_ts.append(ts)
            out.h_end.append(ts + max(0.0, dur))
            out.h_name.append(intern(name))
            kind = PYTHON if cat == "python_function" else OP if cat == "cpu_op" else ANNOTATION
            if kind == PYTHON:  # a with_stack trace's frames are mostly libraries': only the user's are kept
                nid = intern(name)
                if nid not in user_names:
                    user_names[nid] = frame_of(name) is not None
                out.with_stack = True
                if not user_names[nid]:
                    continue
            cpu_kernel = CPU_KERNEL_RE.match(name) if kind != PYTHON else None
            if cpu_kernel:
                out.cpu_kernel_us[cpu_kernel.group(1)] = out.cpu_kernel_us.get(cpu_kernel.group(1), 0.0) + max(0.0, dur)
            out.h_cat.append(kind)
    out.meta, out.truncated, out.bytes_read = trace.meta, trace.truncated, trace.bytes_read
    out.steps.sort(key=lambda s: s.start)
    out.calls.sort(key=lambda s: s.start)
    return out
