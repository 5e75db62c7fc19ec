"""A bare LSP client over stdio for benchmarks: JSON in, JSON out, nothing converted.

pytest-lsp's client turns every published diagnostic into lsprotocol objects, which costs more
than the server's work on a 1,500-diagnostic file; an editor (VS Code's JSON parser) does not.
This client reads the raw messages, so what it times is the server and the pipe.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional


class WireClient:
    def __init__(self, process: asyncio.subprocess.Process):
        self.process = process
        self.next_id = 0
        self.answers: dict[int, asyncio.Future] = {}
        self.published: list[tuple[float, dict]] = []  # (arrival time, params without diagnostics)
        self.notifications: list[tuple[float, str, Any]] = []  # other notifications: (arrival, method, params)
        self.log_lines: list[tuple[float, str]] = []  # the server's stderr, when `start(log=True)`
        self.arrived = asyncio.Event()  # set on each message: waiting never polls (the CPU is the server's)
        self.reader = asyncio.get_running_loop().create_task(self._read())
        self.log_reader = (asyncio.get_running_loop().create_task(self._read_log())
                           if process.stderr is not None else None)

    @classmethod
    async def start(cls, root: Path, trusted: bool = False, settings: Optional[dict] = None,
                    env: Optional[dict] = None, log: bool = False) -> WireClient:
        """`log`: keep the server's stderr lines (`log_lines`); otherwise it is dropped."""
        env = {**os.environ, "PYTHONSAFEPATH": "1",
               "COMPILE_LENS_CACHE_DIR": tempfile.mkdtemp(prefix="compile-lens-wire-cache-"), **(env or {})}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "compile_lens", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE if log else asyncio.subprocess.DEVNULL, env=env, limit=2**26)
        client = cls(process)
        await client.request("initialize", {
            "processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {},
            "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
            "initializationOptions": {"settings": settings or {}, "trusted": trusted}})
        client.notify("initialized", {})
        return client

    def _send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        future = self.answers[self.next_id] = asyncio.get_running_loop().create_future()
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return await future

    async def _read(self) -> None:
        stream = self.process.stdout
        loop = asyncio.get_running_loop()
        while True:
            length = None
            while True:
                line = await stream.readline()
                if not line:
                    return
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
                elif line in (b"\r\n", b"\n"):
                    break
            message = json.loads(await stream.readexactly(length or 0))
            if "id" in message and "method" not in message:
                future = self.answers.pop(message["id"], None)
                if future is not None and not future.done():
                    future.set_result(message.get("result"))
            elif message.get("method") == "textDocument/publishDiagnostics":
                params = message["params"]
                codes = [str(d.get("code", "")) for d in params["diagnostics"]]
                self.published.append((loop.time(), {"uri": params["uri"], "version": params.get("version"),
                                                     "count": len(params["diagnostics"]),
                                                     "gb": any(c.startswith("GB") for c in codes)}))
                self.arrived.set()
            elif "id" in message:  # a request from the server (configuration, refresh): answer null
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif "method" in message:
                self.notifications.append((loop.time(), message["method"], message.get("params")))
                self.arrived.set()

    async def _read_log(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            line = await self.process.stderr.readline()
            if not line:
                return
            self.log_lines.append((loop.time(), line.decode("utf-8", "replace").rstrip("\n")))
            self.arrived.set()

    async def wait_for(self, found) -> Any:
        """Wait (on arrivals, never polling) until `found()` returns something other than None."""
        while True:
            self.arrived.clear()
            answer = found()
            if answer is not None:
                return answer
            await self.arrived.wait()

    async def wait_published(self, uri: str, version: int, since: int = 0) -> tuple[float, int]:
        """The first publish of this version or a newer one (a server may lint queued edits once)."""
        while True:
            for at, params in self.published[since:]:
                if params["uri"] == uri and (params["version"] or 0) >= version:
                    return at, params["count"]
            since = len(self.published)
            self.arrived.clear()
            await self.arrived.wait()

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.request("shutdown", None), 30)
            self.notify("exit", None)
            await asyncio.wait_for(self.process.wait(), 30)
        except (asyncio.TimeoutError, ConnectionError):
            self.process.kill()
        self.reader.cancel()
        if self.log_reader is not None:
            self.log_reader.cancel()


def hover_params(uri: str, line: int, character: int) -> dict:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def change_params(uri: str, version: int, line: int, column: int, text: str, end: Optional[tuple] = None) -> dict:
    end_line, end_column = end or (line, column)
    return {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{
        "range": {"start": {"line": line, "character": column}, "end": {"line": end_line, "character": end_column}},
        "text": text}]}
