"""The settings behind a run's compiles in words (`compile-lens trial`'s CLI lines and the hover card's
line): each `torch.compile` call with its arguments and where it was made, the settings off torch's
defaults with the compiles they held for, and the ones that explain a finding."""

from __future__ import annotations

from typing import Any, Optional

from ..torch_text import compile_settings
from ..trial.figures import CompileSettings

ARGS = ("mode", "options", "dynamic", "fullgraph", "backend")


def call_text(call: dict[str, Any]) -> str:
    """`torch.compile(backend='aot_eager') at train.py:19`; the trial's own: `the trial's torch.compile() of train.py:Net`."""
    args = ", ".join(f"{k}={call[k]!r}" for k in ARGS if k in call)
    where = call.get("where") or "?"
    if call.get("what") == "trial":
        return f"the trial's torch.compile({args}) of {where}"
    name = "model.compile" if call.get("what") == "Module.compile" else "torch.compile"
    return f"{name}({args}) at {where}"


def trial_lines(settings: Optional[CompileSettings]) -> list[str]:
    """The CLI's lines, indented under the trial's summary."""
    if settings is None:
        return []
    lines = [f"  compiled by {call_text(c)}" for c in settings.calls]
    for seen in settings.settings:
        if seen.get("values"):
            ids = seen.get("compile_ids") or []
            shown = ", ".join(ids[:6]) + (" …" if len(ids) > 6 else "")
            lines.append(f"  settings off torch's defaults (compile{'s' if len(ids) != 1 else ''} {shown}): "
                         f"{compile_settings.short(seen['values'], 8)}")
    if not any(seen.get("values") for seen in settings.settings):
        lines.append("  settings: all at torch's defaults")
    lines += [f"  {words}" for words in settings.explains]
    return lines


def recorded_line(found: Optional[dict[str, Any]]) -> Optional[str]:
    """The hover line of `compile-lens record`'s call of a target (`Recorded.compile_for`)."""
    if not found:
        return None
    values = found.get("settings") if isinstance(found.get("settings"), dict) else {}
    line = hover_line(CompileSettings(calls=[{k: v for k, v in found.items() if k != "settings"}],
                                      settings=[{"compile_ids": [], "values": values}],
                                      explains=compile_settings.explanations(values)))
    return line.replace("compiled in your run by", "compiled in your recorded run by", 1) if line else None


def hover_line(settings: Optional[CompileSettings]) -> Optional[str]:
    """`- compiled in your run by torch.compile(backend='aot_eager') at train.py:19; settings off torch's defaults: …`."""
    if settings is None or not (settings.calls or settings.settings):
        return None
    merged: dict[str, str] = {}
    for seen in settings.settings:
        merged.update(seen.get("values") or {})
    parts = []
    if settings.calls:
        shown = "; ".join(f"`{call_text(c)}`" for c in settings.calls[:2])
        parts.append(f"compiled in your run by {shown}" + (f" (+{len(settings.calls) - 2})" if len(settings.calls) > 2 else ""))
    parts.append(f"settings off torch's defaults: `{compile_settings.short(merged)}`" if merged
                 else "settings at torch's defaults")
    text = "- " + "; ".join(parts)
    for words in settings.explains[:2]:
        text += f"\n  - {words}"
    return text
