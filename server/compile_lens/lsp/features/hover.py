"""`textDocument/hover`: the target's card (`render.cards.hover_card`) on its name or on a
`torch.compile(...)` call of it: breaks, recompiles, figures, and what was not run. A measured
target's card ends with its Details link: the report (`compileLens.showReport [uri, target]`)
opened at this target, where the facts the card leaves out are (`render.cards.detail_lines`)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

from lsprotocol import types as lsp

from ...protocol import TargetResult
from ...record.recorded import load_recorded
from ...render import cards, compile_lines, line_costs, progress_rows, settings_text
from ...render.levers_text import specialised_here
from ..state import SHOW_REPORT, CompileLensServer
from ..trial_feed import hover_line
from . import kernels
from .levers import hover_lines


def hover(ls: CompileLensServer, uri: str, position: lsp.Position) -> Optional[lsp.Hover]:
    state = ls.docs.get(uri)
    if state is None:
        return None
    line = position.line + 1
    targets = ls.targets_in_buffer(state)
    name = None
    for spec in targets:
        if spec.line == line and spec.column - 1 <= position.character <= spec.end_column - 1 \
                and ls.confirmed(state, spec):
            name = spec.name
    if name is None and state.discovery is not None:  # the call sites found with the targets
        for site in state.discovery.call_sites:
            if site.line <= line <= site.end_line:
                name = site.target
    if name is None:
        return _line_hover(ls, state, line)
    spec = next(t for t in targets if t.name == name)
    current = ls.is_current(state)
    result = (state.traced.get(name) if current else None) or \
        TargetResult(spec.name, spec.kind, spec.line, inputs=spec.inputs)
    bench = state.benchmarks.get(name) if current else None
    relpath, shows_report = os.path.relpath(state.path, ls.root_for(state.path)), SHOW_REPORT in ls.client_commands
    # a measured card's last line opens its details (the report at this target); else the whole report
    report = cards.details_line(shows_report, relpath, uri, name) if bench is not None \
        else cards.report_line(shows_report, relpath)
    trial = hover_line(ls.root_for(state.path), state.path, name, ls.settings)  # `compile-lens trial`'s figures
    if trial is None or "compiled in your run by" not in trial:  # else the trial's calls and settings are said
        recorded = settings_text.recorded_line(load_recorded(ls.root_for(state.path)).compile_for(state.path, name))
        trial = "\n".join(t for t in (trial, recorded) if t) or None
    live = state.live.get(name) if current else None  # a measurement running now: its parts so far
    shown = live or (dataclasses.replace(result, benchmark=bench) if bench is not None else result)
    card = cards.hover_card(result, bench, guessed_inputs=bool(spec.inputs and spec.inputs.source == "inferred"),
                            measuring=name in state.measuring, report=report, trial=trial,
                            stalled=state.stalled.get(name), rows=progress_rows.states(shown, in_flight=live is not None))
    tried = hover_lines(result)  # the levers phase, when it ran: one line per lever (a measured card: its details)
    if tried and bench is None:
        card += "\n\n" + "\n".join(tried)
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=card))


def _line_hover(ls: CompileLensServer, state: Any, line: int) -> Optional[lsp.Hover]:
    """A costly line's kernels, fused lines, eager vs compiled and share (`render.line_costs`), its share
    of the cold compile (`render.compile_lines`), and a line the dynamic lever found specialising a
    dimension (`render.levers_text.specialised_here`)."""
    if not ls.is_current(state):
        return None
    found = line_costs.line_at(state.benchmarks, state.path, line)
    parts = []
    if found is not None:  # its target's levers: what the CUDA-graphs lever measured, where it ran
        owner = state.traced.get(line_costs.measured_by(state.benchmarks, found[1]) or "")
        parts.append(line_costs.hover_markdown(*found, levers=owner.levers if owner is not None else ()))
    if found is not None and kernels.link(ls, state.uri, line):
        parts.append(kernels.link(ls, state.uri, line))
    compiled = compile_lines.at(state.benchmarks, state.path, line)  # its share of the cold compile
    if compiled is not None:  # a loop repeating a block: its target's regional lever, where tried
        owner = next((name for name, b in state.benchmarks.items() if b.compile_time is compiled[1]), "")
        parts.append(compile_lines.hover_markdown(*compiled, compile_lines.tried(state.traced.get(owner))))
    parts += specialised_here(list(state.traced.values()), state.path, line)
    if not parts:
        return None
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n\n".join(parts)))


def register(server: CompileLensServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: CompileLensServer, params: lsp.HoverParams) -> Optional[lsp.Hover]:
        return hover(ls, params.text_document.uri, params.position)
