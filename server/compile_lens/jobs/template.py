"""The worker template as seen from the server: one process per interpreter and environment that has
imported torch, asked to fork each new worker (`worker/template.py` says why and how).

No torch here. `WorkerTemplate.spawn` gives a `ForkedProcess`, which reads as asyncio's subprocess
`Process` does for what `lanes.Worker` uses of it (pid, pipes, returncode, wait). Anything that goes
wrong with the template (not Linux, torch missing, the template gone) makes `spawn` raise
`TemplateUnavailable`, and the worker is then started directly, as before the template existed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import sys
from collections import deque
from typing import Any, Optional

import psutil

from ..processes import kill_tree

log = logging.getLogger(__name__)

MAX_MESSAGE = 1 << 20
STREAM_LIMIT = 64 * 1024 * 1024  # as the directly started worker's pipes
EXIT_UNKNOWN = 255  # a worker whose template ended before it: its status went with the template


class TemplateUnavailable(Exception):
    pass


def supported() -> bool:
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds")


class ForkedProcess:
    """A worker the template forked: its pipes (ours to read and write), its pid, and its exit code as
    the template reports it."""

    def __init__(self, pid: int, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader,
                 stderr: asyncio.StreamReader):
        self.pid, self.stdin, self.stdout, self.stderr = pid, stdin, stdout, stderr
        self.returncode: Optional[int] = None
        self._exited = asyncio.get_running_loop().create_future()

    def exited(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self._exited.set_result(code)
            self.stdin.close()

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)


async def _reader(pipe: Any) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=STREAM_LIMIT)
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    return reader


async def _writer(pipe: Any) -> asyncio.StreamWriter:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    return asyncio.StreamWriter(transport, protocol, None, loop)


def _kill_forked(answer: asyncio.Future) -> None:
    if not answer.cancelled() and answer.exception() is None and "pid" in answer.result():
        kill_tree(answer.result()["pid"])


class WorkerTemplate:
    """One template process for `python` and `env`, started on the first `spawn`, stopped by `stop`."""

    def __init__(self, python: str, env: dict[str, str]):
        self.python, self.env = python, env
        self.import_s: Optional[float] = None
        self._proc: Optional[asyncio.subprocess.Process] = None
        self._sock: Optional[socket.socket] = None
        self._failed: Optional[str] = None
        self._started: Optional[asyncio.Task] = None
        self._reading: Optional[asyncio.Task] = None
        self._logging: Optional[asyncio.Task] = None
        self._answers: deque[asyncio.Future] = deque()
        self._forked: dict[int, ForkedProcess] = {}
        self._lock = asyncio.Lock()

    async def _start(self, timeout_s: float) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                self.python, "-m", "compile_lens.worker.template", str(theirs.fileno()),
                # its own output (an import's warnings) goes to the log, never to a CLI's terminal
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
                pass_fds=(theirs.fileno(),), cwd="/", start_new_session=True,
                env={**self.env, "COMPILE_LENS_SERVER_PID": str(os.getpid())})
        finally:
            theirs.close()
        ours.setblocking(False)
        self._sock = ours
        self._logging = asyncio.create_task(self._log_output())
        first = await self._recv(timeout_s)
        if first is None or "ready" not in first:
            raise TemplateUnavailable((first or {}).get("error") or "the worker template ended as it started")
        self.import_s = first["ready"]
        self._reading = asyncio.create_task(self._read())
        log.info("worker template %s ready: torch imported in %ss", self._proc.pid, self.import_s)

    async def _log_output(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        async for line in self._proc.stderr:
            log.info("worker template: %s", line.decode("utf-8", "replace").rstrip())

    async def _recv(self, timeout_s: Optional[float] = None) -> Optional[dict]:
        assert self._sock is not None
        loop = asyncio.get_running_loop()
        try:
            data = await asyncio.wait_for(loop.sock_recv(self._sock, MAX_MESSAGE), timeout_s)
        except (OSError, asyncio.TimeoutError):
            return None
        return json.loads(data) if data else None

    async def _read(self) -> None:
        """The template's answers (in the order asked) and its children's exits, until it ends."""
        try:
            while (message := await self._recv()) is not None:
                if "exit" in message:
                    child = self._forked.pop(message["exit"], None)
                    if child is not None:
                        child.exited(message["code"])
                elif self._answers:
                    answer = self._answers.popleft()
                    if not answer.done():
                        answer.set_result(message)
        finally:
            self._failed = self._failed or "the worker template ended"
            for answer in self._answers:
                if not answer.done():
                    answer.set_exception(TemplateUnavailable(self._failed))
            self._answers.clear()
            for pid, child in list(self._forked.items()):  # still running, or gone unreported
                asyncio.get_running_loop().create_task(self._watch_orphan(pid, child))

    @staticmethod
    async def _watch_orphan(pid: int, child: ForkedProcess) -> None:
        while True:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.Error:
                break
            await asyncio.sleep(0.5)
        child.exited(EXIT_UNKNOWN)

    async def spawn(self, cwd: str, env: dict[str, str], timeout_s: float) -> ForkedProcess:
        """A new worker, forked: in `cwd`, with `env`. Raises TemplateUnavailable."""
        async with self._lock:
            if self._failed:
                raise TemplateUnavailable(self._failed)
            if self._started is None:
                self._started = asyncio.create_task(self._start(timeout_s))
            try:
                await asyncio.shield(self._started)
            except Exception as exc:
                self._failed = str(exc) or type(exc).__name__
                log.info("worker template unavailable (%s): workers start on their own", self._failed)
                await self.stop()
                raise TemplateUnavailable(self._failed) from exc
            return await self._fork(cwd, env)

    async def _fork(self, cwd: str, env: dict[str, str]) -> ForkedProcess:
        assert self._sock is not None
        pipes = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr: (read, write)
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
        ours = [os.fdopen(pipes[0][1], "wb", 0), os.fdopen(pipes[1][0], "rb", 0), os.fdopen(pipes[2][0], "rb", 0)]
        made: list[Any] = []  # the streams made of `ours`, in order
        try:  # our ends first: once the request is sent, the only wait is for its answer
            made.append(await _writer(ours[0]))
            made.append(await _reader(ours[1]))
            made.append(await _reader(ours[2]))
            socket.send_fds(self._sock, [json.dumps({"cwd": cwd, "env": env}).encode()], theirs)
        except BaseException as exc:
            for fd in theirs:  # a reader already made ends at its pipe's EOF
                os.close(fd)
            for pipe in ours[len(made):]:
                pipe.close()
            if made:
                made[0].close()
            if isinstance(exc, OSError):
                raise TemplateUnavailable(f"the worker template did not take the request: {exc}") from exc
            raise
        stdin, stdout, stderr = made
        for fd in theirs:
            os.close(fd)
        answer = asyncio.get_running_loop().create_future()
        self._answers.append(answer)
        try:
            message = await asyncio.shield(answer)
        except BaseException:  # cancelled, or the template gone: a worker forked for it is not kept
            answer.add_done_callback(_kill_forked)
            stdin.close()
            raise
        if "pid" not in message:
            stdin.close()
            raise TemplateUnavailable(message.get("error") or "the worker template did not fork")
        child = ForkedProcess(message["pid"], stdin, stdout, stderr)
        self._forked[child.pid] = child
        return child

    @property
    def pid(self) -> Optional[int]:
        return self._proc.pid if self._proc else None

    async def stop(self) -> None:
        """End the template; its workers are the lanes' to stop (a worker that outlives it is still
        watched: its exit is seen, its status is not)."""
        if self._started is not None and not self._started.done():
            self._started.cancel()
            with contextlib.suppress(BaseException):
                await self._started
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)  # the template reads its end, and ends
        if self._proc is not None:
            try:
                await asyncio.wait_for(self._proc.wait(), 2)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self._proc.kill()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._proc.wait(), 5)
        for task in (self._reading, self._logging):
            if task is not None:
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(task, 5)
        if self._sock is not None:
            self._sock.close()


class Templates:
    """The worker templates of one server or CLI run: one per interpreter and environment, started on
    their first worker. None where there is no template to have: not Linux, or
    COMPILE_LENS_WORKER_TEMPLATE=0 in the environment (each worker then imports torch itself)."""

    def __init__(self) -> None:
        self._by_key: dict[tuple, WorkerTemplate] = {}

    def get(self, python: str, env: dict[str, str]) -> Optional[WorkerTemplate]:
        if not supported() or os.environ.get("COMPILE_LENS_WORKER_TEMPLATE") == "0":
            return None
        key = (python, tuple(sorted(env.items())))
        if key not in self._by_key:
            self._by_key[key] = WorkerTemplate(python, env)
        return self._by_key[key]

    def pids(self) -> list[int]:
        return [t.pid for t in self._by_key.values() if t.pid]

    async def stop(self) -> None:
        templates, self._by_key = list(self._by_key.values()), {}
        for template in templates:
            await template.stop()
