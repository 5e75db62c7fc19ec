"""Inductor's provenance, caught in-process: which source lines each generated kernel came from.

With `torch._inductor.config.trace.provenance_tracking_level` on (env `INDUCTOR_PROVENANCE`),
Inductor writes, per compiled graph, the structured-trace artifacts
`inductor_provenance_tracking_node_mappings` (kernel → post-grad FX nodes, keys `"cpp_fused_x_0:2"`,
`"extern_kernels.addmm:1"`, `"torch.ops.aten._fft_r2c.default:2"`) and
`inductor_provenance_tracking_kernel_stack_traces` (kernel → the user stack traces of its nodes),
right after the graph's `inductor_output_code` (also replayed on an FX-graph cache hit). They go
through `torch._logging.trace_structured`, which calls the `torch.__trace` logger whenever it has a
handler: `catching()` adds one for the duration of a compile, so no TORCH_TRACE file is needed.

`cpp.enable_kernel_profile` makes each generated C++ kernel open a profiler range named
`graph_<N>_<kernel>`; the `<N>` is read from the output code, which ties a graph's provenance to the
kernels the profiler sees. Both settings change the generated code and the FX-graph cache key, so
they are only ever on for the separate compile that is profiled (`line_costs`), never for a timed one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

# `  File "/path/m.py", line 17, in forward` in the stack traces Inductor keeps per FX node
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_GRAPH_PREFIX = re.compile(r'RecordFunction\w*\s+\w+\("(graph_\d+)_')
_CPP_KERNEL = re.compile(r"^(cpp_|triton_)")


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
    prefix: Optional[str]  # "graph_0": what the profiler calls its C++ kernels (`graph_0_cpp_fused_x_0`)
    kernels: list[Kernel] = field(default_factory=list)
    output_code: str = ""


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
    """The Inductor settings the profiled compile runs with. No FX-graph cache: a hit replays the
    provenance stored with the cached graph, whose stacks name the file and lines of whatever
    compiled it first (seen: another folder's copy of the same model; an edit that only moved lines
    keeps the key too)."""
    patch: dict[str, Any] = {"trace.provenance_tracking_level": 1, "fx_graph_cache": False,
                             "fx_graph_remote_cache": False}
    import torch._inductor.config as inductor_config

    if not device.startswith("cuda") and hasattr(inductor_config.cpp, "enable_kernel_profile"):
        patch["cpp.enable_kernel_profile"] = True  # the profiler names each C++ kernel (Triton's are named on a GPU)
    return patch


class _Catch(logging.Handler):
    """Keeps the provenance artifacts and output code `trace_structured` hands the `torch.__trace` logger."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.graphs: list[Graph] = []
        self._code: Optional[tuple[Optional[str], str]] = None  # the last output code: (compile id, text)
        self._maps: dict[Optional[str], dict[str, Any]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        try:
            meta = getattr(record, "metadata", None) or {}
            cid = _compile_id(meta)
            if "inductor_output_code" in meta:
                self._code = (cid, str(getattr(record, "payload", "") or ""))
                return
            name = (meta.get("artifact") or {}).get("name")
            if name == "inductor_provenance_tracking_node_mappings":
                self._maps[cid] = json.loads(getattr(record, "payload", "") or "{}") or {}
            elif name == "inductor_provenance_tracking_kernel_stack_traces":
                stacks = json.loads(getattr(record, "payload", "") or "{}") or {}
                self.graphs.append(_graph(cid, stacks, self._maps.pop(cid, {}),
                                          self._code[1] if self._code and self._code[0] == cid else ""))
        except Exception:  # noqa: BLE001 - a record we cannot read costs its graph, never the compile
            return


def _compile_id(meta: dict[str, Any]) -> Optional[str]:
    frame, attempt = meta.get("frame_id"), meta.get("frame_compile_id")
    return None if frame is None else f"{frame}/{attempt if attempt is not None else 0}"


def _graph(cid: Optional[str], stacks: dict[str, list[str]], maps: dict[str, Any], code: str) -> Graph:
    prefix = _GRAPH_PREFIX.search(code)
    graph = Graph(cid, prefix.group(1) if prefix else None, output_code=code)
    keys = list(stacks) + [k for k in (maps.get("cppCodeToPost") or {}) if k not in stacks]
    for key in keys:
        name, _, handle = key.rpartition(":")
        if not name:
            name, handle = key, "0"
        graph.kernels.append(Kernel(_short(name), _kind(name), int(handle) if handle.isdigit() else 0,
                                    [_frames(s) for s in stacks.get(key, [])]))
    graph.kernels.sort(key=lambda k: k.order)
    return graph


def _kind(name: str) -> str:
    if name.startswith("extern_kernels."):
        return "extern"
    if _CPP_KERNEL.match(name):
        return "generated"
    return "fallback"


def _short(name: str) -> str:
    """`torch.ops.aten._fft_r2c.default` → `aten._fft_r2c`; others as Inductor names them."""
    if name.startswith("torch.ops."):
        parts = name.split(".")[2:]
        if len(parts) >= 3 and parts[-1] in ("default", "Tensor", "Scalar", "int", "dim", "self", "out"):
            parts = parts[:-1]
        return ".".join(parts)
    return name


def _frames(stack: str) -> list[tuple[str, int]]:
    return [(m.group(1), int(m.group(2))) for m in _FRAME.finditer(stack)]


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


@contextlib.contextmanager
def catching() -> Iterator[_Catch]:
    """While inside, every compiled graph's provenance is kept (`.graphs`)."""
    from torch._logging import _internal

    trace_log = _internal.trace_log
    handler = _Catch()
    saved = trace_log.level
    trace_log.setLevel(logging.DEBUG)
    trace_log.addHandler(handler)
    try:
        yield handler
    finally:
        trace_log.removeHandler(handler)
        trace_log.setLevel(saved)


def output_code_kernels(code: str) -> list[str]:
    """The kernels an output code defines and calls (`cpp_fused_x_0 = async_compile.cpp_pybinding(...)`,
    `triton_poi_fused_x_0 = async_compile.triton(...)`): what its provenance should name."""
    return sorted(set(re.findall(r"^(\w+) = async_compile\.\w+\(", code, flags=re.M)))
