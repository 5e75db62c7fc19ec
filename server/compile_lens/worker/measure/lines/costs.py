"""Where a workload's steady-state time goes, line by line: eager vs compiled, after the timing rounds.

The workload is the forward, or the train step (forward, loss, backward, SGD step) where it is
measured: a line's train-step figures include its backward. Eager backward ops go to the line whose
forward op made their autograd node (the profiler's sequence numbers); compiled backward kernels go
through provenance to the forward lines they are the gradient of (`KernelShare.backward`).

- **eager**: the eager forward, profiled (`torch.profiler`, CPU ops; CUDA kernels on a GPU) while
  a `TorchFunctionMode` opens a profiler range named after the innermost workspace line of each
  top-level torch call (`_LineTags`). Each op's self time goes to the range it ran in. The
  profiler's own Python stacks cannot do this: they name each function's `def` line, not the line
  that called the op.
- **compiled**: the timed compile itself, made with Inductor's provenance tracking on (it changes
  no kernel: `provenance`; `reading_timed_compiles` catches it as the benchmark compiles) and, on
  the CPU, each generated C++ kernel wrapped in a profiler range (`provenance.kernel_ranges`), its
  call profiled again after the timing rounds. Each kernel's time goes to the lines its provenance
  names; a kernel fused from several lines is split **evenly among its lines**, and each of them
  names the kernel and the lines it was fused with. Extern kernels (`extern_kernels.addmm`) and
  fallback ops (aten ops Inductor did not lower) are the aten ops the compiled graph calls,
  matched to the provenance in the order `call()` runs them; their time is inclusive (their
  helper ops count) and goes to the op's own line (`_give`).
- What no line can take is `unattributed_us`, by reason: Dynamo's guard check and the wrappers
  around the compiled graph, Inductor's runtime (buffer allocation, views), ops that ran eagerly
  between compiled frames (a graph break), the Python around the ops (the profiled call's own
  range), a kernel without provenance ("served from cache" when its graph came back without any).
  On CUDA the figures are the device's clock: kernel time per launching op, plus "kernels without
  a line" and the "GPU idle within the call" (`lines.windows`). Lines plus unattributed equal the
  profile's total per call.
- An event is the call's whose time window holds it (any thread); the mean is over the quieter half of calls (`lines.windows`).
- A table taken while the machine was busy, or whose compiled profile total is more than 25% off
  the timed compiled call, carries a `caveat`: renderers then show no per-line eager→compiled ratio as a finding.

Which line: the innermost workspace frame; for a forward that never passes through the workspace
(a `transformers` model from a config), the innermost frame outside torch, stdlib and this package.

`measure()` raises nothing: a failure is `lines_note = "not measurable: <why>"` (`isolated`).
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import torch

from ....busy.contention import Contention
from ....busy.rule import busy_words
from ....protocol import ContentionReport, KernelShare, LineCost, LineRef
from ....torch_text.output_code import kernel_sources
from ..run.isolated import isolated as isolated_part
from . import provenance, windows
from .tags import TAG
from .tags import LineTags as _LineTags
from .tags import Places as _Places

CALL = windows.CALL  # one range per profiled call
DISAGREE = 0.25  # a profile total this far from its timed call: the table is no finding (`caveat`)
PROFILE_SECONDS = 0.25  # per side: enough calls to average a few, bounded so a slow model costs ~1 s
# at most this many calls per side: a profiled call costs ~30× the call itself (the eager side's line
# tags, reading every event), so 50 calls of a 6-layer GPT's train step took 2.8 s where 20 took 1.5 s
# for a per-call total within 6%
PROFILE_CALLS_MAX = 20
_RUNTIME = ("TorchDynamo Cache Lookup", "Torch-Compiled Region", "Pregraph bytecode",
            "AOTDispatcher Runtime Wrapper", "## Call CompiledFxGraph", "CompiledFunction")

WHY_RUNTIME = "guards, the wrappers around compiled graphs and their Python between kernels"
WHY_INDUCTOR_RUNTIME = "Inductor's runtime inside compiled graphs (buffer allocation, views)"
WHY_EAGER_BETWEEN = "code that ran eagerly between compiled frames (graph breaks)"
WHY_EAGER_OUTSIDE = "code that ran eagerly outside compiled frames (the train step's loss; graph breaks)"
WHY_EAGER_BACKWARD = "autograd's backward of eager code (the train step's loss; code between compiled frames)"
WHY_OPTIMIZER = "the train step's SGD step (Compile Lens's loop, not a line of the model)"
EVALUATE = "autograd::engine::evaluate_function: "
OPTIMIZER = "Optimizer."  # torch.optim's profiler ranges: "Optimizer.step#SGD.step", "Optimizer.zero_grad#SGD.zero_grad"
WHY_NO_PROVENANCE = "kernels without provenance"
WHY_SERVED = "kernels with no provenance (served from cache)"
WHY_NO_LINE = "ops outside any workspace or library line (a train step's loss)"
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
    gpu_idle_share: Optional[float] = None  # CUDA: the GPU idle within the compiled call, as a share of it
    caveat: Optional[str] = None  # why the table is no finding: busy while profiling, or a profile off its timing

    def into(self, timing: Any) -> None:
        """Into the workload's `protocol.Timing`."""
        timing.lines, timing.unattributed_us, timing.unattributed_why = self.lines, self.unattributed_us, self.unattributed_why
        timing.profile_us, timing.lines_note, timing.compiled_lines_note = self.profile_us, self.note, self.compiled_note
        timing.gpu_idle_share, timing.lines_caveat = self.gpu_idle_share, self.caveat
        named = {k.name for line in self.lines for k in line.kernels if k.kind == "generated"}
        timing.kernel_sources = {name: text for g in self.graphs
                                 for name, text in kernel_sources(g.output_code, named).items()}


@contextlib.contextmanager
def isolated(figures: LineFigures) -> Iterator[None]:
    """Any failure inside becomes `figures.note` ("not measurable: <why>") through the measurement's
    one isolation rule (`measure/run/isolated`): the line costs never take the timing or the verdict
    with them."""
    unmeasured: dict[str, str] = {}
    with isolated_part("line costs", unmeasured):
        yield
    if unmeasured:
        figures.lines, figures.unattributed_us, figures.unattributed_why = [], None, {}
        figures.note = unmeasured["line costs"]


# --- profiles (`lines.windows`) ----------------------------------------------------------------

def calls_to_profile(ms: Optional[float]) -> int:
    per = max(ms or 1.0, 0.01) / 1e3
    return max(3, min(PROFILE_CALLS_MAX, int(PROFILE_SECONDS / per)))


def _profile(call: Callable[[], Any], n: int, device: str, tags: Optional[_Places] = None) -> Any:
    prof = windows.profile(call, n, device, _LineTags(tags) if tags is not None else None)
    windows.keep(prof, "eager" if tags is not None else "compiled")  # `check --profile-dir`
    return prof


_self_us, _total_us, _nearest = windows.self_us, windows.total_us, windows.nearest
reading_timed_compiles = provenance.reading_timed_compiles  # benchmark: around its compiles


def _tag_line(tag: Any) -> tuple[str, int]:
    path, _, line = tag.name[len(TAG):].rpartition(":")
    return path, int(line)


def _backward_lines(events: list[Any]) -> dict[int, tuple[str, int]]:
    """{autograd sequence number: the line whose forward op made that autograd node}: a backward
    node's `evaluate_function` range carries the sequence number of the forward op that made it."""
    seq: dict[int, tuple[str, int]] = {}
    for evt in events:
        nr = getattr(evt, "sequence_nr", -1)
        if nr is not None and nr >= 0 and not evt.name.startswith(EVALUATE) and _nearest(evt, _is_evaluate) is None:
            tag = _nearest(evt, lambda e: e.name.startswith(TAG))
            if tag is not None:
                seq.setdefault(nr, _tag_line(tag))
    return seq


def _is_evaluate(e: Any) -> bool:
    return e.name.startswith(EVALUATE)


def eager_lines(call: Callable[[], Any], root: str, device: str, ms: Optional[float]) -> tuple[dict, float, dict]:
    """{(path, line): us per call}, the profile's total per call, and {reason: us} for ops no line took.
    A backward op (a train step) goes to the line whose forward op made its autograd node. `ms`:
    the timed call (CUDA: the GPU idle within it is a reason of its own)."""
    found = windows.calls(_profile(call, calls_to_profile(ms), device, tags=_Places(root)), device)
    events, n = found.events, found.n
    per_line: dict[tuple[str, int], float] = defaultdict(float)
    loose: dict[str, float] = defaultdict(float)
    total = 0.0
    backward = _backward_lines(events)
    for evt in events:
        if evt.name.startswith(TAG):
            continue  # the range `_LineTags` opened: its self time is the tagging's own cost
        if evt.name.startswith(CALL):
            continue  # the Python around the ops, here with the tagging's own frame walks in it
        us = _self_us(evt, device)
        total += us
        node = evt if _is_evaluate(evt) else _nearest(evt, _is_evaluate)
        if node is not None:
            where = backward.get(getattr(node, "sequence_nr", -1))
            if where is None:
                loose[WHY_EAGER_BACKWARD] += us
            else:
                per_line[where] += us
            continue
        if evt.name.startswith(OPTIMIZER) or _nearest(evt, lambda e: e.name.startswith(OPTIMIZER)) is not None:
            loose[WHY_OPTIMIZER] += us
            continue
        tag = _nearest(evt, lambda e: e.name.startswith(TAG))
        if tag is None:
            loose[WHY_NO_LINE] += us
            continue
        per_line[_tag_line(tag)] += us
    per_call = {k: v / n for k, v in loose.items() if v}
    total /= n
    if windows.cuda(device):
        total, parts = windows.device_parts(found, total, ms * 1e3 if ms else None)
        per_call.update({k: v for k, v in parts.items() if v > 0})
    return ({k: v / n for k, v in per_line.items()}, total, per_call)


@dataclass
class _Compiled:
    per_line: dict[tuple[str, int], float]
    kernels: dict[tuple[str, int], dict[str, KernelShare]]
    fused: dict[tuple[str, int], set[tuple[str, int]]]
    fallback: set[tuple[str, int]]
    total: float
    loose: dict[str, float]
    graphs: list[provenance.Graph] = field(default_factory=list)
    idle_share: Optional[float] = None  # CUDA: the GPU idle within the call, as a share of it
    busy_us: Optional[float] = None  # CUDA: the device-busy time per call


@dataclass
class Timed:
    """A compile already made with provenance on (the timed one, `reading_timed_compiles`): the call
    to profile and the graphs its compile produced."""

    call: Callable[[], Any]
    graphs: list[provenance.Graph]


def compiled_lines(make: Any, root: str, device: str, ms: Optional[float]) -> _Compiled:
    """Profile a compiled call and give each kernel's time to its lines. `make` is a `Timed` (the
    timed compile, provenance caught as it compiled), or a function that compiles and returns the
    call: then a compile of its own, with provenance on, in a cache folder of its own — no cache
    served from elsewhere, whatever the environment forces (`TORCHINDUCTOR_FX_GRAPH_CACHE=1`
    overrides any config set in code)."""
    if isinstance(make, Timed):
        return _profiled(make.call, make.graphs, root, device, ms)
    import shutil
    import tempfile

    import torch._inductor.config as inductor_config

    from ..compile.cold import inductor_cache

    own = tempfile.mkdtemp(prefix="compile-lens-lines-")
    try:
        with inductor_cache(own):  # profiled inside too: the output code modules stay loaded
            with inductor_config.patch(provenance.config_patch(device)), provenance.uncached(), \
                    provenance.catching() as caught:
                call = make()
                call()  # the compile (a train step's backward too): provenance comes with it
            return _profiled(call, caught.graphs, root, device, ms)
    finally:
        shutil.rmtree(own, ignore_errors=True)


def _profiled(call: Callable[[], Any], graphs: list[provenance.Graph], root: str, device: str,
              ms: Optional[float]) -> _Compiled:
    with provenance.kernel_ranges(graphs):
        prof = _profile(call, calls_to_profile(ms), device)
    found = _attribute(windows.calls(prof, device), graphs, _Places(root), device, ms * 1e3 if ms else None)
    found.graphs = graphs
    if windows.cuda(device):  # the shown share: read from the exported trace by the reader `import` uses
        found.idle_share = windows.gpu_idle_share(prof, ms * 1e3 if ms else None)
    return found


def _attribute(found: windows.Calls, graphs: list[provenance.Graph], places: _Places, device: str,
               timed_us: Optional[float] = None) -> _Compiled:
    events, n = found.events, found.n
    # a graph whose output code has kernels but whose provenance came back empty: an FX-graph cache
    # entry written without provenance (torch < 2.12 keys it without the provenance level)
    blind = {name for g in graphs if not g.kernels for name in provenance.output_code_kernels(g.output_code)}
    by_prefix = {g.prefix: g for g in graphs if g.prefix}
    by_cid: dict[Optional[str], list[provenance.Graph]] = defaultdict(list)
    for g in graphs:
        by_cid[g.compile_id].append(g)
    train = any(g.backward for g in graphs)
    out = _Compiled(defaultdict(float), defaultdict(dict), defaultdict(set), set(), 0.0, defaultdict(float))
    counted: set[int] = set()  # events whose time a kernel already took (an extern op's helper ops)
    out.total += sum(_self_us(evt, device) for evt in events)
    for evt in events:
        if not evt.name.startswith("## Call CompiledFxGraph"):
            continue
        region = _nearest(evt, lambda e: e.name.startswith("Torch-Compiled Region"))
        cid = region.name.rsplit(" ", 1)[-1] if region is not None else None
        backward = _nearest(evt, lambda e: e.name.startswith("CompiledFunctionBackward")) is not None
        # the graph this call runs: the one its named kernels belong to, else by compile id and direction
        ranged = [provenance.ranged_kernel(c.name, graphs) for c in evt.cpu_children if c.name.startswith(provenance.KERNEL)]
        own = list({id(f[0]): f[0] for f in ranged if f is not None}.values())
        pool = by_cid.get(cid) or graphs
        candidates = own or [g for g in pool if g.backward == backward] or pool
        queues: dict[str, list[provenance.Kernel]] = defaultdict(list)
        for g in candidates:
            for k in g.kernels:
                name = provenance.aten_name(k)
                if name:
                    queues[name].append(k)
        for child in evt.cpu_children:
            found = provenance.ranged_kernel(child.name, graphs) if child.name.startswith(provenance.KERNEL) else None
            kernel = found[1] if found is not None else _generated(child.name, by_prefix, candidates)
            if kernel is None and queues.get(child.name):
                kernel = queues[child.name].pop(0)
            if kernel is None:
                if blind and (child.name.startswith((provenance.KERNEL, "aten::")) or child.name in blind):
                    out.loose[WHY_SERVED] += _total_us(child, device)
                    _mark(child, counted)
                continue
            us = _total_us(child, device) if kernel.kind != "generated" else _self_us(child, device) + \
                sum(_total_us(c, device) for c in child.cpu_children)
            _mark(child, counted)
            _give(out, kernel, us, places, backward)
    attributed = sum(out.per_line.values())
    _unmatched(events, counted, device, out, train)
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
    if windows.cuda(device):  # busy + idle: the kernels no op took, and the GPU's idle time
        out.total, parts = windows.device_parts(found, out.total, timed_us)
        out.loose.update({k: v for k, v in parts.items() if v > 0})
        out.busy_us = out.total - parts[windows.WHY_GPU_IDLE]
    return out


def _unmatched(events: list[Any], counted: set[int], device: str, out: _Compiled, train: bool) -> None:
    """The time of the events no kernel took, into `out.loose` by why."""
    runtime = eager_between = 0.0
    for evt in events:
        if id(evt) in counted:
            continue
        inside = _nearest(evt, lambda e: e.name.startswith("Torch-Compiled Region")) is not None or \
            evt.name.startswith("Torch-Compiled Region")
        us = _self_us(evt, device)
        if evt.name.startswith(CALL):
            out.loose[WHY_PYTHON] += us
        elif evt.name.startswith(_RUNTIME) or evt.name.startswith(EVALUATE + "CompiledFunctionBackward"):
            runtime += us
        elif inside or _nearest(evt, lambda e: e.name.startswith("CompiledFunctionBackward")) is not None:
            out.loose[WHY_INDUCTOR_RUNTIME] += us
        elif evt.name.startswith(OPTIMIZER) or _nearest(evt, lambda e: e.name.startswith(OPTIMIZER)) is not None:
            out.loose[WHY_OPTIMIZER] += us
        elif _is_evaluate(evt) or _nearest(evt, _is_evaluate) is not None:
            out.loose[WHY_EAGER_BACKWARD] += us
        else:
            eager_between += us
    out.loose[WHY_RUNTIME] += runtime
    if eager_between:
        out.loose[WHY_EAGER_OUTSIDE if train else WHY_EAGER_BETWEEN] += eager_between


def _mark(evt: Any, counted: set[int]) -> None:
    counted.add(id(evt))
    for c in evt.cpu_children:
        _mark(c, counted)


def _generated(name: str, by_prefix: dict[Optional[str], provenance.Graph],
               candidates: list[provenance.Graph]) -> Optional[provenance.Kernel]:
    """The generated kernel a profiler range names without `kernel_ranges`: `graph_0_cpp_fused_x_0` (a C++ kernel
    compiled with `cpp.enable_kernel_profile` on), `triton_poi_x_0` (a Triton launch on a GPU)."""
    graph_prefix, _, rest = name.partition("_cpp_")
    if rest and graph_prefix in by_prefix:
        return next((k for k in by_prefix[graph_prefix].kernels if k.name == "cpp_" + rest), None)
    if name.startswith("triton_"):
        return next((k for g in candidates for k in g.kernels if k.name == name), None)
    return None


def _give(out: _Compiled, kernel: provenance.Kernel, us: float, places: _Places, backward: bool = False) -> None:
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
        share = out.kernels[where].setdefault(f"{kernel.name}|{backward}", KernelShare(
            kernel.name, kernel.kind, 0.0, len(lines), backward))
        share.us = (share.us or 0.0) + us
        if kernel.kind == "generated":
            out.fused[where].update(w for w in lines if w != where)
        if kernel.kind == "fallback":
            out.fallback.add(where)


# --- one workload ----------------------------------------------------------------------------

def measure(eager_call: Callable[[], Any], make_compiled: Any, *, root: str,
            device: str, eager_ms: Optional[float], compiled_ms: Optional[float]) -> LineFigures:
    """Both columns for one workload; never raises (see `isolated`). `make_compiled`: a `Timed`
    (the timed compile's call and graphs), or a function that compiles (a compile of its own)."""
    figures = LineFigures()
    with isolated(figures):
        t0 = time.perf_counter()
        watch = Contention(device)  # what else ran while the profiles were taken (`caveat`)
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
            figures.gpu_idle_share = round(compiled.idle_share, 3) if compiled.idle_share is not None else None
            if compiled.loose.get(WHY_SERVED) and not any(g.kernels for g in compiled.graphs):
                figures.compiled_note = "no provenance (served from cache): Inductor's cache returned the " \
                    "compiled graphs without the source lines of their kernels"
        if eager_loose:
            figures.unattributed_why.update({f"eager: {k}": round(v, 2) for k, v in eager_loose.items()})
        figures.caveat = caveat(watch.report(), figures.profile_us, eager_ms, compiled_ms, device,
                                compiled.busy_us if compiled is not None else None)
        figures.profile_us["seconds"] = round(time.perf_counter() - t0, 3)
    return figures


def caveat(contention: ContentionReport, profile_us: dict[str, Optional[float]], eager_ms: Optional[float],
           compiled_ms: Optional[float], device: str, busy_us: Optional[float] = None) -> Optional[str]:
    """Why a line table's figures are no finding, or None: the machine was busy while it was
    profiled (the timing's own rule, `busy.rule.busy_words`), or the compiled call's profile total
    disagrees with its timed call by more than DISAGREE (on CUDA its kernels' busy time, which no
    call can exceed; not where a test declared the machine quiet, `busy.contention`). The eager side is not held to it: its total leaves out the Python around the
    ops, whose tagging (`LineTags`) the profile pays for and the timing does not."""
    busy = busy_words(contention)
    if busy or contention.declared_quiet:  # a test's declared quiet: its load's noise is no disagreement
        return busy.replace(" during timing", " while profiling") if busy else None
    us = busy_us if windows.cuda(device) else profile_us.get("compiled")
    if not compiled_ms or us is None:
        return None
    timed = compiled_ms * 1e3
    if (us > timed * (1 + DISAGREE)) if windows.cuda(device) else abs(us - timed) > DISAGREE * timed:
        what = "its kernels" if windows.cuda(device) else "the profile"
        return (f"the compiled call's profile disagrees with its timing ({what} {_us(us)} per call, "
                f"timed {_us(timed)}: more than {DISAGREE:.0%} apart)")
    return None


def _us(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 10 else f"{us:.1f} µs"


def after_timing(job: Any, eager: Any, compiled: Any, workload: str, timing: Any, limit: float,
                 graphs: Optional[list[provenance.Graph]] = None) -> None:
    """`benchmark`'s step, after a workload's timing rounds and memory (never inside them): the
    workload's lines ("forward" | "train") into its Timing, read from the timed compile (`compiled`:
    the `workload.Model` that was timed) when `reading_timed_compiles` caught its provenance, else
    from a compile of its own. `job` and `eager` are `benchmark._Job` and `_Eager`; the seconds
    spent add to `job.stages["line_costs"]`. The train step's SGD steps move the weights:
    `benchmark` restores them after the train workload."""
    from ..compile.dynamo_watch import _clear_in_memory_caches
    from ..workload.model import Model, compile_kwargs

    t0 = time.perf_counter()
    label = "train step" if workload == "train" else "forward"
    job.stage(f"profiling the {label}", f"profiling {job.name} {label} line by line…", limit_s=limit)
    graphs = provenance.take() if graphs is None else graphs  # `graphs`: the caller took them after the compile
    source: Any = Timed(compiled.run(workload), graphs) if graphs is not None else None
    if source is None:
        obj = compiled.module if compiled.module is not None else eager.obj

        def source() -> Callable[[], Any]:
            _clear_in_memory_caches()  # a new compile: provenance on (`provenance`), the timed one untouched
            fn = torch.compile(obj, **compile_kwargs(job.target, job.mode))
            return Model(fn, obj if eager.is_module else None, eager.args, job.step_begin).run(workload)

    with windows.labelled(f"{job.name}-{workload}"):  # the kept profiles' names (`check --profile-dir`)
        measure(eager.model.run(workload), source, root=job.root, device=job.device, eager_ms=timing.eager_ms,
                compiled_ms=timing.compiled_ms).into(timing)
    job.stages["line_costs"] = job.stages.get("line_costs", 0.0) + time.perf_counter() - t0


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
