"""What belongs to the workspace: a source file's workspace-relative path, or None for a file outside
it (libraries, this package). Stdlib only; runs inside the user's program."""

from __future__ import annotations

import os
import sys
from typing import Optional

from .hook_state import STATE


def relative(path: Optional[str]) -> Optional[str]:
    """The workspace-relative path of a source file; None for files outside it (libraries too)."""
    if not path:
        return None
    known = STATE.workspace_files
    if path in known:
        return known[path]
    real = os.path.realpath(path)
    rel: Optional[str] = None
    root = STATE.root
    if real.startswith(root + os.sep) and real.endswith(".py"):
        parts = real.split(os.sep)
        prefixes = {os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
        here = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep
        if not ({"site-packages", "dist-packages"} & set(parts)) and not any(real.startswith(p) for p in prefixes) \
                and not real.startswith(here):
            rel = os.path.relpath(real, root).replace(os.sep, "/")
    known[path] = rel
    return rel
