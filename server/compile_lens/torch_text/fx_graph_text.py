"""A printed FX graph (`GraphModule.print_readable`, as the pre-grad graph artifacts hold it) read as
text (stdlib only): each node's name and the source line FX wrote above it.

FX writes `# File: /path/m.py:29 in forward, code: x = self.fc1(x)` (the innermost frame of the
node's stack trace: one frame, which may be torch's own, e.g. `torch/nn/modules/linear.py:125`) once
above the nodes that share that stack trace, and `# No stacktrace found for following nodes` above
those without one; a node is `name: "f32[8, 16]…" = torch.op(…)` (or `name = …`). The graph's
`# graph id: N` at the end is what the node history of `inductor_post_to_pre_grad_nodes` names.
A post-grad graph's nodes call aten ops: `mm_default: "f32[…]" = torch.ops.aten.mm.default(mul, …)`.
"""

from __future__ import annotations

import re
from typing import Optional

_FILE = re.compile(r"^\s*# File: (.+?):(\d+) in ([\w<>.]+)")
_NO_TRACE = re.compile(r"^\s*# No stacktrace found")
_NODE = re.compile(r"^\s+(\w+)(?:: \"[^\"]*\")? = ")
_OP = re.compile(r"^\s+(\w+)(?:: \"[^\"]*\")? = torch\.ops\.\w+\.(\w+)\.\w+\(", re.M)
_GRAPH_ID = re.compile(r"^\s*# graph id: (\d+)\s*$", re.M)


def node_frames(graph: str) -> dict[str, tuple[str, int]]:
    """{node name: (path, line)} for the nodes FX gave a source line."""
    found: dict[str, tuple[str, int]] = {}
    current: Optional[tuple[str, int]] = None
    for text in (graph or "").splitlines():
        where = _FILE.match(text)
        if where:
            current = (where.group(1), int(where.group(2)))
        elif _NO_TRACE.match(text) or text.lstrip().startswith(("def ", "class ", "return ")):
            current = None  # a new graph (a submodule's forward) or its end: the comment no longer holds
        else:
            node = _NODE.match(text)
            if node and current is not None and len(str(current[1])) < 11:
                found.setdefault(node.group(1), current)
    return found


def graph_id(graph: str) -> Optional[int]:
    found = _GRAPH_ID.search(graph or "")
    return int(found.group(1)) if found else None


def node_ops(graph: str) -> dict[str, str]:
    """{node name: the op it calls} (`mm` for `torch.ops.aten.mm.default`)."""
    return {m.group(1): m.group(2) for m in _OP.finditer(graph or "")}
