"""One strict byte-level check of the server's stdout: pygls's own reader skips junk, VS Code's does not."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

from paths import FIXTURES


def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read_messages(stream, until, timeout: float) -> list[dict]:
    """Parse strictly: every byte must belong to a `Content-Length` framed JSON message."""
    messages: list[dict] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        header = b""
        while not header.endswith(b"\r\n\r\n"):
            byte = stream.read(1)
            assert byte, f"stream ended inside a header: {header!r}"
            header += byte
        fields = dict(line.split(": ", 1) for line in header.decode("ascii").strip().split("\r\n"))
        assert set(fields) <= {"Content-Length", "Content-Type"}, header
        body = stream.read(int(fields["Content-Length"]))
        message = json.loads(body)
        messages.append(message)
        if until(message):
            return messages
    raise AssertionError("timed out")


def test_stdout_carries_only_framed_messages_while_user_code_writes_to_fd1(tmp_path):
    root = tmp_path / "ws"
    shutil.copytree(FIXTURES / "spine", root)
    noisy = root / "noisy.py"
    proc = subprocess.Popen([sys.executable, "-m", "compile_lens"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=root,
                            env={**os.environ, "PYTHONSAFEPATH": "1", "COMPILE_LENS_CACHE_DIR": str(tmp_path / "cache")})
    try:
        assert proc.stdin and proc.stdout
        proc.stdin.write(_frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {}}}))
        proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": noisy.as_uri(), "languageId": "python", "version": 1, "text": noisy.read_text()}}}))
        proc.stdin.flush()

        def traced(message: dict) -> bool:
            return message.get("method") == "textDocument/publishDiagnostics" and any(
                str(d.get("code", "")).startswith("GB") for d in message["params"]["diagnostics"])

        messages = _read_messages(proc.stdout, traced, timeout=90)
        assert messages[0]["id"] == 1 and "capabilities" in messages[0]["result"]
        proc.stdin.write(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        proc.stdin.flush()
        _read_messages(proc.stdout, lambda m: m.get("id") == 2, timeout=30)
        proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
        proc.stdin.flush()
        proc.wait(timeout=30)
        log = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
        assert "import-time print" in log and "forward print" in log  # user output reaches the log
    finally:
        if proc.poll() is None:
            proc.kill()
