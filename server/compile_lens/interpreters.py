"""Another Python interpreter for the workers (`check --compare-with PYTHON`): is it usable, and
which torch does it hold?

No torch here: the interpreter is asked for its packages' metadata (`importlib.metadata`, which
does not import them), so a probe costs a Python start (≈ 50 ms), not a torch import. An
interpreter that cannot run a worker is refused with a message naming it and what to do.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Optional

# The oldest torch the worker reads (docs/architecture.md "How it works"; docs/torch-apis.md): each API newer
# than this is feature-detected, older ones are assumed.
MIN_TORCH = (2, 4)
MIN_PYTHON = (3, 9)  # pyproject's requires-python: the worker's code runs there as it is

_PROBE = """
import json, platform
from importlib.metadata import version, PackageNotFoundError
def v(name):
    try:
        return version(name)
    except PackageNotFoundError:
        return None
print(json.dumps({"python": platform.python_version(), "torch": v("torch"), "psutil": v("psutil")}))
"""


class InterpreterError(Exception):
    """The interpreter cannot run a worker; the message names it and says what to do."""


@dataclass(frozen=True)
class Interpreter:
    python: str  # as given, absolute (a venv's python is a link: not resolved, or it leaves its venv)
    python_version: str
    torch: str

    @property
    def torch_label(self) -> str:
        """"2.14.1" for "2.14.1+cu128": the build suffix says little in a verdict."""
        return self.torch.split("+")[0]


def release(version: str) -> tuple[int, ...]:
    """(2, 14, 1) for "2.14.1+cu128" or "2.15.0.dev20260101"."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


def probe(python: str, timeout_s: float = 30.0) -> Interpreter:
    """What `python` holds; raises InterpreterError when it is missing, does not run, or lacks
    torch (or one too old) or psutil."""
    path = os.path.abspath(os.path.expanduser(python))
    if not os.path.exists(path):
        raise InterpreterError(f"{python}: no such interpreter (give the path of a venv's bin/python)")
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise InterpreterError(f"{python}: not an executable Python interpreter")
    try:
        done = subprocess.run([path, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InterpreterError(f"{python}: cannot run it ({exc})") from exc
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise InterpreterError(f"{python}: not a Python 3 interpreter this tool can use ({tail[0]})") from None
    where = f"`{path} -m pip install"
    if release(found.get("python") or "0") < MIN_PYTHON:
        raise InterpreterError(f"{python} is Python {found.get('python')}; the worker needs Python "
                               f"{'.'.join(map(str, MIN_PYTHON))} or newer")
    if not found.get("torch"):
        raise InterpreterError(f"{python} (Python {found.get('python')}) has no torch: install it with {where} torch`")
    if release(found["torch"]) < MIN_TORCH:
        oldest = ".".join(map(str, MIN_TORCH))
        raise InterpreterError(f"{python} has torch {found['torch']}, older than the {oldest} the analysis needs: "
                               f"upgrade it with {where} 'torch>={oldest}'`")
    if not found.get("psutil"):
        raise InterpreterError(f"{python} has no psutil (the worker watches its own processes with it): "
                               f"install it with {where} psutil`")
    return Interpreter(path, found["python"], found["torch"])


def is_own(python: Optional[str]) -> bool:
    """Is `python` the interpreter this process runs on (None: yes)?"""
    return python is None or os.path.abspath(python) == os.path.abspath(sys.executable)
