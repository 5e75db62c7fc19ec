"""What identifies a finding across runs, edits and rewordings: the structured data it was made
from — its file (relative to the root), its code, the text of its line, and what its kind names
(the graph break's registry id and function, the recompile's target, changed input and variation,
the problem's kind) — never its message, its line number or anything a run measured.

Baselines (`cli/baseline.py`) count findings by this key; SARIF's `partialFingerprints` hash it."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Optional

from ..protocol import Finding
from ..torch_text.stable_text import stable_text

# the fields of `Finding.data` that say which finding this is (never a count, a figure or a text
# made for reading); gb_type only stands in where torch gave no registry id
IDENTITY_FIELDS = ("kind", "gb_id", "function", "call_site", "target", "changed", "variation",
                   "problem", "phase")


def relative_path(path: str, root: str) -> str:
    """`path` relative to `root` with forward slashes (the same on every machine and checkout)."""
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(root))
    return rel.replace(os.sep, "/")


def line_text(lines: list[str], line: int) -> str:
    """The line's code with its spacing collapsed: re-indenting or a moved line keeps the key."""
    return " ".join(lines[line - 1].split()) if 0 < line <= len(lines) else ""


def identity(f: Finding, root: str, lines: list[str]) -> dict[str, str]:
    """The finding's stable key as named fields (baselines store them for a reader to see)."""
    found = {"path": relative_path(f.path, root), "code": f.code, "line_text": line_text(lines, f.line)}
    for name in IDENTITY_FIELDS:
        value = f.data.get(name)
        if value not in (None, "", False):
            found[name] = stable_text(str(value))
    if f.data.get("kind") == "graph_break" and not f.data.get("gb_id") and f.data.get("gb_type"):
        found["gb_type"] = stable_text(str(f.data["gb_type"]))
    return found


def key_of(fields: dict[str, str]) -> str:
    """One string for a key's fields (order-free), to count or hash."""
    return json.dumps(fields, sort_keys=True, ensure_ascii=False)


def fingerprint(fields: dict[str, str], occurrence: Optional[int] = None) -> str:
    """A short hash of the key; `occurrence` (1, 2, …) tells apart findings whose keys are equal."""
    digest = hashlib.sha256(key_of(fields).encode("utf-8")).hexdigest()[:32]
    return digest if occurrence is None else f"{digest}:{occurrence}"


class LineCache:
    """Files' lines, each read once (the key needs the text of a finding's line)."""

    def __init__(self) -> None:
        self.files: dict[str, list[str]] = {}

    def __call__(self, path: str) -> list[str]:
        if path not in self.files:
            try:
                with open(path, encoding="utf-8") as fh:
                    self.files[path] = fh.read().splitlines()
            except (OSError, UnicodeDecodeError):
                self.files[path] = []
        return self.files[path]
