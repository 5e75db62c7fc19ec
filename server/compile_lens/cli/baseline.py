"""`check --baseline FILE`: CI fails on new findings only. A finding is known by its stable key
(`render.keys`: file, code, the text of its line and the structured data it was made from), never
by its message or line number: lines above it move, messages get reworded, measurements differ.

Version 2 stores each key's fields; version 1 files (keyed on the message's first line, which held
run-specific text) are still read, matched on file, code and line text alone."""

from __future__ import annotations

import json
import os
from typing import Any

from .. import codes
from ..protocol import FileReport, Finding
from ..render.keys import LineCache, identity, key_of

BASELINE_VERSION = 2
READS = (1, 2)
_V1_FIELDS = ("path", "code", "line_text")


def write_baseline(reports: list[FileReport], root: str, target: str) -> int:
    lines = LineCache()
    entries: dict[str, dict[str, Any]] = {}
    for report in reports:
        for f in report.findings:
            fields = identity(f, root, lines(f.path))
            entry = entries.setdefault(key_of(fields), {"key": fields, "about": _about(f), "count": 0})
            entry["count"] += 1
    rows = [entries[k] for k in sorted(entries)]
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    with open(target, "w", encoding="utf-8") as fh:
        json.dump({"version": BASELINE_VERSION, "tool": "compile-lens", "findings": rows}, fh, indent=2,
                  ensure_ascii=False)
        fh.write("\n")
    return sum(e["count"] for e in rows)


def _about(f: Finding) -> str:
    """What the finding is, for a reader of the file (never matched): the code's title or the
    break's type — not the message, whose figures would change the file at every write."""
    return str(f.data.get("gb_type") or codes.title(f.code) or f.code)


def _budget(data: Any, source: str) -> tuple[int, dict[str, int]]:
    if not isinstance(data, dict) or data.get("version") not in READS:
        raise ValueError(f"{source} is not a compile-lens baseline (version {' or '.join(map(str, READS))})")
    version, budget = data["version"], {}
    entries = data.get("findings", [])
    if not isinstance(entries, list):
        raise ValueError(f"{source}: `findings` is not a list")
    for index, e in enumerate(entries):
        try:
            fields = dict(e["key"]) if version == 2 else {name: e[name] for name in _V1_FIELDS}
            if version == 1:
                fields["line_text"] = " ".join(fields["line_text"].split())
            key = key_of(fields)
            budget[key] = budget.get(key, 0) + int(e.get("count", 1))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{source}: finding {index + 1} is not a baseline entry ({type(exc).__name__}: {exc})") \
                from None
    return version, budget


def read_baseline(source: str) -> tuple[int, dict[str, int]]:
    """The baseline file's version and how many findings of each key it holds; ValueError (or
    OSError) says why it is not a baseline."""
    with open(source, encoding="utf-8") as fh:
        return _budget(json.load(fh), source)


def apply_baseline(reports: list[FileReport], root: str, source: str) -> int:
    """Mark the findings the baseline holds (`data["baseline"]`): not shown, not failing. Returns how many."""
    version, budget = read_baseline(source)
    lines = LineCache()
    hidden = 0
    for report in reports:
        for f in report.findings:
            fields = identity(f, root, lines(f.path))
            if version == 1:
                fields = {name: fields[name] for name in _V1_FIELDS}
            key = key_of(fields)
            if budget.get(key, 0) > 0:
                budget[key] -= 1
                f.data = {**f.data, "baseline": True}
                hidden += 1
    return hidden
