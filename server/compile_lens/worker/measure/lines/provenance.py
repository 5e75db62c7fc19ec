"""Inductor's provenance, caught in-process: which source lines each generated kernel came from.

With `torch._inductor.config.trace.provenance_tracking_level` on (env `INDUCTOR_PROVENANCE`),
Inductor writes, per compiled graph, the structured-trace artifacts
`inductor_provenance_tracking_node_mappings` (kernel → post-grad FX nodes, keys `"cpp_fused_x_0:2"`,
`"extern_kernels.addmm:1"`, `"torch.ops.aten._fft_r2c.default:2"`) and
`inductor_provenance_tracking_kernel_stack_traces` (kernel → the user stack traces of its nodes),
right after the graph's `inductor_output_code` (also replayed on an FX-graph cache hit). They go
through `torch._logging.trace_structured`, which calls the `torch.__trace` logger whenever it has a
handler: `catching()` adds one for the duration of a compile, so no TORCH_TRACE file is needed.

Each generated C++ kernel is a profiler range while `kernel_ranges()` is open: the graph's output
code module (the file `inductor_output_code` names, loaded by `PyCodeCache`) calls its kernels
through module globals (`cpp_fused_x_0(buf0, ...)`), which are wrapped for the profile's duration in
a range named `compile_lens.kernel:<graph>:<kernel>`; Triton kernels open ranges of their own on a
GPU. This replaces `cpp.enable_kernel_profile`, which changed the C++ source, so every profiled
compile rebuilt its kernels with the C++ compiler.

Provenance tracking changes no kernel: on torch 2.13 (CPU) the output code of five models (three
matmuls, a nanoGPT block, a graph break, GPT-2, BERT; forward and backward) differs only in its
comments with it on (`# [Provenance debug handles]`, FX node names). So a measurement's timed
compiles track it (`reading_timed_compiles`; the cold compile too, `timed_patch`: the level is in
the FX-graph cache key on torch ≥ 2.12), and the line costs read the timed compile: no compile of
their own. Elsewhere (`line_costs.measure` given a function that compiles) a compile of its own,
in a cache folder of its own. A graph served from a cache entry written without provenance
(torch 2.11 keys entries without the level) comes back with its output code and no kernels: its
kernels' time is said as "no provenance (served from cache)".

A train step's compile makes two graphs per frame, forward then backward (`Graph.backward`); a
backward graph's nodes carry the stack traces of the forward nodes they are the gradient of, so its
kernels go to the forward lines they came from ("backward of line N").
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from ....torch_text import kernel_provenance

_GRAPH_PREFIX = re.compile(r'RecordFunction\w*\s+\w+\("(graph_\d+)_')
KERNEL = "compile_lens.kernel:"  # the range `kernel_ranges` opens: "compile_lens.kernel:0:cpp_fused_relu_0"


@dataclass
class Kernel:
    """One kernel of a compiled graph, as its provenance names it."""

    name: str  # "cpp_fused_mul_relu_0", "extern_kernels.addmm", "aten._fft_r2c" (without the ":handle")
    kind: str  # "generated" (C++/Triton) | "extern" (a library kernel: mm, addmm, convolution) | "fallback" (an aten op Inductor did not lower)
    order: int  # Inductor's handle: the order kernels are generated, which is the order `call()` runs them
    stacks: list[list[tuple[str, int]]]  # per FX node it came from: (path, line) outermost → innermost


@dataclass
class Graph:
    """One compiled graph's kernels (a frame's forward, or its backward)."""

    compile_id: Optional[str]  # "0/0", from the structured-trace record
    prefix: Optional[str]  # "graph_0": the C++ kernels' range prefix when `cpp.enable_kernel_profile` was on (`graph_0_cpp_fused_x_0`)
    kernels: list[Kernel] = field(default_factory=list)
    output_code: str = ""
    module_path: Optional[str] = None  # the output code's file (`inductor_output_code`'s `file_path`)
    backward: bool = False  # a train step's backward graph: its kernels are the backward of their lines


def supported() -> Optional[str]:
    """None where this torch tracks provenance in-process, else why not (said as "not on this torch")."""
    try:
        import torch._inductor.config as inductor_config
        from torch._logging import _internal
    except ImportError as exc:
        return f"no Inductor ({exc})"
    if not hasattr(inductor_config.trace, "provenance_tracking_level"):
        return f"torch {_version()} has no Inductor provenance tracking (torch 2.8 and later do)"
    if not hasattr(_internal, "trace_log"):
        return f"torch {_version()} has no structured trace"
    return None


def _version() -> str:
    import torch

    return torch.__version__.split("+")[0]


def config_patch(device: str) -> dict[str, Any]:
    """The Inductor settings a compile of its own runs with (`line_costs.compiled_lines`, in a cache
    folder of its own: `TORCHINDUCTOR_FX_GRAPH_CACHE=1` in the environment overrides this). No FX-graph cache: a hit replays the
    provenance stored with the cached graph, whose stacks name the file and lines of whatever
    compiled it first (seen: another folder's copy of the same model; an edit that only moved lines
    keeps the key too)."""
    return {"trace.provenance_tracking_level": 1, "fx_graph_cache": False, "fx_graph_remote_cache": False}


class _Catch(logging.Handler):
    """Keeps the provenance artifacts and output code `trace_structured` hands the `torch.__trace` logger."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.graphs: list[Graph] = []
        self._code: Optional[tuple[Optional[str], str, Optional[str]]] = None  # the last output code: (compile id, text, file)
        self._maps: dict[Optional[str], dict[str, Any]] = {}
        self._joint: set[Optional[str]] = set()  # compile ids AOTAutograd split into forward and backward
        self.stale: set[str] = set()  # kernel keys earlier backward graphs listed (`kernel_provenance`, stale entries)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            meta = getattr(record, "metadata", None) or {}
            cid = _compile_id(meta)
            if "inductor_output_code" in meta:
                where = meta.get("inductor_output_code") or {}
                self._code = (cid, str(getattr(record, "payload", "") or ""),
                              where.get("file_path") or where.get("filename") if isinstance(where, dict) else None)
                return
            if "aot_forward_graph" in meta:
                self._joint.add(cid)
            name = (meta.get("artifact") or {}).get("name")
            if name == "inductor_provenance_tracking_node_mappings":
                self._maps[cid] = json.loads(getattr(record, "payload", "") or "{}") or {}
            elif name == kernel_provenance.STACK_TRACES:
                stacks = json.loads(getattr(record, "payload", "") or "{}") or {}
                code = self._code if self._code and self._code[0] == cid else (cid, "", None)
                maps = self._maps.pop(cid, {})
                # forward first, then its backward (compiled with the first backward call)
                backward = cid in self._joint and any(g.compile_id == cid for g in self.graphs)
                graph = _graph(cid, stacks, maps, code[1], self.stale if backward else set())
                graph.module_path, graph.backward = code[2], backward
                if backward:
                    self.stale.update(kernel_provenance.keys(stacks, maps))
                self.graphs.append(graph)
        except Exception:  # noqa: BLE001 - a record we cannot read costs its graph, never the compile
            return


def _compile_id(meta: dict[str, Any]) -> Optional[str]:
    frame, attempt = meta.get("frame_id"), meta.get("frame_compile_id")
    return None if frame is None else f"{frame}/{attempt if attempt is not None else 0}"


def _graph(cid: Optional[str], stacks: dict[str, list[str]], maps: dict[str, Any], code: str,
           stale: Any = ()) -> Graph:
    prefix = _GRAPH_PREFIX.search(code)
    graph = Graph(cid, prefix.group(1) if prefix else None, output_code=code)
    graph.kernels = [Kernel(name, kind, order, frames)
                     for name, kind, order, frames in kernel_provenance.kernels(stacks, maps, stale)]
    return graph


def aten_name(kernel: Kernel) -> Optional[str]:
    """The profiler's name for an extern or fallback kernel (`aten::addmm`); None for a generated one."""
    if kernel.kind == "extern":
        return "aten::" + kernel.name.split(".", 1)[1]
    if kernel.kind == "fallback":
        op = kernel.name.split(".")
        return f"{op[0]}::{op[1]}" if len(op) >= 2 else None
    return None


@contextlib.contextmanager
def uncached() -> Iterator[None]:
    """AOTAutograd's cache off too (it stores the compiled graph, provenance included)."""
    try:
        import torch._functorch.config as functorch_config
    except ImportError:
        yield
        return
    if not hasattr(functorch_config, "enable_autograd_cache"):
        yield
        return
    with functorch_config.patch(enable_autograd_cache=False):
        yield


def new_catch() -> _Catch:
    """A handler that keeps the provenance of the compiles it hears from now on."""
    handler = _Catch()
    # what earlier lazy backward compiles in this process left in Inductor's globals is stale
    from torch._inductor import debug as inductor_debug

    for name in ("_inductor_kernel_stack_trace", "_inductor_triton_kernel_to_post_grad_node_info"):
        handler.stale.update(k for k in (getattr(inductor_debug, name, None) or {}) if isinstance(k, str))
    return handler


@contextlib.contextmanager
def catching() -> Iterator[_Catch]:
    """While inside, every compiled graph's provenance is kept (`.graphs`)."""
    from ...dynamo import structured_trace

    handler = new_catch()
    with structured_trace(handler):
        yield handler


def timed_patch() -> dict[str, Any]:
    """The Inductor settings of the compiles a measurement times (the cold one in `bench_child`, the
    warm one in `benchmark`): provenance tracking on, where this torch has it. Both must say the
    same: the level is part of the FX-graph cache key (torch ≥ 2.12), and where it is not (2.11)
    an entry written without provenance would replay none."""
    return {} if supported() else {"trace.provenance_tracking_level": 1}


def output_code_kernels(code: str) -> list[str]:
    """The kernels an output code defines and calls (`cpp_fused_x_0 = async_compile.cpp_pybinding(...)`,
    `triton_poi_fused_x_0 = async_compile.triton(...)`): what its provenance should name."""
    return sorted(set(re.findall(r"^(\w+) = async_compile\.\w+\(", code, flags=re.M)))


def _module(path: Optional[str]) -> Any:
    """The loaded output code module of a graph (Inductor's `PyCodeCache`, else `sys.modules`)."""
    if not path:
        return None
    real = os.path.realpath(path)
    try:
        from torch._inductor.codecache import PyCodeCache

        loaded = list(PyCodeCache.modules)
    except (ImportError, AttributeError):
        loaded = []
    for mod in loaded + list(sys.modules.values()):
        file = getattr(mod, "__file__", None)
        if file and os.path.realpath(file) == real:
            return mod
    return None


def _ranged(fn: Any, name: str) -> Any:
    """`fn` inside a profiler range named `name` (`_RecordFunctionFast`: the cheap one Triton's
    launcher uses, torch 2.2+; else `record_function`)."""
    import torch

    fast = getattr(getattr(torch._C, "_profiler", None), "_RecordFunctionFast", None)

    def call(*args: Any, **kwargs: Any) -> Any:
        with (fast(name) if fast is not None else torch.profiler.record_function(name)):
            return fn(*args, **kwargs)
    return call


@contextlib.contextmanager
def kernel_ranges(graphs: list[Graph]) -> Iterator[int]:
    """While inside, each generated C++ kernel of `graphs` (graph `i`) opens the profiler range
    `compile_lens.kernel:<i>:<kernel>`; yields how many kernels were wrapped. A graph whose module
    is not found keeps its kernels unnamed: their time is "kernels without provenance"."""
    saved: list[tuple[Any, str, Any]] = []
    try:
        for i, g in enumerate(graphs):
            mod = _module(g.module_path)
            if mod is None:
                continue
            # a graph without provenance: its output code's kernels, named, so that their time says so
            names = [k.name for k in g.kernels if k.kind == "generated"] if g.kernels else output_code_kernels(g.output_code)
            for name in names:
                fn = getattr(mod, name, None) if name.startswith("cpp_") else None
                if callable(fn):
                    saved.append((mod, name, fn))
                    setattr(mod, name, _ranged(fn, f"{KERNEL}{i}:{name}"))
        yield len(saved)
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)


def ranged_kernel(name: str, graphs: list[Graph]) -> Optional[tuple[Graph, Kernel]]:
    """The graph and kernel a `kernel_ranges` range names."""
    index, _, kernel = name[len(KERNEL):].partition(":")
    if not index.isdigit() or int(index) >= len(graphs):
        return None
    g = graphs[int(index)]
    k = next((k for k in g.kernels if k.name == kernel), None)
    return (g, k) if k is not None else None


# --- the timed compile, read (benchmark) --------------------------------------------------------

class _Reading:
    """The provenance of the compiles a measurement makes, caught as they happen: one catch per
    workload (compile ids restart after each Dynamo reset), taken by `after_timing`."""

    def __init__(self) -> None:
        self.catch: Optional[_Catch] = None


_READING = _Reading()


@contextlib.contextmanager
def reading_timed_compiles() -> Iterator[None]:
    """While inside, compiles track Inductor's provenance and it is kept: the line costs then read
    the timed compile itself, no compile of their own. Provenance changes no kernel (on torch 2.13
    CPU the output code of a 3-matmul MLP, a nanoGPT block, a graph break, GPT-2 and BERT, forward
    and backward, differs only in comments: BENCHMARKS.md); it changes the FX-graph cache key (torch
    ≥ 2.12), so the cold compile tracks it too (`provenance.timed_patch`, bench_child): the warm
    compile hits what the cold one wrote."""
    if supported():
        yield
        return
    import torch._inductor.config as inductor_config

    from ...dynamo import structured_trace

    class Forward(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if _READING.catch is not None:
                _READING.catch.emit(record)

    _READING.catch = new_catch()
    try:
        with inductor_config.patch(timed_patch()), structured_trace(Forward(logging.DEBUG)):
            yield
    finally:
        _READING.catch = None


def take() -> Optional[list[Graph]]:
    """The graphs caught since the last take (None: not reading), and a fresh catch for the next workload."""
    if _READING.catch is None:
        return None
    graphs = _READING.catch.graphs
    _READING.catch = new_catch()
    return graphs
