"""The levers phase's edits: a lever measured better (`render.levers_text.offered`) as a code action
on its target, with the figures in the title, the edit in the user's own code.

Regional compilation: where this file compiles the model (`compiled = torch.compile(model, ...)`),
that statement compiles each block instead (`for block in model.blocks: block.compile(...)`); where
it does not, the model's `__init__` ends by compiling its blocks — its own code, no wrapper. Only
the regional lever has an edit so far; the others are shown (hover, CLI, report) without one.
"""

from __future__ import annotations

import ast
from typing import Any, Optional

from lsprotocol import types as lsp

from ..lints.facts import dotted_name
from .source import COMPILES, REWRITE, Edit, Source, _action

COMMENT = "regional compilation: each {cls} compiled once and reused (measured by Compile Lens)"


def lever_actions(src: Source, uri: str, line: int, levers: dict[str, list[Any]],
                  targets: list[Any]) -> list[lsp.CodeAction]:
    """The edits of the levers measured better on the target whose `class` line is `line`."""
    found = []
    for spec in targets:
        if spec.line != line:
            continue
        for lever in levers.get(spec.name, []):
            if lever.verdict == "better" and lever.action and lever.lever == "regional":
                found.append(_action(lever.action, REWRITE, {
                    "fix": "regional", "uri": uri, "target": spec.name, "attribute": lever.data.get("attribute", ""),
                    "names": lever.data.get("names", []), "block_class": lever.data.get("block_class", "block")}))
    return found


def _blocks_expr(owner: str, data: dict) -> str:
    """`self.blocks`, or `(self.enc1, self.enc2)` for repeated attributes of the model itself."""
    attribute = data.get("attribute") or ""
    if attribute:
        return f"{owner}.{attribute}"
    return "(" + ", ".join(f"{owner}.{n}" for n in data["names"]) + ",)"


def _resolve_regional(src: Source, data: dict) -> Optional[list[Edit]]:
    return _at_call_site(src, data) or _in_init(src, data)


def _built_from(src: Source, target: str) -> set[str]:
    """Names assigned `Target(...)` in this file."""
    names = set()
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                isinstance(node.value.func, ast.Name) and node.value.func.id == target:
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _at_call_site(src: Source, data: dict) -> Optional[list[Edit]]:
    """`compiled = torch.compile(model, **kw)` → each block compiled with `**kw`, then `compiled = model`."""
    models = _built_from(src, data["target"])
    for node in ast.walk(src.tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and dotted_name(node.value.func) in COMPILES
                and len(node.value.args) == 1 and isinstance(node.value.args[0], ast.Name)
                and node.value.args[0].id in models):
            continue
        model, result = node.value.args[0].id, node.targets[0].id
        options = ", ".join(ast.get_source_segment(src.text, k) or "" for k in node.value.keywords)
        indent = src.rows[node.lineno - 1][: node.col_offset]
        lines = [f"for block in {_blocks_expr(model, data)}:  # {COMMENT.format(cls=data['block_class'])}",
                 f"{indent}    block.compile({options})"]
        if result != model:
            lines.append(f"{indent}{result} = {model}")
        return [Edit(node.lineno - 1, node.col_offset, (node.end_lineno or node.lineno) - 1, node.end_col_offset or 0,
                     src.nl.join(lines))]
    return None


def _in_init(src: Source, data: dict) -> Optional[list[Edit]]:
    """At the end of the model's `__init__`: its blocks compile themselves."""
    for node in ast.walk(src.tree):
        if isinstance(node, ast.ClassDef) and node.name == data["target"]:
            init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
            if init is None:
                return None
            last = init.body[-1]
            indent = src.rows[init.body[0].lineno - 1][: init.body[0].col_offset]
            end = last.end_lineno or last.lineno
            text = (f"{src.nl}{indent}for block in {_blocks_expr('self', data)}:  "
                    f"# {COMMENT.format(cls=data['block_class'])}{src.nl}{indent}    block.compile()")
            return [Edit(end - 1, len(src.rows[end - 1]), end - 1, len(src.rows[end - 1]), text)]
    return None
