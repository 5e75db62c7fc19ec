"""A graph break torch reports inside a library (torch's own `torch/nn/parallel/distributed.py`, an
installed package, the standard library, a helper outside the workspace) shown at the program's own
line that called into it, with torch's location kept beside it.

The program's line is the innermost frame of the program's files (`frames.is_user_file` with the
workspace root, the rule `check` uses for the workspace's own files) on the stack: first on the
stack Dynamo traced (a `forward` in the workspace calling a library helper), else on the live
Python stack while torch logs the break (a compiled `DDP(model)`: Dynamo traced torch's frames
only, and the program's line is the `model(x)` that entered them). The library function shown is
the first frame after that line that is not torch's call plumbing (`torch._dynamo`, `Module.__call__`).
Runs inside the user's program; imports no torch.
"""

from __future__ import annotations

import ast
import os
import sys
from functools import lru_cache
from typing import Optional

from ..protocol import Frame
from ..torch_text.frames import (
    frame_name,
    is_environment_file,
    is_tool_file,
    is_user_file,
    real,
    torch_dir,
)

_PLUMBING = ("_dynamo" + os.sep, os.path.join("nn", "modules", "module.py"))  # under torch's folder


def program_caller(root: str) -> Optional[Frame]:
    """The innermost frame of the program's files on the live Python stack (None: none is)."""
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if not is_tool_file(path) and is_user_file(path, root):
            return Frame(real(path), frame.f_lineno, frame_name(frame.f_code.co_name))
        frame = frame.f_back
    return None


def place(path: str, line: int, stack: list[Frame], root: str, live: Optional[Frame]) -> Optional[dict]:
    """Where a break torch reported at `path:line` (`stack`: Dynamo's traced frames, outermost first)
    is shown: None when that is the program's own line; else `{where, inside}`, `where` the program's
    line and `inside` the library function it called (`function`, `where`, `shown`) and torch's own
    location (`reported`, `reported_shown`). `live`: `program_caller` taken when torch logged it."""
    if is_user_file(path, root):
        return None
    ours = [i for i, f in enumerate(stack) if is_user_file(f.path, root)]
    caller = stack[ours[-1]] if ours else live
    if caller is None:
        return None
    below = stack[ours[-1] + 1:] if ours else stack
    called = next((f for f in below if not _plumbing(f.path)), None) or Frame(path, line, "?")
    return {"where": f"{caller.path}:{caller.line}",
            "inside": {"function": _function_at(called.path, called.line) or called.name,
                       "where": f"{called.path}:{called.line}", "shown": f"{shown(called.path, root)}:{called.line}",
                       "reported": f"{path}:{line}", "reported_shown": f"{shown(path, root)}:{line}"}}


def _plumbing(path: str) -> bool:
    resolved = real(path)
    return resolved.startswith(tuple(torch_dir() + p for p in _PLUMBING))


def shown(path: str, root: str) -> str:
    """A library file as its import names it (`torch/nn/parallel/distributed.py`, `contextlib.py`),
    a file outside the workspace relative to it."""
    parts = real(path).split(os.sep)
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in ("site-packages", "dist-packages"):
            return "/".join(parts[i + 1:])
    if real(path).startswith(torch_dir()):
        return "torch/" + os.path.relpath(real(path), torch_dir()).replace(os.sep, "/")
    if is_environment_file(path):
        return os.path.basename(path)  # the standard library
    return os.path.relpath(real(path), real(root)).replace(os.sep, "/")


@lru_cache(maxsize=256)
def _functions(path: str) -> tuple[tuple[int, int, str], ...]:
    """Each function of the file: (first line, last line, qualified name)."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return ()
    found: list[tuple[int, int, str]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    found.append((child.lineno, child.end_lineno or child.lineno, name))
                walk(child, name + ("." if isinstance(child, ast.ClassDef) else ".<locals>."))

    walk(tree, "")
    return tuple(found)


def _function_at(path: str, line: int) -> Optional[str]:
    """The qualified name of the innermost function holding `line` (`DistributedDataParallel.forward`)."""
    holding = [f for f in _functions(path) if f[0] <= line <= f[1]]
    return max(holding, key=lambda f: f[0])[2] if holding else None
