"""The composition root: the server object and the features it has, each registered by its module.

To find a feature, read the list: one module per LSP method or command family under `features/`.
The server's state is `state.CompileLensServer`; documents are read and linted in `documents`; the
workers' traces, sweeps and measurements are scheduled in `scheduler`, whose events the
diagnostics feature publishes on.
"""

from __future__ import annotations

import contextlib

from .features import (
    captured_graph,  # compileLens.capturedGraph: the graphs Dynamo captured, as a read-only document, on its lens
    code_actions,  # quick fixes and rewrites (compile_lens.actions), resolved lazily
    code_lens,  # "Measure" / "measuring…" / the figures, per target
    commands,  # analyzeFile, measure, clearCache, workerPids, stats
    diagnostics,  # lints + trace results, published on the scheduler's events
    hover,  # the target's card
    inlay_hints,  # the speedup after each torch.compile(...) call
    kernels,  # compileLens.kernelsAt: the code behind a measured line, linked from its hover
    levers,  # compileLens.tryLevers: the levers phase of one target, on its "Try levers" lens
    lifecycle,  # initialize, settings, workspace folders, shutdown, the client watch
    report,  # compileLens.reportHtml: the compile report webview
    text_sync,  # didOpen/didChange/didSave/didClose
    torch_trace,  # compileLens.saveTrace: torch's structured trace, for tlparse
    trace_import,  # compileLens.importTrace / clearImportedTrace: a torch trace made anywhere
)
from .state import CompileLensServer

FEATURES = (lifecycle, text_sync, diagnostics, code_lens, inlay_hints, hover, code_actions, commands, report,
            torch_trace, trace_import, levers, captured_graph, kernels)

server = CompileLensServer()
for feature in FEATURES:
    feature.register(server)


def main() -> None:
    with contextlib.suppress(KeyboardInterrupt):
        server.start_io()
