"""`# compile-lens:` directives on targets: where one may stand, reading it, stray ones."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional

from ..comments import DIRECTIVE_START, directive_at
from ..protocol import InputRecipe, TargetSpec
from .precision import PRECISIONS, normal


@dataclass
class DirectiveError:
    line: int
    message: str


def _directive_lines(node: ast.AST, lines: list[str]) -> list[int]:
    """1-based lines that may hold this target's directive: above (and its decorators), on, first in body."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    above = []
    row = first - 1
    while row >= 1 and lines[row - 1].lstrip().startswith("#"):
        above.insert(0, row)
        row -= 1
    candidates = above + [node.lineno]
    body = getattr(node, "body", [])
    if body:
        for row in range(node.lineno + 1, body[0].lineno):
            if lines[row - 1].strip().startswith("#"):
                candidates.append(row)
    return candidates


def _has_directive(node: ast.AST, lines: list[str]) -> bool:
    return any(directive_at(lines[row - 1]) for row in _directive_lines(node, lines))


def _read_directive(node: ast.AST, lines: list[str], errors: list[DirectiveError],
                    used: Optional[set[int]] = None) -> Optional[dict]:
    merged: dict = {}
    seen = False
    for row in _directive_lines(node, lines):
        body = directive_at(lines[row - 1])
        if not body:
            continue
        seen = True
        if used is not None:
            used.add(row)
        try:
            call = ast.parse(f"_({body})", mode="eval").body
            assert isinstance(call, ast.Call)
            if call.args:
                raise SyntaxError("use keyword arguments: inputs=(...), init=..., variants=[...], precision=...")
            for kw in call.keywords:
                if kw.arg not in ("inputs", "init", "variants", "precision"):
                    raise SyntaxError(f"unknown key `{kw.arg}` (expected inputs, init, variants, precision)")
                if kw.arg == "precision" and normal(ast.unparse(kw.value)) is None:
                    raise SyntaxError(f"precision={ast.unparse(kw.value)} is not one of {', '.join(PRECISIONS)}")
                merged[kw.arg] = kw.value
            merged.setdefault("_line", row)
        except SyntaxError as exc:
            detail = exc.msg if getattr(exc, "msg", None) else str(exc)
            errors.append(DirectiveError(row, f"cannot read this compile-lens directive ({detail}); write "
                                              "keyword arguments separated by commas: inputs=(...), init=Net(...)"))
    return merged if seen and merged else None


def _stray_directives(tree: ast.Module, lines: list[str], used: set[int], modules: set[str]) -> list[DirectiveError]:
    """A `# compile-lens:` directive that belongs to no target: said at the directive, with why."""
    rows = [i + 1 for i, text in enumerate(lines) if i + 1 not in used and directive_at(text)]
    if not rows:
        return []
    strings: dict[int, list[tuple[int, int]]] = {}  # row -> byte spans of string literals on it
    statements: list[ast.stmt] = []
    wanted = set(rows)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Constant, ast.JoinedStr)) and (isinstance(node, ast.JoinedStr) or isinstance(node.value, str)):
            first, last = node.lineno, node.end_lineno or node.lineno
            for row in wanted.intersection(range(first, last + 1)):
                start = node.col_offset if row == first else 0
                end = (node.end_col_offset or 0) if row == last else 1 << 30
                strings.setdefault(row, []).append((start, end))
        elif isinstance(node, ast.stmt):
            statements.append(node)
    errors = []
    for row in rows:
        text = lines[row - 1]
        starts = [len(text[: m.start()].encode()) for m in DIRECTIVE_START.finditer(text)]
        if all(any(a <= at < b for a, b in strings.get(row, [])) for at in starts):
            continue  # text inside a string, not a comment
        # the statement it is above (or ends the first line of)
        after = [n for n in statements if min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])]) >= row]
        node = min(after, key=lambda n: (n.lineno, -(n.end_lineno or n.lineno)), default=None)
        errors.append(DirectiveError(row, "this compile-lens directive attaches to nothing: " + _why_stray(node, tree, modules)))
    return errors


def _why_stray(node: Optional[ast.stmt], tree: ast.Module, modules: set[str]) -> str:
    fix = "put it on the line above a module-level `class` (an nn.Module) or `def`"
    if node is None:
        return f"no `class` or `def` follows it; {fix}"
    if isinstance(node, ast.ClassDef) and node in tree.body and node.name not in modules:
        return f"`{node.name}` is not an nn.Module subclass (its bases say so); {fix}"
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node in tree.body:
        return f"a blank line or code separates it from `{node.name}`; put it directly above the `{_keyword(node)}` line"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node not in tree.body:
        return (f"`{node.name}` is a method or nested function, which is not analysed on its own; "
                "put the directive above its class (inputs for `forward`)")
    return f"it is at `{ast.unparse(node).splitlines()[0][:60]}`, not a `class` or `def`; {fix}"


def _keyword(node: ast.stmt) -> str:
    return "class" if isinstance(node, ast.ClassDef) else "def"


def _apply_directive(spec: TargetSpec, directive: dict) -> None:
    line = directive.get("_line")
    if "precision" in directive:  # `precision=` alone is a whole directive: the inputs come from elsewhere
        spec.precision, spec.precision_source = normal(ast.unparse(directive["precision"])) or "", "directive"
        if set(directive) <= {"precision", "_line"}:
            return
    init = ast.unparse(directive["init"]) if "init" in directive else None
    variants: list[str] = []
    if "variants" in directive:
        value = directive["variants"]
        items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
        variants = [ast.unparse(item) for item in items]
    if "inputs" in directive:
        spec.inputs = InputRecipe("directive", ast.unparse(directive["inputs"]), init, variants, line)
        spec.problem = None
    elif spec.inputs is not None:
        spec.inputs.init = init or spec.inputs.init
        spec.inputs.variants = variants
    elif init is not None and spec.kind == "module":
        # `init=` alone: the worker builds it so and guesses inputs from the library it wraps
        spec.inputs = InputRecipe("inferred", "", init, variants, after_import=True,
                                  note=f"`{spec.name}` has `init=` but no `inputs=` in its compile-lens directive")
        spec.problem = None
    elif init is not None:
        spec.problem = f"`{spec.name}` has `init=` but no `inputs=` in its compile-lens directive"
