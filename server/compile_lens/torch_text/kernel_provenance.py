"""Inductor's provenance artifacts read as text (stdlib only): which kernels a compiled graph has and
the user stack traces of the FX nodes each came from. Shared by the worker (`measure/lines/provenance`,
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

The older generation (torch of 2025, e.g. tlparse's CUDA test logs) has no stack traces: per graph,
`inductor_triton_kernel_to_post_grad_nodes` ({kernel: [post-grad node]}; keys without a handle, an
extern kernel's calls merged under one key, with their input nodes: `extern_kernels.mm` lists both
`mm` nodes and the `mul` that feeds one) and `inductor_post_to_pre_grad_nodes` ({post-grad node:
[its history: {"name", "graph_id", "from_node": [...]}]}), and the pre-grad graph's text
(`fx_graph_text`) gives each pre-grad node its line (`older_kernels`); the post-grad graph's text
tells an extern kernel's own nodes (those calling its op) from its inputs. Their node mappings
(`postToPre`, `cppCodeToPost`) say the same flattened, when the log has them.
"""

from __future__ import annotations

import re
from typing import Any

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_GENERATED = re.compile(r"^(cpp_|triton_)")
STACK_TRACES = "inductor_provenance_tracking_kernel_stack_traces"
NODE_MAPPINGS = "inductor_provenance_tracking_node_mappings"
KERNEL_TO_POST = "inductor_triton_kernel_to_post_grad_nodes"
POST_TO_PRE = "inductor_post_to_pre_grad_nodes"
POST_GRAD_GRAPHS = ("after_post_grad_graph", "after_recompile_post_grad")  # the nodes' ops
PRE_GRAD_GRAPHS = ("before_pre_grad_graph", "after_pre_grad_graph",  # the graph the pre-grad nodes are in
                   "before_recompile_pre_grad", "after_recompile_pre_grad")  # (an older torch's names)


def kind(name: str) -> str:
    """"generated" (C++/Triton) | "extern" (a library kernel: mm, addmm, convolution) | "fallback" (an aten op)."""
    if name.startswith(("extern_kernels.", "aoti_torch_")):  # AOTInductor calls a library kernel through its C shim
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


def _roots(history: Any, graph: Any) -> list[str]:
    """The pre-grad nodes one post-grad node's history starts from: the nodes of `graph` (the
    pre-grad graph's id) it names, else its named nodes with no earlier history."""
    found: list[str] = []
    todo = list(history) if isinstance(history, list) else []
    while todo:
        node = todo.pop(0)
        if not isinstance(node, dict):
            continue
        name, earlier = node.get("name"), node.get("from_node")
        if isinstance(name, str) and name and (node.get("graph_id") == graph if graph is not None else not earlier):
            if name not in found:
                found.append(name)
        elif isinstance(earlier, list):
            todo.extend(earlier)
    return found


def post_to_pre(maps: Any = None, history: Any = None, graph: Any = None) -> dict[str, list[str]]:
    """{post-grad node: [pre-grad node]}: the node mappings' `postToPre`, else read from
    `inductor_post_to_pre_grad_nodes`' histories (`graph`: the pre-grad graph's id, when known)."""
    flat = maps.get("postToPre") if isinstance(maps, dict) else None
    if isinstance(flat, dict) and flat:
        return {k: [n for n in v if isinstance(n, str)] for k, v in flat.items() if isinstance(k, str) and isinstance(v, list)}
    history = history if isinstance(history, dict) else {}
    return {k: _roots(v, graph) for k, v in history.items() if isinstance(k, str)}


def extern_op(name: str) -> str:
    """The aten op a library kernel runs: `extern_kernels.mm` and `aoti_torch_cuda_mm_out` → `mm`."""
    name = name.removeprefix("extern_kernels.")
    name = re.sub(r"^aoti_torch_(?:cuda|cpu|xpu|mps)_", "", name)
    return name.removesuffix("_out")


def older_kernels(kernel_to_post: Any, post_pre: dict[str, list[str]], node_lines: dict[str, tuple[str, int]],
                  post_ops: Any = None) -> list[tuple[str, str, int, list[list[tuple[str, int]]]]]:
    """As `kernels`, from the older generation's maps: per kernel (in the artifact's order), one
    one-frame stack per pre-grad node its post-grad nodes came from that the pre-grad graph gives a
    line; a node with no line is left out. An extern kernel's key merges its calls: one entry per
    post-grad node that calls its op (`post_ops`, the post-grad graph's; all its nodes when none does)."""
    kernel_to_post = kernel_to_post if isinstance(kernel_to_post, dict) else {}
    post_ops = post_ops if isinstance(post_ops, dict) else {}
    out = []
    for order, (name, posts) in enumerate(kernel_to_post.items()):
        if not isinstance(name, str):
            continue
        posts = [p for p in posts if isinstance(p, str)] if isinstance(posts, list) else []
        groups = [posts]
        if kind(name) != "generated":
            own = [p for p in posts if post_ops.get(p) == extern_op(name)]
            groups = [[p] for p in own] or [posts]
        for group in groups:
            stacks: list[list[tuple[str, int]]] = []
            for post in group:
                for pre in post_pre.get(post, []):
                    where = node_lines.get(pre)
                    if where is not None and [where] not in stacks:
                        stacks.append([where])
            out.append((short(name), kind(name), order, stacks))
    return out
