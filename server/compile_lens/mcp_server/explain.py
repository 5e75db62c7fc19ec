"""`explain`: a code's entry in docs/codes.md and, for a graph-break id, torch's own registry entry
(`torch/_dynamo/graph_break_registry.json` of the torch installed here, read as a file: found by
`importlib.util.find_spec`, which does not import torch)."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from typing import Any, Optional

from .. import codes
from ..jobs.cache import torch_version


class UnknownCode(ValueError):
    pass


def normalise(code: str) -> str:
    text = code.strip()
    return text.upper() if text[:2].upper() in ("GB", "CL") else text.lower()


def explain(code: str) -> dict[str, Any]:
    """What `code` means: Compile Lens's title, severity and documentation; torch's text and hints."""
    name = normalise(code)
    known = codes.CODES.get(name)
    if known is None and not codes.is_gb_id(name):
        raise UnknownCode(f"unknown code {code!r}: Compile Lens's codes are {', '.join(codes.CODES)}; "
                          "torch's graph-break ids look like GB0124")
    entry = _torch_entry(name) if codes.is_gb_id(name) else None
    return {
        "code": name,
        "title": known.title if known else (entry or {}).get("gb_type"),
        "severity": known.severity if known else "warning",
        "href": codes.web_href(name) or codes.href(name),
        "documentation": codes.doc_section(name),
        "torch": entry,
        "torch_version": torch_version(),
        "note": (None if entry is not None or not codes.is_gb_id(name)
                 else f"{name} is not in this torch's graph-break registry"),
    }


def _torch_entry(gb_id: str) -> Optional[dict[str, Any]]:
    entries = registry().get(gb_id) or []
    if not entries:
        return None
    first = entries[0]  # today's wording; older ones follow
    return {"gb_type": first.get("Gb_type"), "context": first.get("Context"),
            "explanation": first.get("Explanation"), "hints": list(first.get("Hints") or [])}


@functools.lru_cache(maxsize=1)
def registry() -> dict[str, list[dict[str, Any]]]:
    """{} when torch is not installed here or its torch has no registry (before 2.8)."""
    spec = importlib.util.find_spec("torch")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        try:
            with open(os.path.join(folder, "_dynamo", "graph_break_registry.json"), encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            continue
    return {}
