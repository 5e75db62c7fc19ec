"""The language server: documents in, diagnostics out. Never imports torch.

Static lints run on every change, in this process. Traces run in a warm worker on open and save;
their results are published per target as they arrive, and only while they still describe the
code in the editor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import psutil
from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from . import __version__
from .analysis import analyze_file, safe_lint
from .discovery import Discovery, discover
from .pool import WorkerGone, WorkerSlot, default_python, worker_env
from .protocol import Finding, Problem, TargetResult
from .render import findings as fnd
from .render.lsp import to_diagnostic, uri_of
from .settings import Settings

log = logging.getLogger("compile_lens")

STATUS = "compileLens/status"


@dataclass
class DocState:
    """What is known about one open file."""

    uri: str
    path: str
    lints: list[Finding] = field(default_factory=list)
    discovery: Optional[Discovery] = None  # of the current buffer (None: does not parse)
    traced: dict[str, TargetResult] = field(default_factory=dict)
    traced_fingerprint: Optional[str] = None
    traced_discovery: Optional[Discovery] = None
    problem: Optional[Problem] = None  # file-level: import failed / worker died
    open: bool = True
    wanted: Optional[str] = None  # fingerprint of the newest save not yet traced
    runner: Optional[asyncio.Task] = None
    published_version: Optional[int] = None


class CompileLensServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("compile-lens", __version__)
        self.settings = Settings()
        self.trusted = True
        self.root: str = os.getcwd()
        self.docs: dict[str, DocState] = {}
        self.foreign: dict[str, dict[str, list[Finding]]] = {}  # helper uri -> origin uri -> findings
        self.traces: Optional[WorkerSlot] = None
        self.runtime: dict[str, Any] = {}
        self.state = "starting"

    # --- status ---------------------------------------------------------------------------

    def status(self, state: str, detail: str = "") -> None:
        self.state = state
        self.protocol.notify(STATUS, {
            "state": state, "detail": detail,
            "torch": self.runtime.get("torch"),
            "device": self._device_label(),
            "interpreter": default_python(),
        })

    def _device_label(self) -> Optional[str]:
        if not self.runtime:
            return None
        if self.settings.device == "cpu" or not self.runtime.get("cuda"):
            return "cpu"
        return f"cuda ({self.runtime.get('device_name')})"

    # --- workers --------------------------------------------------------------------------

    def start_workers(self) -> None:
        if not self.trusted or self.traces is not None:
            return
        cache = os.environ.get("COMPILE_LENS_CACHE_DIR") or os.path.join(
            os.path.expanduser("~"), ".cache", "compile-lens")
        self.traces = WorkerSlot("trace", default_python(), self.root, worker_env(cache))
        self.traces.on_output = lambda text: log.info("user code output:\n%s", text)
        self.traces.warm_up(self.settings.timeout_s)
        asyncio.get_running_loop().create_task(self._announce_worker())

    async def _announce_worker(self) -> None:
        assert self.traces is not None
        self.status("starting", "starting the torch worker")
        try:
            self.runtime = await self.traces.info(self.settings.timeout_s)
        except WorkerGone as gone:
            state = "no-torch" if gone.problem.kind == "no-torch" else "error"
            log.error("worker did not start: %s", gone.problem.message)
            self.status(state, gone.problem.message)
            return
        log.info("worker ready: torch %s, %s, imported in %ss", self.runtime.get("torch"),
                 self._device_label(), self.runtime.get("import_s"))
        self.status("idle", "ready")

    async def stop_workers(self) -> None:
        if self.traces is not None:
            await self.traces.stop()
            self.traces = None

    def worker_pids(self) -> list[int]:
        return self.traces.pids() if self.traces else []

    # --- documents ------------------------------------------------------------------------

    def doc(self, uri: str) -> DocState:
        state = self.docs.get(uri)
        if state is None:
            state = self.docs[uri] = DocState(uri, to_fs_path(uri) or uri)
        return state

    def relint(self, uri: str) -> None:
        """Lint the buffer and publish at once (no debounce): it is cheap by design."""
        state = self.doc(uri)
        document = self.workspace.get_text_document(uri)
        lints = safe_lint(document.source, state.path)
        if lints is not None:  # None: mid-typing syntax error; keep what was shown
            state.lints = lints
        found = discover(document.source)
        if found is not None:
            state.discovery = found
        self.publish(uri)

    def schedule_trace(self, uri: str) -> None:
        state = self.doc(uri)
        if not self.trusted or state.discovery is None:
            return
        state.wanted = state.discovery.fingerprint
        if state.traced_fingerprint == state.wanted and not state.problem:
            self.publish(uri)  # same code as traced (a comment or whitespace edit): nothing re-runs
            return
        if state.runner is None or state.runner.done():
            state.runner = asyncio.get_running_loop().create_task(self._trace_loop(uri))

    async def _trace_loop(self, uri: str) -> None:
        """Trace the newest saved version; saves that arrive meanwhile collapse into one."""
        state = self.doc(uri)
        while state.open and state.wanted is not None and state.wanted != state.traced_fingerprint:
            discovery = state.discovery
            state.wanted = None
            if discovery is None or self.traces is None:
                return
            try:
                await self._trace_once(state, discovery)
            except Exception:  # noqa: BLE001 - keep the server alive whatever happens
                log.exception("analysis of %s failed", state.path)
                self.status("error", f"analysis of {os.path.basename(state.path)} failed; see the log")

    async def _trace_once(self, state: DocState, discovery: Discovery) -> None:
        assert self.traces is not None
        started = time.perf_counter()
        fresh: dict[str, TargetResult] = {}

        def current() -> bool:
            return state.open and state.discovery is not None and state.discovery.fingerprint == discovery.fingerprint

        def on_target(result: TargetResult) -> None:
            fresh[result.name] = result
            if current():  # stream: show this target's breaks while the next one is traced
                state.traced, state.traced_fingerprint = dict(fresh), discovery.fingerprint
                state.traced_discovery, state.problem = discovery, None
                self._show_trace(state)

        self.status("tracing", os.path.basename(state.path))
        run = await analyze_file(self.traces, state.path, self.root, discovery, self.settings,
                                 on_target=on_target,
                                 on_progress=lambda stage, target: self.status("tracing", stage))
        if not current():
            log.info("dropped results for %s: the file changed during the trace", state.path)
            self.status("idle")
            return
        state.traced, state.traced_fingerprint = run.results, discovery.fingerprint
        state.traced_discovery, state.problem = discovery, run.problem
        self._show_trace(state)
        log.info("traced %s: %d targets in %.2fs", os.path.basename(state.path), len(run.results),
                 time.perf_counter() - started)
        self.status("error" if run.problem else "idle", run.problem.message if run.problem else "")

    def _show_trace(self, state: DocState) -> None:
        self.publish(state.uri)
        self.refresh_foreign(state.uri, self._traced_findings(state)[1])

    def close(self, uri: str) -> None:
        state = self.docs.pop(uri, None)
        if state is not None:
            state.open = False
            if state.runner and not state.runner.done():
                state.runner.cancel()
        self.refresh_foreign(uri, {})  # its targets' breaks leave the helper files too
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    # --- publishing -----------------------------------------------------------------------

    def _is_current(self, state: DocState) -> bool:
        return state.discovery is not None and state.traced_fingerprint == state.discovery.fingerprint

    def _traced_findings(self, state: DocState) -> tuple[list[Finding], dict[str, list[Finding]], list[tuple[int, int]]]:
        """Trace findings for this file, for other files (helpers), and the lines traced cleanly."""
        here: list[Finding] = []
        elsewhere: dict[str, list[Finding]] = {}
        covered: list[tuple[int, int]] = []
        if not self._is_current(state):
            return here, elsewhere, covered  # results of older code are never shown as current
        specs = {t.name: t for t in (state.traced_discovery.targets if state.traced_discovery else [])}
        for result in state.traced.values():
            for f in fnd.target_findings(result, state.path):
                if fnd.same_file(f.path, state.path):
                    here.append(f)
                else:
                    elsewhere.setdefault(uri_of(f.path), []).append(f)
            spec = specs.get(result.name)
            if spec is not None and result.status == "ok":
                covered.append((spec.line, spec.end_line or spec.line))
        if state.problem is not None:
            code = fnd.CODE_WORKER if state.problem.kind in ("crash", "timeout", "memory", "exit") else fnd.CODE_IMPORT
            here.append(fnd.problem_finding(state.problem, state.path, 1, code, "error"))
        return here, elsewhere, covered

    def findings_for(self, state: DocState) -> list[Finding]:
        """Lints merged with trace results, plus breaks other files' targets hit in this one."""
        traced, _, covered = self._traced_findings(state)
        targets = state.discovery.targets if state.discovery else []
        statics = [f for t in targets for f in fnd.static_target_findings(t, state.path)]
        statics += [Finding(state.path, e.line, 1, e.line, 1, "warning", fnd.CODE_DIRECTIVE, e.message)
                    for e in (state.discovery.errors if state.discovery else [])]
        merged = fnd.merge_with_lints(state.lints, traced, covered) + statics
        return merged + [f for found in self.foreign.get(state.uri, {}).values() for f in found]

    def refresh_foreign(self, origin: str, by_uri: dict[str, list[Finding]]) -> None:
        """Breaks found inside helpers in other files are shown on those files too."""
        touched = {uri for uri, origins in self.foreign.items() if origin in origins} | set(by_uri)
        for uri in touched - {origin}:
            origins = self.foreign.setdefault(uri, {})
            if uri in by_uri:
                origins[origin] = by_uri[uri]
            else:
                origins.pop(origin, None)
            if uri in self.docs:
                self.publish(uri)
            else:
                self._publish_unopened(uri)

    def _publish_unopened(self, uri: str) -> None:
        lines = _read_lines(to_fs_path(uri) or uri)
        found = [f for origin in self.foreign.get(uri, {}).values() for f in origin]
        self._send(uri, None, found, lines)

    def publish(self, uri: str) -> None:
        state = self.docs.get(uri)
        if state is None or not state.open:
            return  # closed: nothing is ever published for it again
        document = self.workspace.get_text_document(uri)
        state.published_version = document.version
        self._send(uri, document.version, self.findings_for(state), document.source.splitlines())

    def _send(self, uri: str, version: Optional[int], found: list[Finding], lines: list[str]) -> None:
        diagnostics, seen = [], set()
        for f in found:
            f = fnd.whole_line(f, lines)
            key = (f.line, f.column, f.code, f.message)
            if key in seen or fnd.suppressed(f, lines):
                continue
            seen.add(key)
            diagnostics.append(to_diagnostic(f))
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=uri, version=version, diagnostics=diagnostics))


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except OSError:
        return []


server = CompileLensServer()


def _watch_client(pid: int) -> None:
    """pygls does not watch the client's process: exit (killing workers) when it is gone."""

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if not psutil.pid_exists(pid):
                log.info("client process %s is gone: exiting", pid)
                for worker_pid in server.worker_pids():
                    from .pool import kill_tree

                    kill_tree(worker_pid)
                os._exit(0)

    threading.Thread(target=watch, name="client-watch", daemon=True).start()


@server.feature(lsp.INITIALIZE)
def initialize(ls: CompileLensServer, params: lsp.InitializeParams) -> None:
    options = params.initialization_options or {}
    if not isinstance(options, dict):
        options = {}
    ls.trusted = bool(options.get("trusted", True))
    ls.settings, problems = Settings.from_client(options.get("settings", {}))
    for problem in problems:
        log.warning(problem)
    folders = params.workspace_folders or []
    if folders:
        ls.root = to_fs_path(folders[0].uri) or ls.root
    elif params.root_uri:
        ls.root = to_fs_path(params.root_uri) or ls.root
    if params.process_id:
        _watch_client(params.process_id)
    log.info("compile-lens %s: root %s, trusted=%s, settings %s", __version__, ls.root, ls.trusted,
             ls.settings.as_client())


@server.feature(lsp.INITIALIZED)
def initialized(ls: CompileLensServer, params: lsp.InitializedParams) -> None:
    if ls.trusted:
        ls.start_workers()  # import torch now, before the first file opens
    else:
        ls.status("restricted", "untrusted workspace: static lints only, no code is run")


@server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: CompileLensServer, params: lsp.DidChangeConfigurationParams) -> None:
    raw = params.settings
    if isinstance(raw, dict):
        raw = raw.get("compileLens", raw.get("settings", raw))
    ls.settings, problems = Settings.from_client(raw)
    for problem in problems:
        log.warning(problem)
    log.info("settings changed: %s", ls.settings.as_client())


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: CompileLensServer, params: lsp.DidOpenTextDocumentParams) -> None:
    state = ls.doc(params.text_document.uri)
    state.open = True
    ls.relint(params.text_document.uri)
    ls.schedule_trace(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: CompileLensServer, params: lsp.DidChangeTextDocumentParams) -> None:
    ls.relint(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: CompileLensServer, params: lsp.DidSaveTextDocumentParams) -> None:
    ls.relint(params.text_document.uri)
    ls.schedule_trace(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: CompileLensServer, params: lsp.DidCloseTextDocumentParams) -> None:
    ls.close(params.text_document.uri)


@server.feature(lsp.SHUTDOWN)
async def shutdown(ls: CompileLensServer, params: Any) -> None:
    await ls.stop_workers()


@server.command("compileLens.analyzeFile")
def analyze_file_command(ls: CompileLensServer, uri: str) -> dict:
    if not ls.trusted:
        return {"started": False, "reason": "untrusted workspace"}
    state = ls.doc(uri)
    state.traced_fingerprint = None  # force a fresh trace of the saved file
    ls.schedule_trace(uri)
    return {"started": True}


@server.command("compileLens.workerPids")
def worker_pids_command(ls: CompileLensServer) -> list[int]:
    return ls.worker_pids()


def main() -> None:
    with contextlib.suppress(KeyboardInterrupt):
        server.start_io()
