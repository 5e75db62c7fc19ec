"""Which precision a target is measured in: directive > setting (editor or `--precision`) > pyproject >
recorded run > torch's defaults.

The user trains in bf16 autocast or with TF32 on a GPU; timing plain fp32 there gives a figure that
is not theirs. The choice is made here, on the server (no torch), so that it is part of the result's
cache key (`jobs.cache.target_keys`) and travels to the worker on the `TargetSpec`
(`spec.precision`, `spec.precision_source`); `worker/measure/workload/precision.py` applies it.
"""

from __future__ import annotations

from typing import Any, Optional

from ..config import ProjectConfig
from ..protocol import TargetSpec
from ..record.recorded import Recorded

PRECISIONS = ("fp32", "tf32", "bf16-autocast", "fp16-autocast")
AUTO = "auto"  # the setting's default: what the recorded run used, else torch's defaults
SETTING = "benchmark.precision"

# the spellings a directive may use for the same thing (`precision=bf16`, `precision="bf16-autocast"`)
_ALIASES = {"bf16": "bf16-autocast", "bfloat16": "bf16-autocast", "fp16": "fp16-autocast", "float16": "fp16-autocast",
            "half": "fp16-autocast", "float32": "fp32", "ieee": "fp32"}


def normal(text: Any) -> Optional[str]:
    """`text` as one of PRECISIONS (None: it is not one). Spaces and quotes do not matter, so a
    directive's unquoted `precision=bf16-autocast` (Python reads `bf16 - autocast`) is one too."""
    if not isinstance(text, str):
        return None
    word = text.replace(" ", "").strip("\"'").lower()
    word = _ALIASES.get(word, word)
    return word if word in PRECISIONS else None


def choose(spec: TargetSpec, setting: str, pyproject: Any, recorded: Optional[str]) -> None:
    """Fill `spec.precision` / `spec.precision_source` (a directive's stays). `setting`: the editor's
    `compileLens.benchmark.precision` or the CLI's (pyproject's value with `--precision` on top);
    `pyproject`: `[tool.compile-lens] benchmark.precision` as written; `recorded`: what the recorded
    run's first call ran in (`Recorded.precision_for`). Neither: left empty, torch's defaults."""
    if spec.precision_source == "directive" and spec.precision:
        return
    from_project = normal(pyproject)
    chosen = normal(setting) if setting and setting != AUTO else None
    if chosen is not None:
        spec.precision, spec.precision_source = chosen, "pyproject" if chosen == from_project else "setting"
    elif from_project is not None:
        spec.precision, spec.precision_source = from_project, "pyproject"
    elif normal(recorded) is not None:
        spec.precision, spec.precision_source = normal(recorded) or "", "recorded"
    else:
        spec.precision, spec.precision_source = "", ""


def choose_for(spec: TargetSpec, path: str, setting: str, config: ProjectConfig, recorded: Recorded) -> None:
    """`choose` with what the project says of `spec` in `path`: its `[[tool.compile-lens.targets]]`
    entry's `precision`, else `[tool.compile-lens]`'s; and its recorded run's."""
    entry = config.entry_for(path, spec.name)
    pyproject = (entry.precision if entry is not None else None) or config.settings.get(SETTING)
    choose(spec, setting, pyproject, recorded.precision_for(path, spec.name))
