"""The one wording of the precision a measurement ran in (`Benchmark.precision`), for every surface:
the hover, the CLI's text, the report. Pure: no torch."""

from __future__ import annotations

from typing import Optional

from ..protocol import Precision

FROM = {"setting": "the setting", "directive": "the directive", "pyproject": "pyproject.toml",
        "recorded": "the recorded run", "default": "torch's defaults"}


def precision_words(p: Optional[Precision], detail: bool = False) -> str:
    """`bf16-autocast from the directive`, `fp32, torch's defaults`, `tf32 from the setting: no effect
    on the CPU`, `fp32: fp16-autocast from the directive is not on this device`; with `detail`, what
    it meant on the device after a colon. "" for a result measured before precision was named."""
    if p is None:
        return ""
    where = FROM.get(p.source, p.source)
    said = f"{p.value}, {where}" if p.source == "default" else f"{p.value} from {where}"
    if p.asked:
        return f"{p.value}: {p.asked} from {where} is not on this device"
    if "no effect" in p.detail:
        return f"{said}: {p.detail.partition(': ')[2].partition(' (')[0]}"
    extra = p.detail.removeprefix("torch's defaults: ")
    if detail and extra not in ("", "fp32", "torch's defaults"):
        said += f": {extra}"
    return said
