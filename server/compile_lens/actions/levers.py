"""The levers phase's edits: a lever measured better (`render.levers_text.offered`) as a code action
on its target, with the figures in the title, the edit in the user's own code.

Regional compilation (on the target's `class` line, and on the loop line whose repeated block takes
most of its compile, `loop_actions`): where this file compiles the model (`compiled = torch.compile(model, ...)`),
that statement compiles each block instead (`for block in model.blocks: block.compile(...)`); where
it does not, the model's `__init__` ends by compiling its blocks — its own code, no wrapper.

Dynamic, static, guard filters and the GPU levers' modes: a keyword on each call of this file that compiles the target, as
the user wrote it — `torch.compile(model, …)`, `torch.compile(Net(), …)`, `model.compile(…)`,
`@torch.compile` — whatever its layout (one argument a line, a trailing comma, keywords already
there): `dynamic=True` / `dynamic=False` (the value replaced where `dynamic=` is written),
`options={"guard_filter_fn": torch.compiler.<filter>}` (a key added to an `options={…}` already
there), `mode="reduce-overhead"` (CUDA graphs) / `mode="max-autotune-no-cudagraphs"` (the value replaced
where `mode=` is written). Where the target is not compiled in this file there is nothing of the
user's to edit, and nothing is offered; a guard filter is not offered beside `mode=`, nor a mode
beside `options=` (torch takes one or the other).
"""

from __future__ import annotations

import ast
from typing import Any, Optional

from lsprotocol import types as lsp

from ..lints.facts import dotted_name
from ..render import compile_lines
from .dynamic import _add_keyword, _compile_sites
from .header import header_edits
from .source import COMPILES, REWRITE, Edit, Source, _action

MODES = {"cudagraphs": "reduce-overhead", "max_autotune": "max-autotune-no-cudagraphs"}  # the GPU levers' `mode=`
COMMENT = "regional compilation: each {cls} compiled once and reused (measured by Compile Lens)"


def lever_actions(src: Source, uri: str, line: int, levers: dict[str, list[Any]],
                  targets: list[Any]) -> list[lsp.CodeAction]:
    """The edits of the levers measured better on the target whose `class` line is `line`."""
    found = []
    for spec in targets:
        if spec.line != line:
            continue
        for lever in levers.get(spec.name, []):
            if lever.verdict != "better" or not lever.action:
                continue
            if lever.lever == "regional":
                found.append(_action(lever.action, REWRITE, {
                    "fix": "regional", "uri": uri, "target": spec.name, "attribute": lever.data.get("attribute", ""),
                    "names": lever.data.get("names", []), "block_class": lever.data.get("block_class", "block")}))
                continue
            data = _keyword_data(lever, uri, spec.name)
            if data is not None and _resolve_lever_keyword(src, data):
                found.append(_action(lever.action, REWRITE, data))
    return found


def loop_actions(src: Source, uri: str, line: int, levers: dict[str, list[Any]], targets: list[Any],
                 benchmarks: Any, path: str) -> list[lsp.CodeAction]:
    """The regional edit offered on a loop line too: the line whose calls, repeated by the loop, take
    most of its frame's compile (`render.compile_lines.repeated`), when its target's regional lever was
    measured better — the same edit as on the target's `class` line."""
    found = []
    for c, ct, name in compile_lines.hints_in_file(benchmarks, path):
        spec = next((t for t in targets if t.name == name), None)
        if c.line == line and spec is not None and spec.line != line and compile_lines.repeated(ct, c):
            regional = [lever for lever in levers.get(name, []) if lever.lever == "regional"]
            found += lever_actions(src, uri, spec.line, {name: regional}, targets)
    return found


def _keyword_data(lever: Any, uri: str, target: str) -> Optional[dict]:
    if lever.lever in ("dynamic", "static"):
        return {"fix": "lever_keyword", "uri": uri, "target": target, "keyword": "dynamic",
                "value": "True" if lever.lever == "dynamic" else "False"}
    if lever.lever == "guard_filter" and lever.data.get("filter"):
        return {"fix": "lever_keyword", "uri": uri, "target": target, "keyword": "options",
                "value": f"torch.compiler.{lever.data['filter']}"}
    if lever.lever in MODES:
        return {"fix": "lever_keyword", "uri": uri, "target": target, "keyword": "mode", "value": repr(MODES[lever.lever])}
    return None


def _target_compiles(src: Source, target: str) -> list[ast.AST]:
    """What compiles `target` in this file: `torch.compile(...)` calls and decorators (as the CL210
    fix finds them), and `model.compile(...)` on a name built `model = Target(...)`."""
    sites: list[ast.AST] = [site.node for site in _compile_sites(src, target)]
    models = _built_from(src, target)
    for call in src.calls():
        if isinstance(call.func, ast.Attribute) and call.func.attr == "compile" and \
                isinstance(call.func.value, ast.Name) and call.func.value.id in models:
            sites.append(call)
    return sorted(sites, key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]


def _keyword(call: ast.AST, name: str) -> Optional[ast.keyword]:
    return next((k for k in getattr(call, "keywords", []) if k.arg == name), None)


def _resolve_lever_keyword(src: Source, data: dict) -> Optional[list[Edit]]:
    """`dynamic=True|False`, the guard filter in `options=`, or a GPU lever's `mode=`, on every call
    that compiles the target."""
    edits: list[Edit] = []
    for node in _target_compiles(src, str(data["target"])):
        if data["keyword"] == "options" and _refuses_options(node):
            return None  # a guard filter beside `mode=`: torch refuses the call
        if data["keyword"] == "mode" and _keyword(node, "options") is not None:
            return None  # `mode=` beside `options=`: torch refuses the call
        edit = _options_edit(src, node, data["value"]) if data["keyword"] == "options" else \
            _value_edit(src, node, data["keyword"], data["value"])
        if edit is not None:
            edits.append(edit)
    if not edits:
        return None
    return header_edits(src, ["torch"], []) + edits if data["keyword"] == "options" else edits


def _value_edit(src: Source, node: ast.AST, keyword: str, value: str) -> Optional[Edit]:
    """`keyword=value` on one compile call: added, or the value the user wrote replaced."""
    if not isinstance(node, ast.Call):  # a bare `@torch.compile`
        line, col = src.end(node)
        return Edit(line, col, line, col, f"({keyword}={value})")
    kw = _keyword(node, keyword)
    if kw is None:
        return _add_keyword(src, node, f"{keyword}={value}")
    if isinstance(kw.value, ast.Constant) and repr(kw.value.value) == value:
        return None  # already so
    (l1, c1), (l2, c2) = src.start(kw.value), src.end(kw.value)
    return Edit(l1, c1, l2, c2, value)


def _refuses_options(node: ast.AST) -> bool:
    mode = _keyword(node, "mode")
    return mode is not None and not (isinstance(mode.value, ast.Constant) and mode.value.value is None)


def _options_edit(src: Source, node: ast.AST, value: str) -> Optional[Edit]:
    entry = f'"guard_filter_fn": {value}'
    if not isinstance(node, ast.Call):  # a bare `@torch.compile`
        line, col = src.end(node)
        return Edit(line, col, line, col, "(options={" + entry + "})")
    kw = _keyword(node, "options")
    if kw is None:
        return _add_keyword(src, node, "options={" + entry + "}")
    if isinstance(kw.value, ast.Dict):
        if any(isinstance(k, ast.Constant) and k.value == "guard_filter_fn" for k in kw.value.keys):
            return None  # the user chose a filter already
        if not kw.value.keys:
            (l1, c1), (l2, c2) = src.start(kw.value), src.end(kw.value)
            return Edit(l1, c1, l2, c2, "{" + entry + "}")
        line, col = src.end(kw.value.values[-1])
        return Edit(line, col, line, col, f", {entry}")
    (l1, c1), (l2, c2) = src.start(kw.value), src.end(kw.value)  # `options=opts`: the user's, and the filter
    return Edit(l1, c1, l2, c2, "{**" + (ast.get_source_segment(src.text, kw.value) or "") + ", " + entry + "}")


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
    """`compiled = torch.compile(model, **kw)` → each block compiled with `**kw`, then `compiled = model`;
    `model.compile(**kw)` → each block compiled with `**kw`."""
    models = _built_from(src, data["target"])
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and not node.value.args and \
                isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "compile" and \
                isinstance(node.value.func.value, ast.Name) and node.value.func.value.id in models:
            model = node.value.func.value.id
            options = ", ".join(ast.get_source_segment(src.text, k) or "" for k in node.value.keywords)
            indent = src.rows[node.lineno - 1][: node.col_offset]
            text = (f"for block in {_blocks_expr(model, data)}:  # {COMMENT.format(cls=data['block_class'])}"
                    f"{src.nl}{indent}    block.compile({options})")
            return [Edit(node.lineno - 1, node.col_offset, (node.end_lineno or node.lineno) - 1,
                         node.end_col_offset or 0, text)]
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
