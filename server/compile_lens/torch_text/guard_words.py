"""A failed guard said in the user's terms: which of their values or sizes the compiled code baked in.

torch states a recompile as its guard (`___stack0 == 6.29358434677124` in
`torch_dynamo_resume_in_forward_at_63`). That names neither the function as written nor the value:
a `___stackN` guard in a resumed frame is a value the frame received from the line it broke at
(`x.abs().max().item()`), read here from the user's source. Stdlib only, imports nothing of the
package (plain rules: the worker, the trial and the renderers use it); a resumed frame's name is
read as `torch_text.frames.frame_name` reads it.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from typing import Optional

_RESUMED = re.compile(r"^torch_dynamo_resume_in_(.+)_at_(\d+)$")
_STACK = re.compile(r"^___stack\d+ == (.+)$")
_VALUE = re.compile(r"^(?:[LG]\['([^']+)'\]|(\w+)) == (.+)$")
_SIZE = re.compile(r"^tensor '(.+?)' size mismatch at index (\d+)\. expected (\d+), actual (\d+)")
_SCALAR_READS = ("item", "tolist", "numpy")  # a tensor read into Python: its value is what gets baked in


@lru_cache(maxsize=64)
def _tree(path: str) -> Optional[tuple[str, ast.AST]]:
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        return source, ast.parse(source)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None


def value_read_at(path: str, line: int) -> Optional[str]:
    """The expression at `line` whose value a graph break hands on: a `.item()`-like read, else a
    `int(...)`/`float(...)`/`bool(...)` of something, else None."""
    parsed = _tree(path)
    if parsed is None:
        return None
    source, tree = parsed
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n, "lineno", 0) == line]
    reads = [n for n in calls if isinstance(n.func, ast.Attribute) and n.func.attr in _SCALAR_READS]
    reads = reads or [n for n in calls if isinstance(n.func, ast.Name) and n.func.id in ("int", "float", "bool")]
    if not reads:
        return None
    return ast.get_source_segment(source, min(reads, key=lambda n: n.col_offset))


def meaning(reason: str, function: str, path: Optional[str]) -> Optional[str]:
    """What the guard `reason` of a recompile in `function` (torch's code name) defined in `path`
    means, or None when it is no value or size the user's code chose."""
    reason = (reason or "").strip()
    resumed = _RESUMED.match(function or "")
    stack = _STACK.match(reason)
    if stack and resumed:
        line = int(resumed.group(2))
        expr = value_read_at(path, line) if path else None
        what = f"`{expr}` at line {line}" if expr else f"the value computed at line {line}"
        return (f"the value of {what} was baked in (it was {stack.group(1)}); a new value recompiles "
                "(read it as a tensor, or with torch._dynamo.config.capture_scalar_outputs = True, to keep it in the graph)")
    size = _SIZE.match(reason)
    if size:
        name, dim, was, now = size.groups()
        name = re.sub(r"\b[LG]\['([^']+)'\]", r"\1", name)
        return (f"dimension {dim} of `{name}` was compiled for size {was}; size {now} recompiles "
                "(torch makes it dynamic after a second size unless told otherwise)")
    value = _VALUE.match(reason)
    if value:
        name = value.group(1) or value.group(2)
        if not name.startswith("___"):
            return f"the value of `{name}` was baked in (it was {value.group(3)}); a new value recompiles"
    return None


def say(recompile: dict) -> dict:
    """A trial recompile (`summary.recompiles`) with its function named as written and `meaning` added."""
    raw = recompile.get("function") or ""
    where = recompile.get("where") or ""
    path = where.rpartition(":")[0] or None
    resumed = _RESUMED.match(raw)
    out = {**recompile, "function": resumed.group(1) if resumed else raw}  # as torch_text.frames.frame_name names it
    if resumed:
        out["resumed_at_line"] = int(resumed.group(2))
    out["meaning"] = meaning(recompile.get("reason") or "", raw, path)
    return out
