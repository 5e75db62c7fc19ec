"""`textDocument/publishDiagnostics`: lints merged with trace results, published on the events the
documents and the scheduler emit. Breaks that a target hits inside a helper in another workspace
file are published on that file too. Results of older code than the buffer's are never shown.
"""

from __future__ import annotations

import json
from typing import Optional

from lsprotocol import types as lsp
from pygls.uris import to_fs_path

from ... import timeline as timelines
from ...engine.findings import traced_part
from ...jobs.cache import WORKER_FAILURES
from ...positions import remap_finding
from ...protocol import Finding
from ...render import assembly
from ...render import findings as fnd
from ...render.lsp import to_diagnostic, uri_of
from ...trace_import.report import SOURCE as IMPORTED_SOURCE
from ..published import encode_once, params_json
from ..state import CompileLensServer, DocState

# trace findings for the file, for other files (helpers) by uri, and the lines traced cleanly
Traced = tuple[list[Finding], dict[str, list[Finding]], list[tuple[int, int]]]


def traced_findings(ls: CompileLensServer, state: DocState) -> Traced:
    """Trace findings for this file, for other files (helpers) by uri, and the lines traced cleanly."""
    if not ls.is_current(state) or state.saved is None:
        return [], {}, []  # results of older code are never shown as current
    here, elsewhere, covered = traced_part(state.traced.values(), state.saved.discovery.targets, state.path,
                                           ls.root_for(state.path), state.benchmarks)
    if state.problem is not None:
        code = fnd.CODE_WORKER if state.problem.kind in WORKER_FAILURES else fnd.CODE_IMPORT
        here.append(fnd.problem_finding(state.problem, state.path, 1, code, "error"))
    by_uri: dict[str, list[Finding]] = {}
    for path, found in elsewhere.items():
        by_uri.setdefault(uri_of(path), []).extend(found)
    return here, by_uri, covered


def findings_for(ls: CompileLensServer, state: DocState, found: Optional[Traced] = None) -> list[Finding]:
    """Lints merged with trace results (`found`, when the caller has them), plus breaks other
    files' targets hit in this one."""
    traced, _, covered = found if found is not None else traced_findings(ls, state)
    mapping = ls.buffer_map(state) if traced or covered else None
    if mapping is not None:
        traced = [remap_finding(f, mapping, state.path) for f in traced]
        covered = [(mapping.line(a), mapping.line(b)) for a, b in covered]
    statics = assembly.static_findings(state.path, ls.targets_in_buffer(state),
                                       state.discovery.errors if state.discovery else [], runs=ls.trusted)
    merged = assembly.file_findings(state.lints, statics, traced, covered)
    return merged + [f for found in ls.foreign.get(state.uri, {}).values() for f in found]


def publish(ls: CompileLensServer, uri: str, found: Optional[Traced] = None,
            timeline: Optional[timelines.Timeline] = None) -> None:
    state = ls.docs.get(uri)
    if state is None or not state.open:
        return  # closed: nothing is ever published for it again
    document = ls.workspace.get_text_document(uri)
    merged = findings_for(ls, state, found)
    timelines.mark(timeline, "merged")
    _send(ls, uri, document.version, merged, document.source.splitlines(), timeline)


def show_trace(ls: CompileLensServer, uri: str) -> None:
    """New trace results: this file, the helper files its targets broke in, the lenses and hints."""
    state = ls.docs.get(uri)
    if state is not None:
        # the first trace publish since the open or save that carries a break (a file's targets stream
        # in one by one: those traced before the first that breaks are part of the way to its squiggle)
        timeline = state.timeline if any(r.graph_breaks for r in state.traced.values()) else None
        if timeline is not None:
            state.timeline = None
        timelines.mark(timeline, "accepted")
        found = traced_findings(ls, state)  # built once: for this file and for the helper files
        publish(ls, uri, found, timeline)
        if timeline is not None:
            timelines.report(timeline, uri)
        refresh_foreign(ls, uri, found[1])
    ls.refresh_views()


def refresh_foreign(ls: CompileLensServer, origin: str, by_uri: dict[str, list[Finding]]) -> None:
    """Breaks found inside helpers in other files are shown on those files too."""
    touched = {uri for uri, origins in ls.foreign.items() if origin in origins} | set(by_uri)
    for uri in touched - {origin}:
        origins = ls.foreign.setdefault(uri, {})
        if uri in by_uri:
            origins[origin] = by_uri[uri]
        else:
            origins.pop(origin, None)
        if uri in ls.docs:
            publish(ls, uri)
        else:
            found = [f for o in origins.values() for f in o]
            _send(ls, uri, None, found, _read_lines(to_fs_path(uri) or uri))


def closed(ls: CompileLensServer, uri: str) -> None:
    refresh_foreign(ls, uri, {})  # its targets' breaks leave the helper files too
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


def _send(ls: CompileLensServer, uri: str, version: Optional[int], found: list[Finding], lines: list[str],
          timeline: Optional[timelines.Timeline] = None) -> None:
    """Publish: each diagnostic's JSON is kept per open file while its finding is unchanged
    (`published`), so a keystroke encodes only the findings it changed."""
    state = ls.docs.get(uri)
    converter = ls.wire.converter
    if state is not None and state.open:
        encoded = state.encoded.encode(found, lines, converter)
    else:
        encoded = encode_once(found, lines, converter)
    encoded += [json.dumps(converter.unstructure(d)) for d in _imported(ls, uri, lines)]
    timelines.mark(timeline, "encoded")
    ls.wire.notify_json(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, params_json(uri, version, encoded))
    timelines.mark(timeline, "published")


def _imported(ls: CompileLensServer, uri: str, lines: list[str]) -> list[lsp.Diagnostic]:
    """An imported trace's findings (`compile-lens import`), beside the live ones, never replacing them."""
    found = []
    for f in ls.imported.get(uri, []):
        f = fnd.whole_line(f, lines)
        if not fnd.suppressed(f, lines):
            diagnostic = to_diagnostic(f)
            diagnostic.source = IMPORTED_SOURCE
            found.append(diagnostic)
    return found


def republish(ls: CompileLensServer, uri: str) -> None:
    """Publish a file's diagnostics again, open or not (an imported trace came or went)."""
    state = ls.docs.get(uri)
    if state is not None and state.open:
        publish(ls, uri)
    else:
        found = [f for o in ls.foreign.get(uri, {}).values() for f in o]
        _send(ls, uri, None, found, _read_lines(to_fs_path(uri) or uri))


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except OSError:
        return []


def register(server: CompileLensServer) -> None:
    """Publish on what the documents and the scheduler say happened."""
    for event in ("changed", "swept", "measured"):
        server.on(event, lambda uri: publish(server, uri))
    server.on("traced", lambda uri: show_trace(server, uri))
    server.on("closed", lambda uri: closed(server, uri))
