"""The last trial's figures in the workspace result store: `<root>/.compile-lens/trial.json`.

Stdlib only. `compile-lens trial` writes it beside `recorded.json` (see `record.store`), at the
workspace root of the folder it ran in (`config.find_root`, as `report` and the editor find it); the
report (`compile-lens report`, the editor's report) and the hover card read it, as a
`figures.TrialRecord` (schema `figures.SCHEMA`)::

    {
      "schema": 2,
      "at": "2026-01-01T00:00:00Z",        # when the trial ended
      "command": "python train.py",        # the program it ran
      "targets": ["train.py:Net"],         # the modules the compiled run compiled, named as in recorded.json
      "figures": {...}                     # `figures.TrialFigures`: `summary.summarize` and what `session` adds
    }

A file of another schema (an older compile-lens's) or one that is not a trial is not read: `load`
says so in one line, to show where the trial would be ("rerun the trial").
The bill in `figures.cost` is the one the trial printed; readers compute it again from the
figures with their own settings (`summary.bill`), so a price set later shows without a new trial.
A new trial replaces the file; a trial whose eager run failed does not (the trial stops there):
it is written beside it, to `trial-failed.json`, and the last good trial stays what readers see.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Optional

from ..record.store import FOLDER
from .figures import SCHEMA, TrialFigures, TrialRecord

FILENAME = "trial.json"
FAILED_FILENAME = "trial-failed.json"


def default_path(root: str) -> str:
    return os.path.join(root, FOLDER, FILENAME)


def failed_path(root: str) -> str:
    return os.path.join(root, FOLDER, FAILED_FILENAME)


def write(root: str, figures: TrialFigures, *, command: str = "", base: Optional[str] = None,
          failed: bool = False) -> Optional[str]:
    """Save the trial atomically under the workspace `root`; the path, or None when it cannot be
    written (the trial still ran). `base`: the folder the run's target names are relative to.
    `failed`: the eager run failed; written beside the last good trial, which is kept."""
    path = failed_path(root) if failed else default_path(root)
    targets = figures.compiled.outermost_targets or figures.eager.outermost_targets
    if base is not None and os.path.realpath(base) != os.path.realpath(root):
        targets = [_rebase(t, base, root) for t in targets]  # as the editor names them from `root`
    data = TrialRecord(figures=figures, at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), command=command,
                       targets=targets).to_dict()
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


def load(root: str) -> tuple[Optional[TrialRecord], Optional[str]]:
    """The saved trial of this workspace root, or why there is none to show: (None, None) when no trial
    was saved; (None, a line) when the file is an older compile-lens's or no trial we can read."""
    path = default_path(root)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return None, f"{path} cannot be read ({type(exc).__name__}): rerun the trial"
    schema = data.get("schema") if isinstance(data, dict) else None
    if isinstance(schema, int) and schema < SCHEMA:
        return None, f"{path} was made by an older compile-lens (trial schema {schema}, now {SCHEMA}): rerun the trial"
    if schema != SCHEMA:
        return None, f"{path} is not a trial this compile-lens can read (schema {schema!r}): rerun the trial"
    try:
        return TrialRecord.from_dict(data), None
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        return None, f"{path} is not a trial this compile-lens can read ({type(exc).__name__}): rerun the trial"


def read(root: str) -> Optional[TrialRecord]:
    """The saved trial of this workspace root; None when there is none or it is not one we can read."""
    return load(root)[0]


def for_target(root: str, path: str, name: str) -> Optional[TrialRecord]:
    """The saved trial when it compiled the target `name` defined in `path` (a file under `root`)."""
    trial = read(root)
    if trial is None:
        return None
    key = os.path.relpath(os.path.realpath(path), os.path.realpath(root)).replace(os.sep, "/") + ":" + name
    return trial if key in trial.targets else None
