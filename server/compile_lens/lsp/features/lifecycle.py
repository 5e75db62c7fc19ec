"""`initialize`, `initialized`, `shutdown`, settings and workspace folder changes; the watch on
the client's process (pygls has none: a vanished editor must not leave workers behind)."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import psutil
from lsprotocol import types as lsp
from pygls.uris import to_fs_path

from ... import __version__
from ...processes import kill_tree
from ...settings import Settings
from .. import documents, scheduler
from ..state import CompileLensServer

log = logging.getLogger("compile_lens")


def _watch_client(ls: CompileLensServer, pid: int) -> None:
    """Exit (killing workers) when the client process is gone."""

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if not psutil.pid_exists(pid):
                log.info("client process %s is gone: exiting", pid)
                for worker_pid in ls.worker_pids():
                    kill_tree(worker_pid)
                os._exit(0)

    threading.Thread(target=watch, name="client-watch", daemon=True).start()


def register(server: CompileLensServer) -> None:
    @server.feature(lsp.INITIALIZE)
    def initialize(ls: CompileLensServer, params: lsp.InitializeParams) -> None:
        options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
        ls.trusted = bool(options.get("trusted", True))
        ls.settings, problems = Settings.from_client(options.get("settings", {}))
        for problem in problems:
            log.warning(problem)
        commands = options.get("clientCommands")
        ls.client_commands = {c for c in commands if isinstance(c, str)} if isinstance(commands, list) else set()
        folders = [p for p in (to_fs_path(f.uri) for f in params.workspace_folders or []) if p]
        if not folders and params.root_uri and to_fs_path(params.root_uri):
            folders = [to_fs_path(params.root_uri)]
        ls.folders = [os.path.abspath(f) for f in folders]
        if ls.folders:
            ls.root = ls.folders[0]
        if params.process_id:
            _watch_client(ls, params.process_id)
        log.info("compile-lens %s: root %s, trusted=%s, torch %s, settings %s", __version__, ls.root, ls.trusted,
                 ls.torch_version, ls.settings.as_client())

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
        if not isinstance(raw, dict) or not raw:
            return  # eglot and nvim-lspconfig send their (empty) configuration on start: keep the init options
        # keys it does not name keep their value (VS Code sends them all; other clients may send a few)
        ls.settings, problems = Settings.from_client({**ls.settings.as_client(), **raw})
        for problem in problems:
            log.warning(problem)
        log.info("settings changed: %s", ls.settings.as_client())
        for state in ls.docs.values():  # figures are per device, mode and precision: show the ones that apply now
            if state.saved is not None:
                documents.rechoose_precision(ls, state.saved)
                state.benchmarks = scheduler.cached_benchmarks(ls, state.saved, state.path)
                ls.emit("measured", state.uri)
        ls.refresh_views()

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_folders(ls: CompileLensServer, params: lsp.DidChangeWorkspaceFoldersParams) -> None:
        removed = {os.path.abspath(to_fs_path(f.uri) or "") for f in params.event.removed}
        added = [os.path.abspath(p) for p in (to_fs_path(f.uri) for f in params.event.added) if p]
        ls.folders = [f for f in ls.folders if f not in removed] + [f for f in added if f not in ls.folders]
        ls.sources = None  # roots, configs and recorded runs are found again

    @server.feature(lsp.SHUTDOWN)
    async def shutdown(ls: CompileLensServer, params: Any) -> None:
        await ls.stop_workers()
