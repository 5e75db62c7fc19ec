"""What a saved trial gives the editor: the hover card's line and the report's figures. No torch.

The bill's inputs are the `bill.*` settings: the editor's (`compileLens.bill.*`) where set, else
`[tool.compile-lens]` in the pyproject.toml that applies to the file.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Optional

from ..config import load_project_config
from ..cost import BILL_FIELDS, Bill, CostInputs
from ..render.cards import trial_line
from ..settings import Settings
from ..trial import store, summary
from ..trial.figures import TrialRecord

_BILL_FIELDS = {f.cost for f in BILL_FIELDS}


def bill_settings(path: str, root: str, editor: Settings) -> Settings:
    """The project's settings with the editor's bill values laid over them where the user set one."""
    merged, _ = Settings.from_client(load_project_config(path, root).settings)
    default = Settings()
    for f in fields(Settings):
        if f.name in _BILL_FIELDS and getattr(editor, f.name) != getattr(default, f.name):
            setattr(merged, f.name, getattr(editor, f.name))
    return merged


def bill_of(trial: TrialRecord, settings: Settings) -> Bill:
    return summary.bill(trial.figures, CostInputs.from_settings(settings))


def hover_line(root: str, path: str, name: str, editor: Settings) -> Optional[str]:
    """The hover card's `measured in your run: …` line for target `name` of `path`; None without a trial of it."""
    trial = store.for_target(root, path, name)
    if trial is None:
        return None
    return trial_line(trial, bill_of(trial, bill_settings(path, root, editor)))
