"""A real Redis server for tests: `redis-server` (installed by `make setup`) on 127.0.0.1 with a
free port, nothing persisted, stopped after."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from typing import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ping(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
        s.sendall(b"PING\r\n")
        return s.recv(16).startswith(b"+PONG")
    return False


@contextlib.contextmanager
def redis_server(tmp_dir: str) -> Iterator[str]:
    """Start `redis-server`; yield its `redis://127.0.0.1:PORT`."""
    exe = shutil.which("redis-server")
    if exe is None:  # not a skip: the project installs it (Makefile `setup`)
        raise RuntimeError("redis-server is not installed: run `make setup` (apt-get install redis-server)")
    port = free_port()
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", tmp_dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not _ping(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {port} (exit code {proc.poll()})")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def key_count(url: str) -> int:
    """Keys the server holds (DBSIZE), over the wire: what a compile wrote to it."""
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(b"DBSIZE\r\n")
        reply = s.recv(64)
    return int(reply.strip().lstrip(b":"))
