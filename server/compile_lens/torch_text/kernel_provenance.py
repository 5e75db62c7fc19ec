"""Inductor's provenance artifacts read as text (stdlib only): which kernels a compiled graph has and
the user stack traces of the FX nodes each came from. Shared by the worker (`measure/provenance`,
caught in-process) and `trace_import` (read from a TORCH_TRACE log).

torch 2.13 writes, per compiled graph when `trace.provenance_tracking_level` is on (`INDUCTOR_PROVENANCE=1`),
the artifacts `inductor_provenance_tracking_node_mappings` ({"preToPost", "postToPre", "cppCodeToPost",
"postToCppCode"}: kernel key → post-grad node names) and `inductor_provenance_tracking_kernel_stack_traces`
({kernel key: [one stack trace text per node]}). A kernel key is `"<kernel>:<handle>"`: `cpp_fused_x_0:2`
(a generated C++ kernel), `triton_poi_fused_x_0:1` (Triton), `extern_kernels.addmm:1` (a library
kernel), `torch.ops.aten._fft_r2c.default:3` (an aten op Inductor did not lower); the handle is the
order in which the graph's `call()` runs them. A stack trace text is Python's: `File "m.py", line 17, in forward`.

Stale entries (torch 2.13): Inductor keeps these maps in module globals that it resets around a
forward compile and *restores* after it; a backward compiled later (lazily, at the first
`.backward()`) adds to the restored globals, so each backward graph's artifacts also list every
kernel of the backward graphs compiled before it in the process (seen: a second model's backward
naming the first model's `extern_kernels.mm` at the first model's lines). The handle counter is
not reset for them either, so a new kernel always has a new key: a key an earlier backward graph
listed is stale (`keys`, `kernels(stale=...)`).
"""

from __future__ import annotations

import re
from typing import Any

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_GENERATED = re.compile(r"^(cpp_|triton_)")
STACK_TRACES = "inductor_provenance_tracking_kernel_stack_traces"
NODE_MAPPINGS = "inductor_provenance_tracking_node_mappings"


def kind(name: str) -> str:
    """"generated" (C++/Triton) | "extern" (a library kernel: mm, addmm, convolution) | "fallback" (an aten op)."""
    if name.startswith("extern_kernels."):
        return "extern"
    if _GENERATED.match(name):
        return "generated"
    return "fallback"


def short(name: str) -> str:
    """`torch.ops.aten._fft_r2c.default` → `aten._fft_r2c`; others as Inductor names them."""
    if name.startswith("torch.ops."):
        parts = name.split(".")[2:]
        if len(parts) >= 3 and parts[-1] in ("default", "Tensor", "Scalar", "int", "dim", "self", "out"):
            parts = parts[:-1]
        return ".".join(parts)
    return name


def frames(stack: str) -> list[tuple[str, int]]:
    """(path, line) per frame of a stack trace text, outermost first."""
    return [(m.group(1), int(m.group(2))) for m in _FRAME.finditer(stack)]


def keys(stacks: Any, maps: Any = None) -> list[str]:
    """The kernel keys of one graph's artifacts: its stack traces', then those only the node mappings name."""
    stacks = stacks if isinstance(stacks, dict) else {}
    code_to_post = maps.get("cppCodeToPost") if isinstance(maps, dict) else None
    found = [k for k in stacks if isinstance(k, str)]
    return found + [k for k in (code_to_post if isinstance(code_to_post, dict) else {}) if isinstance(k, str) and k not in stacks]


def kernels(stacks: Any, maps: Any = None, stale: Any = ()) -> list[tuple[str, str, int, list[list[tuple[str, int]]]]]:
    """(name, kind, order, stacks per node) for each kernel of one graph, in `call()`'s order, less
    the `stale` keys (see above); a kernel the node mappings name without a stack trace has none.
    Anything of another shape is skipped."""
    stacks = stacks if isinstance(stacks, dict) else {}
    out = []
    for key in keys(stacks, maps):
        if key in stale:
            continue
        name, _, handle = key.rpartition(":")
        if not name:
            name, handle = key, "0"
        texts = stacks.get(key) or []
        texts = [t for t in (texts if isinstance(texts, list) else [texts]) if isinstance(t, str)]
        out.append((short(name), kind(name), int(handle) if handle.isdigit() and len(handle) < 12 else 0,
                    [frames(t) for t in texts]))
    out.sort(key=lambda k: k[2])
    return out
