"""Write the guessed inputs of a target as a `# compile-lens: inputs=...` directive."""

from __future__ import annotations

import ast
from typing import Optional

from .source import Edit, Source


def _still_guessed(src: Source, target: str) -> bool:
    """The target's inputs are still Compile Lens's guess in this text (no directive written since)."""
    found = src.discovery()
    spec = next((t for t in (found.targets if found else []) if t.name == target), None)
    return spec is not None and spec.inputs is not None and spec.inputs.source == "inferred"


def _resolve_directive(src: Source, data: dict) -> Optional[list[Edit]]:
    node = next((n for n in src.tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name == data["target"]), None)
    found = src.discovery()
    spec = next((t for t in (found.targets if found else []) if t.name == data["target"]), None)
    if node is None or spec is None or spec.inputs is None or spec.inputs.source != "inferred":
        return None
    text = spec.inputs.text or str(data.get("text") or "")  # after import: the worker's guess
    try:
        ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):
        return None
    if not text or "\n" in text:
        return None
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return [src.insert_lines(first - 1, [f"{src.indent(first)}# compile-lens: inputs={text}"])]
