"""`check --baseline FILE`: CI fails on new findings only. A finding is known by its file, code,
message and the text of its line, not its line number (lines above it move)."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from ..protocol import FileReport, Finding
from .common import lines_of

BASELINE_VERSION = 1

_LOCATION_IN_TEXT = re.compile(r"(\.py):\d+")


def _baseline_key(f: Finding, root: str, lines: list[str]) -> str:
    """What identifies a finding across edits elsewhere in the file: its file, code, message and the
    text of its line — not the line number (lines above it move)."""
    path = os.path.relpath(os.path.realpath(f.path), os.path.realpath(root)).replace(os.sep, "/")
    text = lines[f.line - 1].strip() if 0 < f.line <= len(lines) else ""
    message = _LOCATION_IN_TEXT.sub(r"\1", " ".join((f.message.splitlines() or [""])[0].split()))
    return "\x1f".join((path, f.code, message, text))


def write_baseline(reports: list[FileReport], root: str, target: str) -> int:
    cache: dict[str, list[str]] = {}
    entries: dict[str, dict[str, Any]] = {}
    for report in reports:
        for f in report.findings:
            key = _baseline_key(f, root, lines_of(f.path, cache))
            path, code, message, text = key.split("\x1f")
            entry = entries.setdefault(key, {"path": path, "code": code, "message": message, "line_text": text,
                                             "count": 0})
            entry["count"] += 1
    rows = sorted(entries.values(), key=lambda e: (e["path"], e["code"], e["message"], e["line_text"]))
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    with open(target, "w", encoding="utf-8") as fh:
        json.dump({"version": BASELINE_VERSION, "tool": "compile-lens", "findings": rows}, fh, indent=2)
        fh.write("\n")
    return sum(e["count"] for e in rows)


def apply_baseline(reports: list[FileReport], root: str, source: str) -> int:
    """Mark the findings the baseline holds (`data["baseline"]`): not shown, not failing. Returns how many."""
    with open(source, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, dict) or data.get("version") != BASELINE_VERSION:
        raise ValueError(f"{source} is not a compile-lens baseline (version {BASELINE_VERSION})")
    budget: dict[str, int] = {}
    for e in data.get("findings", []):
        key = "\x1f".join((e["path"], e["code"], e["message"], e["line_text"]))
        budget[key] = budget.get(key, 0) + int(e.get("count", 1))
    cache: dict[str, list[str]] = {}
    hidden = 0
    for report in reports:
        for f in report.findings:
            key = _baseline_key(f, root, lines_of(f.path, cache))
            if budget.get(key, 0) > 0:
                budget[key] -= 1
                f.data = {**f.data, "baseline": True}
                hidden += 1
    return hidden
