"""The last trial's figures in the workspace result store: `<root>/.compile-lens/trial.json`.

Stdlib only. `compile-lens trial` writes it beside `recorded.json` (see `record.store`), at the
workspace root of the folder it ran in (`config.find_root`, as `report` and the editor find it); the
report (`compile-lens report`, the editor's report) and the hover card read it. Format (schema 1)::

    {
      "schema": 1,
      "at": "2026-01-01T00:00:00Z",        # when the trial ended
      "command": "python train.py",        # the program it ran
      "targets": ["train.py:Net"],         # the modules the compiled run compiled, named as in recorded.json
      "figures": {...}                     # `summary.summarize` and what `cli` adds to it
    }

The bill in `figures["cost"]` is the one the trial printed; readers compute it again from the
figures with their own settings (`summary.bill`), so a price set later shows without a new trial.
A new trial replaces the file; a trial whose eager run failed does not (the trial stops there):
it is written beside it, to `trial-failed.json`, and the last good trial stays what readers see.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any, Optional

from ..record.store import FOLDER

SCHEMA = 1
FILENAME = "trial.json"
FAILED_FILENAME = "trial-failed.json"


def default_path(root: str) -> str:
    return os.path.join(root, FOLDER, FILENAME)


def failed_path(root: str) -> str:
    return os.path.join(root, FOLDER, FAILED_FILENAME)


def write(root: str, figures: dict, *, command: str = "", base: Optional[str] = None,
          failed: bool = False) -> Optional[str]:
    """Save the trial atomically under the workspace `root`; the path, or None when it cannot be
    written (the trial still ran). `base`: the folder the run's target names are relative to.
    `failed`: the eager run failed; written beside the last good trial, which is kept."""
    path = failed_path(root) if failed else default_path(root)
    compiled, eager = figures.get("compiled") or {}, figures.get("eager") or {}
    targets = compiled.get("outermost_targets") or eager.get("outermost_targets") or []
    if base is not None and os.path.realpath(base) != os.path.realpath(root):
        targets = [_rebase(t, base, root) for t in targets]  # as the editor names them from `root`
    data = {"schema": SCHEMA, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "command": command,
            "targets": targets, "figures": figures}
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".trial-", suffix=".json", dir=os.path.dirname(path))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except OSError:
        return None
    return path


def _rebase(target: str, base: str, root: str) -> str:
    rel, _, name = target.rpartition(":")
    moved = os.path.relpath(os.path.join(os.path.realpath(base), rel), os.path.realpath(root))
    return moved.replace(os.sep, "/") + ":" + name


def read(root: str) -> Optional[dict[str, Any]]:
    """The saved trial of this workspace root; None when there is none or it is not one we can read."""
    try:
        with open(default_path(root), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("figures"), dict):
        return None
    return data


def for_target(root: str, path: str, name: str) -> Optional[dict[str, Any]]:
    """The saved trial when it compiled the target `name` defined in `path` (a file under `root`)."""
    data = read(root)
    if data is None:
        return None
    key = os.path.relpath(os.path.realpath(path), os.path.realpath(root)).replace(os.sep, "/") + ":" + name
    return data if key in (data.get("targets") or []) else None
