"""Drive the real server (`python -m compile_lens`) over stdio with pytest-lsp's client."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

Diagnostics = Sequence[lsp.Diagnostic]


async def start_server(root: Path, *, trusted: Optional[bool] = True, settings: Optional[dict] = None,
                       env: Optional[dict] = None, cache_dir: Optional[Path] = None,
                       capabilities: Optional[lsp.ClientCapabilities] = None,
                       wrapper: tuple[str, ...] = ()) -> LanguageClient:
    """A server on `root`. Its result cache is private to this start unless `cache_dir` is given.
    `wrapper`: a command the server runs under (`taskset -c 0`: pinned to one core)."""
    cache = cache_dir or Path(tempfile.mkdtemp(prefix="compile-lens-test-cache-"))
    config = ClientServerConfig(
        server_command=[*wrapper, sys.executable, "-m", "compile_lens"],
        server_env={**os.environ, "PYTHONSAFEPATH": "1", "COMPILE_LENS_CACHE_DIR": str(cache), **(env or {})},
    )
    client = await config.start()
    client.statuses = []  # type: ignore[attr-defined]
    client.analyzed = []  # type: ignore[attr-defined]  # every compileLens/analyzed, in order
    client.analyzed_after = []  # type: ignore[attr-defined]  # publishes received before each of them
    client.analyzed_event = asyncio.Event()  # type: ignore[attr-defined]  # set on each one
    client.status_event = asyncio.Event()  # type: ignore[attr-defined]  # set on each compileLens/status

    @client.feature("compileLens/status")
    def on_status(params: Any) -> None:
        client.statuses.append(params)  # type: ignore[attr-defined]
        client.status_event.set()  # type: ignore[attr-defined]

    @client.feature("compileLens/analyzed")
    def on_analyzed(params: Any) -> None:
        client.analyzed.append(params)  # type: ignore[attr-defined]
        client.analyzed_after.append(len(client.published))  # type: ignore[attr-defined]
        client.analyzed_event.set()  # type: ignore[attr-defined]

    keep_published(client)

    options: dict[str, Any] = {"settings": settings or {}}
    if trusted is not None:
        options["trusted"] = trusted
    await client.initialize_session(lsp.InitializeParams(
        capabilities=capabilities or lsp.ClientCapabilities(),
        process_id=os.getpid(),
        root_uri=root.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
        initialization_options=options,
    ))
    return client


def keep_published(client: LanguageClient) -> asyncio.Event:
    """Keep every publishDiagnostics in `client.published` (pytest-lsp keeps only the latest per uri)
    and set `client.published_event` on each; idempotent, so clients started elsewhere can use it."""
    if hasattr(client, "published_event"):
        return client.published_event  # type: ignore[attr-defined]
    client.published = []  # type: ignore[attr-defined]
    client.published_event = asyncio.Event()  # type: ignore[attr-defined]
    features = client.protocol.fm._features
    keep_latest = features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
        keep_latest(params)
        client.published.append(params)  # type: ignore[attr-defined]
        client.published_event.set()  # type: ignore[attr-defined]

    features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = on_diagnostics
    return client.published_event  # type: ignore[attr-defined]


async def stop_server(client: LanguageClient) -> None:
    try:
        await asyncio.wait_for(client.shutdown_session(), 30)
    except Exception:  # noqa: BLE001 - a test that killed the server still cleans up
        if client._server and client._server.returncode is None:
            client._server.kill()


def open_file(client: LanguageClient, path: Path, version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id="python", version=version, text=path.read_text())))
    return uri


def change_file(client: LanguageClient, path: Path, text: str, version: int, *, save: bool) -> None:
    """Replace the buffer (and, when saving, the file on disk) like an editor does."""
    uri = path.as_uri()
    if save:
        path.write_text(text)
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
        [lsp.TextDocumentContentChangeWholeDocument(text=text)]))
    if save:
        client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri=uri)))


async def wait_for(client: LanguageClient, uri: str, predicate: Callable[[Diagnostics], bool],
                   timeout: float = 90.0) -> Diagnostics:
    """The first published diagnostics for `uri` that satisfy `predicate`."""
    def found() -> list[Diagnostics]:
        current = client.diagnostics.get(uri)
        return [current] if current is not None and predicate(current) else []

    def seen() -> str:
        last = client.diagnostics.get(uri) or []
        return f"diagnostics on {uri}; last: {[(d.code, d.range.start.line, d.message[:80]) for d in last]}"

    await _until(keep_published(client), found, timeout, seen)
    return found()[0]


def analyzed(client: LanguageClient, uri: str, phase: str, since: int = 0) -> list[Any]:
    """The `compileLens/analyzed` notifications for `uri` and `phase`, from number `since` on."""
    return [a for a in client.analyzed[since:] if a.uri == uri and a.phase == phase]  # type: ignore[attr-defined]


async def wait_analyzed(client: LanguageClient, uri: str, phase: str, version: Optional[int] = None, *,
                        since: int = 0, timeout: float = 90.0) -> Any:
    """The first `compileLens/analyzed` for `uri`, `phase` ("traced", "swept", "measured") and
    `version` (any, when None), from notification number `since` on (`len(client.analyzed)` taken
    before the edit that starts the work). Its diagnostics were published before it."""
    def found() -> list[Any]:
        return [a for a in analyzed(client, uri, phase, since) if version is None or a.version == version]

    def seen() -> str:
        done = [(a.uri.rsplit("/", 1)[-1], a.phase, a.version, a.ok) for a in client.analyzed[since:]]
        return f"{phase} of {uri} (version {version}); seen: {done}"

    await _until(client.analyzed_event, found, timeout, seen)  # type: ignore[attr-defined]
    return found()[0]


async def wait_status(client: LanguageClient, predicate: Callable[[Any], bool], *, since: int = 0,
                      timeout: float = 60.0) -> Any:
    """The first `compileLens/status` from number `since` on that satisfies `predicate`."""
    def found() -> list[Any]:
        return [s for s in client.statuses[since:] if predicate(s)]  # type: ignore[attr-defined]

    def seen() -> str:
        return f"a status; seen: {[(s.state, s.detail) for s in client.statuses[since:]][-10:]}"  # type: ignore[attr-defined]

    await _until(client.status_event, found, timeout, seen)  # type: ignore[attr-defined]
    return found()[0]


async def _until(event: asyncio.Event, found: Callable[[], list], timeout: float, what: Callable[[], str]) -> None:
    """Until `found()` is not empty, woken by `event` (set by the client on each notification)."""
    deadline = time.monotonic() + timeout
    while not found():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"timed out waiting for {what()}")
        event.clear()  # no await since found(): nothing arrived in between
        try:
            await asyncio.wait_for(event.wait(), remaining)
        except asyncio.TimeoutError:
            pass


def codes(diagnostics: Diagnostics) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


def has_code(prefix: str) -> Callable[[Diagnostics], bool]:
    return lambda ds: any(str(d.code).startswith(prefix) for d in ds)


def locate(path: Path, needle: str, occurrence: int = 1) -> tuple[int, int]:
    """(0-based line, 0-based column) of the n-th occurrence of `needle` in the file."""
    seen = 0
    for number, line in enumerate(path.read_text().splitlines()):
        col = line.find(needle)
        while col >= 0:
            seen += 1
            if seen == occurrence:
                return number, col
            col = line.find(needle, col + 1)
    raise AssertionError(f"{needle!r} not in {path}")
