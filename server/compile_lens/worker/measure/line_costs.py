"""Where the forward's steady-state time goes, line by line: eager vs compiled, after the timing rounds.

- **eager**: the eager forward, profiled (`torch.profiler`, CPU ops; CUDA kernels on a GPU) while
  a `TorchFunctionMode` opens a profiler range named after the innermost workspace line of each
  top-level torch call (`_LineTags`). Each op's self time goes to the range it ran in. The
  profiler's own Python stacks cannot do this: they name each function's `def` line, not the line
  that called the op.
- **compiled**: a *separate* compile of the same model with Inductor's provenance tracking on and,
  on the CPU, `cpp.enable_kernel_profile` (so each generated C++ kernel is a profiler range), then
  the compiled forward profiled. Each kernel's self time goes to the lines its provenance names
  (`provenance`); a kernel fused from several lines is split **evenly among its lines**, and each
  of them names the kernel and the lines it was fused with. Extern kernels (`extern_kernels.addmm`)
  and fallback ops (aten ops Inductor did not lower) are the aten ops the compiled graph calls,
  matched to the provenance in the order `call()` runs them; their time is inclusive (their
  helper ops count) and goes to the op's own line (`_give`).
- What no line can take is `unattributed_us`, by reason: Dynamo's guard check and the wrappers
  around the compiled graph, Inductor's runtime (buffer allocation, views), ops that ran eagerly
  between compiled frames (a graph break), the Python around the ops (the profiled call's own
  range: module calls, Dynamo's frame hook, a `print` between frames), a kernel without provenance. Lines plus unattributed
  equal the profile's total per call (the sum of every event's self time, ÷ the calls).
- Per call: the mean over the quieter half of the profiled calls (`_quiet`): a call the OS
  preempted is not steady state, as the timing's medians say.

Which line: the innermost frame inside the workspace; when the forward never passes through the
workspace (a `transformers` model built from a config), the innermost frame outside torch, the
standard library and this package (the library's own line).

`measure()` raises nothing: any failure becomes `lines_note = "not measurable: <why>"` and the
timing, the verdict and every other figure stand (`isolated`; issue 37's shared helper replaces it).
"""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import torch

from ...protocol import KernelShare, LineCost, LineRef
from . import provenance
from .isolated import isolated as isolated_part

TAG = "compile_lens.line:"
CALL = "compile_lens.call:"  # one range per profiled call  # profiler range names the eager side opens: "compile_lens.line:/path/m.py:17"
PROFILE_SECONDS = 0.25  # per side: enough calls to average a few, bounded so a slow model costs ~1 s
_RUNTIME = ("TorchDynamo Cache Lookup", "Torch-Compiled Region", "Pregraph bytecode",
            "AOTDispatcher Runtime Wrapper", "## Call CompiledFxGraph", "CompiledFunction")

WHY_RUNTIME = "guards, the wrappers around compiled graphs and their Python between kernels"
WHY_INDUCTOR_RUNTIME = "Inductor's runtime inside compiled graphs (buffer allocation, views)"
WHY_EAGER_BETWEEN = "code that ran eagerly between compiled frames (graph breaks)"
WHY_NO_PROVENANCE = "kernels without provenance"
WHY_NO_LINE = "ops outside any workspace or library line"
WHY_PYTHON = "Python around the ops (module calls, Dynamo's frame hook, eager code between frames)"


@dataclass
class LineFigures:
    """The per-line part of a workload's Timing (`protocol.Timing.lines` and the fields after it)."""

    lines: list[LineCost] = field(default_factory=list)
    unattributed_us: Optional[float] = None
    unattributed_why: dict[str, float] = field(default_factory=dict)
    profile_us: dict[str, Optional[float]] = field(default_factory=dict)  # each side's profile total per call
    note: Optional[str] = None  # the whole part failed: "not measurable: <why>"
    compiled_note: Optional[str] = None  # the compiled column only: "not on this torch (...)"
    graphs: list[provenance.Graph] = field(default_factory=list)  # the provenance read (checks), not a result


@contextlib.contextmanager
def isolated(figures: LineFigures) -> Iterator[None]:
    """Any failure inside becomes `figures.note` ("not measurable: <why>") through the measurement's
    one isolation rule (`measure/isolated`): the line costs never take the timing or the verdict
    with them."""
    unmeasured: dict[str, str] = {}
    with isolated_part("line costs", unmeasured):
        yield
    if unmeasured:
        figures.lines, figures.unattributed_us, figures.unattributed_why = [], None, {}
        figures.note = unmeasured["line costs"]


# --- which line ------------------------------------------------------------------------------

class _Places:
    """Sorts files into workspace / library / skipped (torch, stdlib, this package), memoised."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root) + os.sep
        package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # compile_lens
        paths = sysconfig.get_paths()
        self.ours = tuple(os.path.realpath(p) + os.sep for p in (os.path.dirname(torch.__file__), package))
        # a venv's platstdlib holds its site-packages: those are libraries, not the standard library
        self.installed = tuple(os.path.realpath(paths[k]) + os.sep for k in ("purelib", "platlib"))
        self.stdlib = tuple(os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib"))
        self._kind: dict[str, str] = {}

    def kind(self, path: str) -> str:
        k = self._kind.get(path)
        if k is None:
            real = os.path.realpath(path)  # a relative co_filename is relative to the working directory
            if path.startswith("<") or real.startswith(self.ours) or (
                    real.startswith(self.stdlib) and not real.startswith(self.installed)):
                k = "skip"
            elif real.startswith(self.root) and "site-packages" not in real and "dist-packages" not in real:
                k = "workspace"
            else:
                k = "library"
            self._kind[path] = k
        return k

    def pick(self, frames: list[tuple[str, int]]) -> Optional[tuple[str, int]]:
        """The innermost workspace frame, else the innermost library frame (frames: outermost first)."""
        library = None
        for path, line in reversed(frames):
            k = self.kind(path)
            if k == "workspace":
                return path, line
            if k == "library" and library is None:
                library = (path, line)
        return library


class _LineTags(torch.overrides.TorchFunctionMode):
    """Opens a profiler range named after the calling user line around each top-level torch call
    (inside the call the mode is off, so the ops a call runs stay in its range)."""

    def __init__(self, places: _Places) -> None:
        super().__init__()
        self.places = places

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        frames = []
        f = sys._getframe(1)
        while f is not None:
            frames.append((f.f_code.co_filename, f.f_lineno))
            if self.places.kind(f.f_code.co_filename) == "workspace":
                break
            f = f.f_back
        where = self.places.pick(frames[::-1])
        if where is None:
            return func(*args, **kwargs)
        with torch.profiler.record_function(f"{TAG}{where[0]}:{where[1]}"):
            return func(*args, **kwargs)


# --- profiles --------------------------------------------------------------------------------

def _calls(ms: Optional[float]) -> int:
    per = max(ms or 1.0, 0.01) / 1e3
    return max(3, min(50, int(PROFILE_SECONDS / per)))


def _profile(call: Callable[[], Any], n: int, device: str, tags: Optional[_Places] = None) -> Any:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    mode = _LineTags(tags) if tags is not None else contextlib.nullcontext()
    call()  # one call outside the profile: lazy initialisations are not steady state
    with profile(activities=activities) as prof, mode:
        for i in range(n):
            with torch.profiler.record_function(f"{CALL}{i}"):
                call()
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
    return prof


def _quiet(events: list[Any], device: str) -> tuple[list[Any], int]:
    """The events of the quieter half of the profiled calls (each call's total at or below the
    median), and how many calls that is. A call the OS preempted (this machine is shared; OpenMP
    threads then wait on each other) is no steady state: the timing takes medians for the same reason."""
    of_call: dict[int, list[Any]] = defaultdict(list)
    for evt in events:  # the call's own range too: its self time is the Python around the ops
        top = evt if evt.name.startswith(CALL) else _nearest(evt, lambda e: e.name.startswith(CALL))
        if top is not None:
            of_call[id(top)].append(evt)
    if not of_call:
        return [], 1
    totals = sorted((sum(_self_us(e, device) for e in evs), key) for key, evs in of_call.items())
    median = totals[(len(totals) - 1) // 2][0]
    kept = [key for total, key in totals if total <= median]
    return [e for key in kept for e in of_call[key]], len(kept)


def _cuda(device: str) -> bool:
    return device.startswith("cuda")


def _self_us(evt: Any, device: str) -> float:
    if _cuda(device):
        return float(getattr(evt, "self_device_time_total", 0.0) or 0.0)
    return float(evt.self_cpu_time_total)


def _total_us(evt: Any, device: str) -> float:
    if _cuda(device):
        return float(getattr(evt, "device_time_total", 0.0) or 0.0)
    return float(evt.cpu_time_total)


def _events(prof: Any) -> list[Any]:
    """The host-side events (a GPU's kernels count through the op that launched them: device time)."""
    cpu = getattr(getattr(torch.autograd, "DeviceType", None), "CPU", None)
    return [e for e in prof.events() if not getattr(e, "is_async", False)
            and (cpu is None or getattr(e, "device_type", cpu) == cpu)]


def eager_lines(call: Callable[[], Any], root: str, device: str, ms: Optional[float]) -> tuple[dict, float, dict]:
    """{(path, line): us per call}, the profile's total per call, and {reason: us} for ops no line took."""
    prof = _profile(call, _calls(ms), device, tags=_Places(root))
    events, n = _quiet(_events(prof), device)
    per_line: dict[tuple[str, int], float] = defaultdict(float)
    loose: dict[str, float] = defaultdict(float)
    total = 0.0
    for evt in events:
        if evt.name.startswith(TAG):
            continue  # the range `_LineTags` opened: its self time is the tagging's own cost
        if evt.name.startswith(CALL):
            continue  # the Python around the ops, here with the tagging's own frame walks in it
        us = _self_us(evt, device)
        total += us
        tag = _nearest(evt, lambda e: e.name.startswith(TAG))
        if tag is None:
            loose[WHY_NO_LINE] += us
            continue
        path, _, line = tag.name[len(TAG):].rpartition(":")
        per_line[(path, int(line))] += us
    return ({k: v / n for k, v in per_line.items()}, total / n, {k: v / n for k, v in loose.items() if v})


def _nearest(evt: Any, test: Callable[[Any], bool]) -> Any:
    p = evt.cpu_parent
    while p is not None and not test(p):
        p = p.cpu_parent
    return p


@dataclass
class _Compiled:
    per_line: dict[tuple[str, int], float]
    kernels: dict[tuple[str, int], dict[str, KernelShare]]
    fused: dict[tuple[str, int], set[tuple[str, int]]]
    fallback: set[tuple[str, int]]
    total: float
    loose: dict[str, float]
    graphs: list[provenance.Graph] = field(default_factory=list)


def compiled_lines(make: Callable[[], Callable[[], Any]], root: str, device: str, ms: Optional[float]) -> _Compiled:
    """Compile with provenance (`make()` compiles and returns the forward to call), profile it, and
    give each kernel's time to its lines."""
    import torch._inductor.config as inductor_config

    places = _Places(root)
    with inductor_config.patch(provenance.config_patch(device)), provenance.uncached(), \
            provenance.catching() as caught:
        call = make()
        call()  # the compile: provenance comes with it
    prof = _profile(call, _calls(ms), device)
    events, n = _quiet(_events(prof), device)
    found = _attribute(events, caught.graphs, places, device, n)
    found.graphs = caught.graphs
    return found


def _attribute(events: list[Any], graphs: list[provenance.Graph], places: _Places, device: str, n: int) -> _Compiled:
    by_prefix = {g.prefix: g for g in graphs if g.prefix}
    by_cid: dict[Optional[str], list[provenance.Graph]] = defaultdict(list)
    for g in graphs:
        by_cid[g.compile_id].append(g)
    out = _Compiled(defaultdict(float), defaultdict(dict), defaultdict(set), set(), 0.0, defaultdict(float))
    counted: set[int] = set()  # events whose time a kernel already took (an extern op's helper ops)
    for evt in events:
        out.total += _self_us(evt, device)
    for evt in events:
        if not evt.name.startswith("## Call CompiledFxGraph"):
            continue
        region = _nearest(evt, lambda e: e.name.startswith("Torch-Compiled Region"))
        cid = region.name.rsplit(" ", 1)[-1] if region is not None else None
        candidates = by_cid.get(cid) or graphs
        queues: dict[str, list[provenance.Kernel]] = defaultdict(list)
        for g in candidates:
            for k in g.kernels:
                name = provenance.aten_name(k)
                if name:
                    queues[name].append(k)
        for child in evt.cpu_children:
            kernel = _generated(child.name, by_prefix, candidates)
            if kernel is None and queues.get(child.name):
                kernel = queues[child.name].pop(0)
            if kernel is None:
                continue
            us = _total_us(child, device) if kernel.kind != "generated" else _self_us(child, device) + \
                sum(_total_us(c, device) for c in child.cpu_children)
            _mark(child, counted)
            _give(out, kernel, us, places)
    attributed = sum(out.per_line.values())
    runtime = eager_between = 0.0
    for evt in events:
        if id(evt) in counted:
            continue
        inside = _nearest(evt, lambda e: e.name.startswith("Torch-Compiled Region")) is not None or \
            evt.name.startswith("Torch-Compiled Region")
        us = _self_us(evt, device)
        if evt.name.startswith(CALL):
            out.loose[WHY_PYTHON] += us
        elif evt.name.startswith(_RUNTIME):
            runtime += us
        elif inside:
            out.loose[WHY_INDUCTOR_RUNTIME] += us
        else:
            eager_between += us
    out.loose[WHY_RUNTIME] += runtime
    if eager_between:
        out.loose[WHY_EAGER_BETWEEN] += eager_between
    # what the matched kernels took minus what was given to lines: kernels without provenance
    missing = out.total - attributed - sum(out.loose.values())
    if missing > 0.5:
        out.loose[WHY_NO_PROVENANCE] += missing
    out.per_line = {k: v / n for k, v in out.per_line.items()}
    for shares in out.kernels.values():
        for s in shares.values():
            s.us = round(s.us / n, 2) if s.us is not None else None
    out.total /= n
    out.loose = {k: v / n for k, v in out.loose.items() if v > 0}
    return out


def _mark(evt: Any, counted: set[int]) -> None:
    counted.add(id(evt))
    for c in evt.cpu_children:
        _mark(c, counted)


def _generated(name: str, by_prefix: dict[Optional[str], provenance.Graph],
               candidates: list[provenance.Graph]) -> Optional[provenance.Kernel]:
    """The generated kernel a profiler range names: `graph_0_cpp_fused_x_0` (C++), `triton_poi_x_0` (GPU)."""
    graph_prefix, _, rest = name.partition("_cpp_")
    if rest and graph_prefix in by_prefix:
        return next((k for k in by_prefix[graph_prefix].kernels if k.name == "cpp_" + rest), None)
    if name.startswith("triton_"):
        return next((k for g in candidates for k in g.kernels if k.name == name), None)
    return None


def _give(out: _Compiled, kernel: provenance.Kernel, us: float, places: _Places) -> None:
    """A kernel's time, evenly among the distinct lines its provenance names. An extern or fallback
    kernel is one op: its provenance also names the views folded into its inputs (`q.view(...)` of
    an attention), so it goes to the op's own line: the first its provenance names (seen on 2.13:
    SDPA's stacks are its own line, then the views of q, k, v and the matmul before them)."""
    lines: list[tuple[str, int]] = []
    for stack in kernel.stacks:
        where = places.pick(stack)
        if where is not None and where not in lines:
            lines.append(where)
    if kernel.kind != "generated" and lines:
        lines = lines[:1]
    if not lines:
        return  # counted as "kernels without provenance" by the caller's remainder
    for where in lines:
        out.per_line[where] += us / len(lines)
        share = out.kernels[where].setdefault(kernel.name, KernelShare(kernel.name, kernel.kind, 0.0, len(lines)))
        share.us = (share.us or 0.0) + us
        if kernel.kind == "generated":
            out.fused[where].update(w for w in lines if w != where)
        if kernel.kind == "fallback":
            out.fallback.add(where)


# --- one workload ----------------------------------------------------------------------------

def measure(eager_call: Callable[[], Any], make_compiled: Callable[[], Callable[[], Any]], *, root: str,
            device: str, eager_ms: Optional[float], compiled_ms: Optional[float]) -> LineFigures:
    """Both columns for one workload; never raises (see `isolated`)."""
    figures = LineFigures()
    with isolated(figures):
        t0 = time.perf_counter()
        eager, eager_total, eager_loose = eager_lines(eager_call, root, device, eager_ms)
        figures.profile_us["eager"] = round(eager_total, 2)
        compiled: Optional[_Compiled] = None
        unsupported = provenance.supported()
        if unsupported:
            figures.compiled_note = f"not on this torch ({unsupported})"
        else:
            try:
                compiled = compiled_lines(make_compiled, root, device, compiled_ms)
            except Exception as exc:  # noqa: BLE001 - the eager column still stands
                figures.compiled_note = f"not measurable: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        figures.lines = _merge(eager, compiled)
        if compiled is not None:
            figures.profile_us["compiled"] = round(compiled.total, 2)
            figures.graphs = compiled.graphs
            figures.unattributed_why = {k: round(v, 2) for k, v in sorted(compiled.loose.items(), key=lambda kv: -kv[1])}
            figures.unattributed_us = round(compiled.total - sum(compiled.per_line.values()), 2)
        if eager_loose:
            figures.unattributed_why.update({f"eager: {k}": round(v, 2) for k, v in eager_loose.items()})
        figures.profile_us["seconds"] = round(time.perf_counter() - t0, 3)
    return figures


def after_timing(job: Any, eager: Any, compiled_obj: Any, workload: str, timing: Any, limit: float) -> None:
    """`benchmark`'s step, after a workload's timing rounds and memory (never inside them): the
    forward's lines into its Timing, on a separate compile (the train step: not yet). `job` and
    `eager` are `benchmark._Job` and `_Eager`; the seconds spent go to `job.phases["line_costs"]`."""
    if workload != "forward":
        return
    from .dynamo_watch import _clear_in_memory_caches
    from .workload import Model, compile_kwargs

    t0 = time.perf_counter()
    job.stage("profiling the forward", f"profiling {job.name} forward line by line…", limit_s=limit)

    def make_compiled() -> Callable[[], Any]:
        _clear_in_memory_caches()  # a new compile: provenance on (`provenance`), the timed one untouched
        fn = torch.compile(compiled_obj, **compile_kwargs(job.target, job.mode))
        model = Model(fn, compiled_obj if eager.is_module else None, eager.args, job.step_begin)
        model.use(False)
        return model.forward

    eager.model.use(False)
    found = measure(eager.model.forward, make_compiled, root=job.root, device=job.device,
                    eager_ms=timing.eager_ms, compiled_ms=timing.compiled_ms)
    timing.lines, timing.unattributed_us, timing.unattributed_why = found.lines, found.unattributed_us, found.unattributed_why
    timing.profile_us, timing.lines_note, timing.compiled_lines_note = found.profile_us, found.note, found.compiled_note
    job.phases["line_costs"] = time.perf_counter() - t0


def _merge(eager: dict[tuple[str, int], float], compiled: Optional[_Compiled]) -> list[LineCost]:
    keys = set(eager) | (set(compiled.per_line) if compiled else set())
    lines = []
    for key in keys:
        c_us = compiled.per_line.get(key, 0.0) if compiled else None
        lines.append(LineCost(
            path=key[0], line=key[1],
            eager_us=round(eager.get(key, 0.0), 2),
            compiled_us=round(c_us, 2) if c_us is not None else None,
            kernels=sorted(compiled.kernels.get(key, {}).values(), key=lambda k: -(k.us or 0.0)) if compiled else [],
            fused_with=[LineRef(p, n) for p, n in sorted(compiled.fused.get(key, set()))] if compiled else [],
            fallback=bool(compiled and key in compiled.fallback)))
    lines.sort(key=lambda x: -max(x.eager_us or 0.0, x.compiled_us or 0.0))
    return lines
