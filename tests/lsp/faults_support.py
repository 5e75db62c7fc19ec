"""What the fault-table tests share: the shared server (`env`), its log, and the waits on what
the server and the system show."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from compile_lens.worker.template import NAME as TEMPLATE_NAME
from lsp_support import (
    locate,
    open_file,
    wait_analyzed,
    wait_status,
)
from paths import FIXTURES

FAULTS = FIXTURES / "faults"

# Generous limits by default (a loaded 2-core CI machine is slow); the rows that test a limit
# lower it for their file only, through workspace/didChangeConfiguration.
# a spare worker whatever the machine's cores (`worker.spare`): the faults replace the current worker by it
SETTINGS: dict[str, Any] = {"benchmark.onSave": False, "worker.timeoutSeconds": 60, "worker.memoryLimitMB": 4096,
                            "worker.spare": True}


@dataclass
class Env:
    root: Path
    client: LanguageClient
    cache: Path
    log: list[str] = field(default_factory=list)  # the server's stderr, as it arrives
    killed: bool = False  # a row killed the server: nothing to shut down

    def log_text(self) -> str:
        return "".join(self.log)


def capture_log(client: LanguageClient, into: list[str]) -> None:
    """Keep the server's stderr (its log) for the test, still forwarding it to ours."""
    server = client._server
    if client._stderr_forwarder:
        client._stderr_forwarder.cancel()

    async def read() -> None:
        assert server and server.stderr
        while chunk := await server.stderr.read(65536):
            text = chunk.decode("utf-8", "replace")
            into.append(text)
            sys.stderr.write(text)

    client._stderr_forwarder = asyncio.create_task(read())


# --- helpers -----------------------------------------------------------------------------------

async def command(client: LanguageClient, name: str, *args: Any) -> Any:
    return await client.workspace_execute_command_async(lsp.ExecuteCommandParams(name, list(args)))


async def worker_pids(client: LanguageClient, at_least: int = 1, timeout: float = 120.0) -> list[int]:
    """The trace lane's pids once that many are up: [current, spare], the current first once it is."""
    deadline = time.monotonic() + timeout
    while True:
        pids = await command(client, "compileLens.workerPids")
        if len(pids) >= at_least or time.monotonic() > deadline:
            assert len(pids) >= at_least, f"workers did not come up: {pids}"
            return list(pids)
        await asyncio.sleep(0.2)


def configure(client: LanguageClient, **overrides: Any) -> None:
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
        settings={"compileLens": {**SETTINGS, **overrides}}))


def gb(diagnostics) -> list[lsp.Diagnostic]:
    return [d for d in diagnostics if str(d.code).startswith("GB")]


def coded(diagnostics, code: str) -> list[lsp.Diagnostic]:
    return [d for d in diagnostics if d.code == code]


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """The pids still alive after `timeout` seconds (empty: all exited)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(gone(p) for p in pids):
            return []
        await asyncio.sleep(0.2)
    return [p for p in pids if not gone(p)]


def good_file(root: Path, tag: str) -> Path:
    """A fresh healthy file: the TAG makes its code new, so its trace cannot come from the cache."""
    path = root / f"good_{tag.replace('-', '_')}.py"
    path.write_text((FAULTS / "good.py").read_text().replace('TAG = "good"', f'TAG = "{tag}"'))
    return path


async def traced(client: LanguageClient, path: Path, timeout: float = 90.0) -> tuple[str, list[lsp.Diagnostic]]:
    """Open `path` and wait until its trace is done: (uri, the diagnostics published for it)."""
    mark = len(client.analyzed)
    uri = open_file(client, path)
    await wait_analyzed(client, uri, "traced", version=1, since=mark, timeout=timeout)
    return uri, list(client.diagnostics[uri])


async def still_works(env: Env, tag: str) -> None:
    """The server answers and traces a new good file: GB0124 at its `.item()` line."""
    path = good_file(env.root, tag)
    uri, found = await traced(env.client, path)
    line, _ = locate(path, "y.sum().item()")
    assert [(d.code, d.range.start.line) for d in gb(found)] == [("GB0124", line)]
    env.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))


async def worker_processes(server_pid: int, count: int = 2, timeout: float = 120.0) -> list[int]:
    """The server's worker processes, as soon as `count` exist (forked once the worker template has
    imported torch: seconds, more on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while True:
        found = []
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(server_pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    # the template's forks share its command line; it alone has its own name
                    if (any(w.startswith("compile_lens.worker") for w in child.cmdline())
                            and child.name() != TEMPLATE_NAME):
                        found.append(child.pid)
        if len(found) >= count:
            return found
        assert time.monotonic() < deadline, f"workers did not start: {found}"
        await asyncio.sleep(0.05)


def reap(pids: list[int]) -> None:
    """Never leave a test's processes to the next test, whatever it found."""
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()


async def trace_started(client: LanguageClient, since: int) -> None:
    """Until a trace begun after status number `since` is importing the user's file."""
    await wait_status(client, lambda s: s.state == "tracing" and s.detail == "importing", since=since)


def line_of(path: Path, needle: str) -> int:
    return locate(path, needle)[0]
