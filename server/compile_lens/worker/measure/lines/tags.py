"""Which source line a torch call belongs to (`line_costs`' eager side): the innermost frame inside
the workspace; when the code never passes through the workspace (a `transformers` model built from a
config), the innermost frame outside torch, the standard library and this package (the library's own
line). A call Compile Lens makes itself (a train step's loss, `.backward()`, its SGD step) has none.

`LineTags` opens a profiler range `compile_lens.line:<path>:<line>` around each top-level torch call
(a `TorchFunctionMode`): the profiler's own Python stacks name each function's `def` line, not the
line that called the op.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Any, Optional

import torch

TAG = "compile_lens.line:"  # "compile_lens.line:/path/m.py:17"


# --- which line ------------------------------------------------------------------------------

class Places:
    """Sorts files into workspace / library / skipped (torch, stdlib, this package), memoised."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root) + os.sep
        package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # compile_lens
        paths = sysconfig.get_paths()
        self.ours = tuple(os.path.realpath(p) + os.sep for p in (os.path.dirname(torch.__file__), package))
        self.package = os.path.realpath(package) + os.sep
        # a venv's platstdlib holds its site-packages: those are libraries, not the standard library
        self.installed = tuple(os.path.realpath(paths[k]) + os.sep for k in ("purelib", "platlib"))
        self.stdlib = tuple(os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib"))
        self._kind: dict[str, str] = {}

    def kind(self, path: str) -> str:
        k = self._kind.get(path)
        if k is None:
            real = os.path.realpath(path)  # a relative co_filename is relative to the working directory
            if real.startswith(self.package):
                k = "ours"  # Compile Lens's own code: the train step's loss, backward and SGD step
            elif path.startswith("<") or real.startswith(self.ours) or (
                    real.startswith(self.stdlib) and not real.startswith(self.installed)):
                k = "skip"
            elif real.startswith(self.root) and "site-packages" not in real and "dist-packages" not in real:
                k = "workspace"
            else:
                k = "library"
            self._kind[path] = k
        return k

    def pick(self, frames: list[tuple[str, int]]) -> Optional[tuple[str, int]]:
        """The innermost workspace frame, else the innermost library frame (frames: outermost first)."""
        library = None
        for path, line in reversed(frames):
            k = self.kind(path)
            if k == "workspace":
                return path, line
            if k == "library" and library is None:
                library = (path, line)
        return library


class LineTags(torch.overrides.TorchFunctionMode):
    """Opens a profiler range named after the calling user line around each top-level torch call
    (inside the call the mode is off, so the ops a call runs stay in its range)."""

    def __init__(self, places: Places) -> None:
        super().__init__()
        self.places = places

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        frames = []
        f = sys._getframe(1)
        while f is not None:
            kind = self.places.kind(f.f_code.co_filename)
            if kind == "ours":
                break  # called by Compile Lens itself (the loss, `.backward()`, the SGD step): no line
            frames.append((f.f_code.co_filename, f.f_lineno))
            if kind == "workspace":
                break
            f = f.f_back
        where = self.places.pick(frames[::-1])
        if where is None:
            return func(*args, **kwargs)
        with torch.profiler.record_function(f"{TAG}{where[0]}:{where[1]}"):
            return func(*args, **kwargs)
