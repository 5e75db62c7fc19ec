"""`check --compare-with PYTHON`: the same analysis with workers of another interpreter (the next
torch, before upgrading), and what changes per target (`torch_diff`).

The other interpreter is probed first (`interpreters.probe`): one that is missing, lacks torch or
psutil, or holds a torch older than the worker reads is refused before anything runs, naming it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Optional, Union

from ..interpreters import Interpreter, InterpreterError, is_own, probe
from ..protocol import FileReport
from ..torch_diff import compare
from .common import say


def add_compare_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compare-with", metavar="PYTHON",
                        help="also analyse with workers of this interpreter (e.g. a venv with the next torch) and "
                             "report per target what changes: graph breaks, recompiles, speedups, cold compile, "
                             "guards per call, export")


def other_interpreter(args: argparse.Namespace) -> Union[None, Interpreter, int]:
    """The interpreter of `--compare-with`, probed; None without the flag; 2 (said) when unusable."""
    python = getattr(args, "compare_with", None)
    if not python:
        return None
    if getattr(args, "format", None) == "sarif":
        say("--compare-with writes text or JSON, not SARIF (a comparison is not a finding of the code)")
        return 2
    if getattr(args, "write_baseline", False):
        say("--compare-with and --write-baseline: write the baseline with one interpreter, without --compare-with")
        return 2
    try:
        found = probe(python)
    except InterpreterError as exc:
        say(f"--compare-with {exc}")
        return 2
    if is_own(found.python):
        say(f"--compare-with {python}: the interpreter this check runs on; the comparison will be empty")
    return found


def torch_diff(base: tuple[list[FileReport], dict], other: tuple[list[FileReport], dict],
               interpreter: Interpreter, root: str) -> dict[str, Any]:
    """The comparison of the two runs, with the interpreters named."""
    base_runtime = {**base[1], "python_path": sys.executable}
    other_runtime = {"torch": interpreter.torch, **other[1], "python_path": interpreter.python}
    return compare(base[0], base_runtime, other[0], other_runtime, root)


def label(interpreter: Optional[Interpreter]) -> str:
    return f"torch {interpreter.torch} ({interpreter.python})" if interpreter else "this interpreter's torch"
