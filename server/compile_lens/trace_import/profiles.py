"""`compile-lens import` of PyTorch profiler traces: each rank's GPU figures (`kineto`), and the
kernels' GPU time put on the workspace's lines, from one of two sources:

- **provenance**: a TORCH_TRACE log of the same run beside the profile (in the same folder, or
  given with `--provenance`): Inductor's provenance names the lines each generated kernel came
  from, and the kernel's name is the one the profile shows (`triton_poi_fused_mul_1`). A kernel
  fused from several lines is split evenly among them, as the live line costs split it.
- **stacks**: a profile recorded with `with_stack=True`: the innermost Python function outside
  libraries that was running when the kernel was launched, at its `def` line (the profiler's
  Python tracer records frames as they are entered, not the line inside them).

Each line becomes a CL401 finding (information: it fails no build) that says its GPU time; the
JSON gives every rank's figures and its `lines`. A run's paths are mapped onto the workspace as
the structured trace's are (`paths`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional

from ..codes import GPU_TIME
from ..kineto.profile import RankProfile
from ..kineto.ranks import profile_json, read_profiles, trace_files
from ..protocol import FileReport, Finding
from ..render.units import FINE, duration
from .paths import PathMap
from .report import LOG_PREFIX, NotATrace, trace_logs

SOURCE = "Compile Lens (imported profile)"
LINES_SHOWN = 20  # per rank: the costliest lines become findings; the JSON keeps them all


@dataclass
class ProfileImport:
    ranks: list[RankProfile]
    lines: dict[int, list[dict[str, Any]]]  # rank index -> the workspace lines, costliest first
    reports: list[FileReport]
    unmapped: dict[str, str]
    provenance: Optional[str] = None  # the TORCH_TRACE log(s) whose provenance put kernels on lines
    notes: list[str] = field(default_factory=list)


def is_profile(path: str) -> bool:
    """`compile-lens import` detects profiles by content: a trace file, or a folder holding any."""
    return bool(trace_files(path))


def _provenance_logs(path: str, given: Optional[str]) -> list[str]:
    if given:
        return trace_logs(given)
    try:  # the logs beside the profile, as a TORCH_TRACE folder's are listed
        return trace_logs(path if os.path.isdir(path) else os.path.dirname(path) or ".")
    except NotATrace:
        return []


def _kernel_lines(logs: list[str], paths: PathMap) -> dict[str, list[tuple[str, int]]]:
    """Kernel name -> the workspace lines Inductor's provenance says it came from (every compile of the logs)."""
    from .fold import fold
    from .kernel_lines import lines_of

    found: dict[str, list[tuple[str, int]]] = {}
    for log in logs:
        with open(log, encoding="utf-8", errors="replace") as stream:
            trace = fold(stream, log)
        for fn in trace.functions:
            for entry in lines_of(fn, paths):
                for k in entry["kernels"]:
                    where = (entry["path"], entry["line"])
                    if where not in found.setdefault(k["name"], []):
                        found[k["name"]].append(where)
    return found


def _lines(r: RankProfile, paths: PathMap, by_kernel: dict[str, list[tuple[str, int]]]) -> list[dict[str, Any]]:
    busy = sum(r.busy_us.values()) if r.clock == "gpu" else sum(r.kernel_us.values())
    busy = busy or 1.0
    out: dict[tuple[str, int], dict[str, Any]] = {}

    def give(where: tuple[str, int], us: float, kernel: str, source: str, function: Optional[str]) -> None:
        entry = out.setdefault(where, {"path": where[0], "line": where[1], "function": function, "us": 0.0,
                                       "share": 0.0, "kernels": [], "from": source, "clock": r.clock})
        entry["us"] += us
        if kernel not in entry["kernels"]:
            entry["kernels"].append(kernel)

    if by_kernel:
        for name, us in r.kernel_us.items():
            lines = by_kernel.get(name) or []
            for where in lines:
                give(where, us / len(lines), name, "provenance", None)
    if r.with_stack and not out:  # a stack names only a function's `def`: used where provenance placed nothing
        for frame, us, kernels in r.frames:
            local = paths.local(frame.path, listed=False)
            if local is not None:
                for i, name in enumerate(kernels):
                    give((local, frame.line), us if i == 0 else 0.0, name, "stack", frame.function)
    for entry in out.values():
        entry["share"] = round(entry["us"] / busy, 4)
        entry["us"] = round(entry["us"], 1)
    return sorted(out.values(), key=lambda e: -e["us"])


def _who(r: RankProfile, many: bool) -> str:
    return f"rank {r.rank}" if r.rank is not None else os.path.basename(r.path) if many else "the profile"


def line_text(entry: dict[str, Any], who: str) -> str:
    """`GPU 12.3 ms on rank 0 (18% of its busy time): triton_poi_fused_mul_1, …`; `CPU 1.2 ms … (18% of its
    kernels' time)` for a CPU profile's Inductor kernels."""
    where = f" (in {entry['function']}, whose def line this is)" if entry["from"] == "stack" else ""
    kernels = ", ".join(entry["kernels"][:3]) + (f" and {len(entry['kernels']) - 3} more" if len(entry["kernels"]) > 3 else "")
    clock, of = ("GPU", "its busy time") if entry.get("clock", "gpu") == "gpu" else ("CPU", "its Inductor kernels' time")
    return f"{clock} {duration(ms=entry['us'] / 1000, style=FINE)} on {who} ({entry['share']:.0%} of {of}){where}: {kernels}"


def hint_label(finding: Finding) -> str:
    """The inlay hint of a CL401 line: `GPU 12.3 ms (18%)` (`data` keeps the figures the message says)."""
    clock = "CPU" if finding.message.startswith("CPU") else "GPU"
    return f"{clock} {duration(ms=finding.data['us'] / 1000, style=FINE)} ({finding.data['share']:.0%})"


def import_profiles(path: str, root: str, maps: Optional[list[tuple[str, str]]] = None,
                    provenance: Optional[str] = None) -> ProfileImport:
    ranks = read_profiles(path)
    if not ranks:
        raise NotATrace(f"{path}: no PyTorch profiler trace (a Kineto *.json or *.json.gz) in it")
    paths = PathMap(root, maps or [])
    logs = _provenance_logs(path, provenance)
    by_kernel = _kernel_lines(logs, paths) if logs else {}
    many = len(ranks) > 1
    reports: dict[str, FileReport] = {}
    lines: dict[int, list[dict[str, Any]]] = {}
    notes = []
    for i, r in enumerate(ranks):
        lines[i] = _lines(r, paths, by_kernel)
        who = _who(r, many)
        if r.truncated:
            notes.append(f"{os.path.basename(r.path)}: the file ends before its JSON does (cut short?): what was read is shown")
        for entry in lines[i][:LINES_SHOWN]:
            report = reports.setdefault(entry["path"], FileReport(entry["path"]))
            report.findings.append(Finding(entry["path"], entry["line"], 0, entry["line"], 0, "information", GPU_TIME,
                                           line_text(entry, who), data={"us": entry["us"], "share": entry["share"], "rank": r.rank}))
    if logs and not provenance:  # nothing dropped unsaid: the logs' own findings are another import's
        notes.append(f"the TORCH_TRACE logs beside the profile ({len(logs)}) were read for their provenance only: "
                     f"`compile-lens import {logs[0]}` shows their graph breaks and recompiles")
    if ranks and not any(lines.values()) and any(r.kernels for r in ranks):
        notes.append("no kernel placed on a workspace line: record with `with_stack=True`, or put the run's "
                     f"TORCH_TRACE log ({LOG_PREFIX}*.log, with Inductor provenance on) beside the profile")
    return ProfileImport(ranks, lines, sorted(reports.values(), key=lambda r: r.path), dict(paths.unmapped),
                         ", ".join(os.path.basename(p) for p in logs) or None, notes)


def profiles_json(imported: ProfileImport) -> dict[str, Any]:
    return {"kind": "profile", "ranks": [profile_json(r, imported.lines[i]) for i, r in enumerate(imported.ranks)],
            "provenance": imported.provenance, "notes": imported.notes,
            "unmapped": [{"path": p, "why": why} for p, why in sorted(imported.unmapped.items())]}
