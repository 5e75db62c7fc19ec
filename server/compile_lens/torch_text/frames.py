"""Is this frame the user's? The one rule every worker job uses to point at a line.

A file is, first of all, one of: synthetic (`<string>`, `<frozen ...>`), torch's own, Compile
Lens's own, the Python environment's (the standard library, site-/dist-packages), or the user's.
Then a job says how far "the user's" reaches:
- `libraries=True` (graph breaks): code Dynamo traced for the user, installed libraries included:
  a break inside transformers is reported in transformers' file (the editor also shows it at the
  workspace line that called into it);
- a `root` (export failures, tracebacks, which modules to re-import): the workspace's own files;
- neither (recompile guards, whose stacks name files anywhere): any existing file outside the
  environment.

Imports neither torch nor anything of the server: the loader uses it before torch is imported.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from functools import cache, lru_cache
from typing import Optional

OUR_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep
_ENVIRONMENT_DIRS = ("site-packages", "dist-packages")
_RESUME = re.compile(r"^torch_dynamo_resume_in_(.+)_at_\d+$")


# realpath is a syscall per path component, and sys.modules holds thousands of torch modules:
# each file is resolved once per process.
@lru_cache(maxsize=65536)
def real(path: str) -> str:
    return os.path.realpath(path)


@cache
def torch_dir() -> str:
    """torch's package folder, with a trailing separator (found without importing torch)."""
    spec = importlib.util.find_spec("torch")
    origin = spec.origin if spec is not None else None
    return os.path.dirname(real(origin)) + os.sep if origin else "\0"  # "\0": no path starts with it


@cache
def _environment_prefixes() -> tuple[str, ...]:
    return tuple({real(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})


def under(path: str, root: str) -> bool:
    resolved, top = real(path), real(root)
    return resolved == top or resolved.startswith(top + os.sep)


def is_environment_file(path: str) -> bool:
    """The standard library or an installed package."""
    resolved = real(path)
    return any(d in resolved.split(os.sep) for d in _ENVIRONMENT_DIRS) or resolved.startswith(_environment_prefixes())


def is_tool_file(path: str) -> bool:
    """Not code anyone wrote for this program: synthetic, torch's, or Compile Lens's own."""
    if not path or path.startswith("<"):
        return True
    return real(path).startswith((torch_dir(), OUR_DIR))


def is_user_file(path: str, root: Optional[str] = None, *, libraries: bool = False) -> bool:
    """The rule (see the module's docstring for which job asks for which reach)."""
    if is_tool_file(path):
        return False
    if libraries:
        return True
    if not os.path.isabs(path) or is_environment_file(path):
        return False
    return under(path, root) if root is not None else os.path.exists(real(path))


def is_recorded_library_file(path: str) -> bool:
    """A path a run recorded (on another machine: not looked up here) that is no one's user code:
    synthetic, the standard library, an installed package, or a file of a `torch/` package folder
    outside site-packages (a Buck/PEX link tree or a source checkout: `…/aot#link-tree/torch/nn/
    modules/linear.py`, which a workspace file named `linear.py` is not)."""
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    if not parts or path.startswith("<"):
        return True
    return (any(p in _ENVIRONMENT_DIRS for p in parts) or "/lib/python" in path.replace("\\", "/")
            or "torch" in parts[:-1])


def frame_name(name: str) -> str:
    """A resumed frame's synthetic name as the user wrote it: torch_dynamo_resume_in_forward_at_14 -> forward."""
    match = _RESUME.match(name)
    return match.group(1) if match else name
