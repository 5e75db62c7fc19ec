"""An imported function's kernels on the workspace's lines: what Inductor's provenance artifacts
(`fold.SeenKernel`, when the run had `INDUCTOR_PROVENANCE=1`) say each line became. A trace has no
profile, so there are no times: each line names its kernels (generated — fused with which lines —,
extern, fallback; a backward kernel says so) as `check`'s line costs do, with `eager_us` and
`compiled_us` null, and a generated kernel's source when the log has the graph's output code.

Which line: per FX node a kernel came from, the innermost frame of its stack trace that maps onto a
workspace file (`paths`); an extern or fallback kernel is one op, at the first line its nodes name
(as `worker/measure/lines/costs` gives it). A frame in torch's own files is never the line
(`paths`: they map onto no workspace file): a node whose only frame is torch's (AOTInductor's
pre-grad graph names `torch/nn/modules/linear.py` for a module call) gives its kernel no line.
"""

from __future__ import annotations

from typing import Any

from .fold import CompiledFunction
from .paths import PathMap


def _lines(kernel_stacks: list[list[tuple[str, int]]], paths: PathMap) -> list[tuple[str, int]]:
    lines: list[tuple[str, int]] = []
    for stack in kernel_stacks:
        for path, line in reversed(stack):
            local = paths.local(path, listed=False)
            if local is not None:
                if (local, line) not in lines:
                    lines.append((local, line))
                break
    return lines


def lines_of(fn: CompiledFunction, paths: PathMap) -> list[dict[str, Any]]:
    """`[{"path", "line", "eager_us": None, "compiled_us": None, "kernels": [{"name", "kind", "us": None,
    "lines", "backward", "compile_id", "source"}], "fused_with": [{"path", "line"}], "fallback"}]`, by path and line."""
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for k in fn.kernels:
        lines = _lines(k.stacks, paths)
        if k.kind != "generated":
            lines = lines[:1]
        for where in lines:
            entry = found.setdefault(where, {"path": where[0], "line": where[1], "eager_us": None, "compiled_us": None,
                                             "kernels": [], "fused_with": [], "fallback": False})
            named = {"name": k.name, "kind": k.kind, "us": None, "lines": len(lines), "backward": k.backward,
                     "compile_id": k.compile_id, "source": k.source}
            if not any(all(n[f] == named[f] for f in ("name", "kind", "backward", "compile_id")) for n in entry["kernels"]):
                entry["kernels"].append(named)  # one graph may name a kernel under two handles
            if k.kind == "generated":
                entry["fused_with"] += [{"path": p, "line": n} for p, n in lines
                                        if (p, n) != where and {"path": p, "line": n} not in entry["fused_with"]]
            entry["fallback"] = entry["fallback"] or k.kind == "fallback"
    for entry in found.values():
        entry["fused_with"].sort(key=lambda r: (r["path"], r["line"]))
    return [found[k] for k in sorted(found)]


def text(entry: dict[str, Any]) -> str:
    """`cpp_fused_add_mul_0 (fused ×3), extern_kernels.addmm (extern), aten._fft_r2c (falls back)`."""
    words: list[str] = []  # each kernel once (a recompile makes the same kernels again)
    for k in entry["kernels"]:
        what = ("falls back" if k["kind"] == "fallback" else "extern" if k["kind"] == "extern"
                else f"fused ×{k['lines']}" if k["lines"] > 1 else "generated")
        word = f"{k['name']} ({'backward, ' if k['backward'] else ''}{what})"
        if word not in words:
            words.append(word)
    return ", ".join(words)
