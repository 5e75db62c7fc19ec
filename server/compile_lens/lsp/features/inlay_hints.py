"""`textDocument/inlayHint`: a measured target's speedup after each `torch.compile(...)` call of it,
each costly line's eager → compiled time at its end (`render.line_costs`; setting `lineCosts.inlayHints`),
the few costliest lines' share of the cold compile beside it (`render.compile_lines`, the same setting),
where the CUDA-graphs lever found torch skipping a graph, "CUDA graphs skipped: <why>" on the line
torch traced it to (`render.levers_text.cudagraph_skips_in`), and an imported profile's GPU time at the
end of each line it put time on (the CL401 findings of `compileLens.importTrace`), as line costs show."""

from __future__ import annotations

from lsprotocol import types as lsp

from ...codes import GPU_TIME
from ...render import compile_lines, lens_titles, line_costs, progress_rows
from ...render.levers_text import cudagraph_skips_in
from ...trace_import.profiles import hint_label
from ..state import CompileLensServer


def inlay_hints(ls: CompileLensServer, uri: str, rng: lsp.Range) -> list[lsp.InlayHint]:
    return _measured_hints(ls, uri, rng) + _imported_hints(ls, uri, rng)


def _imported_hints(ls: CompileLensServer, uri: str, rng: lsp.Range) -> list[lsp.InlayHint]:
    """`GPU 12.3 ms (18%)` where an imported profile put kernel time (`trace_import.profiles`)."""
    found = [f for f in ls.imported.get(uri, []) if f.code == GPU_TIME and rng.start.line <= f.line - 1 <= rng.end.line]
    if not found or not ls.settings.line_hints:
        return []
    lines = ls.workspace.get_text_document(uri).lines
    return [lsp.InlayHint(position=lsp.Position(f.line - 1, len(lines[f.line - 1].rstrip("\r\n"))),
                          label=" " + hint_label(f), kind=lsp.InlayHintKind.Type, padding_left=True, tooltip=f.message)
            for f in found if f.line - 1 < len(lines)]


def _measured_hints(ls: CompileLensServer, uri: str, rng: lsp.Range) -> list[lsp.InlayHint]:
    state = ls.docs.get(uri)
    if state is None or not ls.is_current(state) or not state.benchmarks:
        return []
    hints = []
    for site in state.discovery.call_sites if state.discovery else []:  # found with the targets
        bench = state.benchmarks.get(site.target)
        if bench is None or not (rng.start.line <= site.end_line - 1 <= rng.end.line):
            continue
        live = state.live.get(site.target)  # measuring still: what is to come, not a payback yet
        hints.append(lsp.InlayHint(
            position=lsp.Position(site.end_line - 1, site.end_column - 1),
            label=" " + lens_titles.hint_label(bench), kind=lsp.InlayHintKind.Type, padding_left=True,
            tooltip=lens_titles.lens_title(bench, tuple(progress_rows.pending(live, in_flight=True)) if live else ())))
    if ls.settings.line_hints:
        hints.extend(_line_hints(ls, uri, state.path, state.benchmarks, rng))
    lines = ls.workspace.get_text_document(uri).lines
    for line, label, target in cudagraph_skips_in(list(state.traced.values()), state.path):
        row = line - 1
        if rng.start.line <= row <= rng.end.line and row < len(lines):
            hints.append(lsp.InlayHint(position=lsp.Position(row, len(lines[row].rstrip("\r\n"))), label=" " + label,
                                       kind=lsp.InlayHintKind.Type, padding_left=True,
                                       tooltip=f"measured by the levers phase of `{target}` (mode=\"reduce-overhead\")"))
    return hints


def _line_hints(ls: CompileLensServer, uri: str, path: str, benchmarks: dict, rng: lsp.Range) -> list[lsp.InlayHint]:
    """`0.81 ms → 0.20 ms · fused ×3` at the end of each costly line (above `line_costs.HINT_SHARE`), and
    `compile 6.1 s · traced 48×` on the few costliest lines to compile (`compile_lines.hints_in_file`)."""
    lines = ls.workspace.get_text_document(uri).lines
    hints = []
    for cost, timing in line_costs.costly_in_file(benchmarks, path):
        row = cost.line - 1
        if not (rng.start.line <= row <= rng.end.line) or row >= len(lines):
            continue
        hints.append(lsp.InlayHint(
            position=lsp.Position(row, len(lines[row].rstrip("\r\n"))),
            label=" " + line_costs.hint_label(cost, timing), kind=lsp.InlayHintKind.Type, padding_left=True,
            tooltip=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=line_costs.hover_markdown(cost, timing))))
    traced = ls.docs[uri].traced  # its targets' results: a repeated loop's regional lever, where tried
    for c, ct, target in compile_lines.hints_in_file(benchmarks, path):  # the few costliest lines to compile
        row = c.line - 1
        if not (rng.start.line <= row <= rng.end.line) or row >= len(lines):
            continue
        levers = compile_lines.tried(traced.get(target))
        hints.append(lsp.InlayHint(
            position=lsp.Position(row, len(lines[row].rstrip("\r\n"))),
            label=" " + compile_lines.hint_label(c, ct, levers), kind=lsp.InlayHintKind.Type, padding_left=True,
            tooltip=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=compile_lines.hover_markdown(c, ct, levers))))
    return hints


def register(server: CompileLensServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)
    def inlay_hint(ls: CompileLensServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
        return inlay_hints(ls, params.text_document.uri, params.range)
