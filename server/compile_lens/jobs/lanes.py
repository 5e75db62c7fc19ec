"""Worker processes as seen from the server: start, send a job, watch time and memory, replace.

No torch here. A worker that crashes, hangs past `worker.timeoutSeconds` or grows past
`worker.memoryLimitMB` is killed with its whole process tree and replaced; the job's outcome
says what happened in words the user can act on.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

import psutil

from ..processes import kill_tree
from ..protocol import AnalyzeJob, Problem, WorkerEvent, from_dict
from ..remote_cache import cold_env
from .template import Templates, TemplateUnavailable

log = logging.getLogger(__name__)

STDERR_LOG_LIMIT = 32_000  # characters of user output per job kept in the log
# How often the worker's process tree is listed again for the memory check (psutil finds children
# by reading every process on the machine: ≈ 2.5 ms on a shared host); its members' RSS is read
# every check. A subprocess the worker starts is counted from the next listing on.
TREE_REFRESH_S = 1.0
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def worker_env(cache_dir: Optional[str]) -> dict[str, str]:
    # No remote cache or PGO profile in the worker either: its warm compile reads what the cold
    # compile (`worker/measure/compile/cold`, the same environment) wrote, with the same cache keys
    env = cold_env(os.environ)
    # The worker must import this same compile_lens, whatever the user's cwd holds.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
    env["PYTHONSAFEPATH"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    # No TORCHINDUCTOR_FX_GRAPH_CACHE here: torch reads that variable as a *force* that overrides
    # any config set in code (the FX-graph cache is on by default anyway), so it would silently
    # undo a compile's own cache settings (issue 42: line costs served from the timed compile's cache).
    if cache_dir:
        # Inductor's on-disk caches persist across sessions: re-measuring skips the compile.
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(cache_dir, "inductor"))
    return env


MB = 1024 * 1024


def default_memory_limit_mb() -> int:
    """Half of the memory this machine (or the cgroup the server runs in, when it is capped lower)
    has: room for a real model's compile, and for the editor and everything else beside it."""
    total = psutil.virtual_memory().total
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        with contextlib.suppress(OSError, ValueError):
            with open(path) as f:
                total = min(total, int(f.read().strip()))  # "max" (no cap): ValueError, kept as is
    return max(256, total // 2 // MB)


def _tree(pid: int) -> list[psutil.Process]:
    try:
        parent = psutil.Process(pid)
        return [parent] + parent.children(recursive=True)
    except psutil.Error:
        return []


def tree_rss(pid: int) -> int:
    """Summed RSS of a process tree: cheap, and never below what it holds (a page several of its
    processes map counts once per process)."""
    return _rss(_tree(pid))


def _rss(procs: list[psutil.Process]) -> int:
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total


def tree_pss(pid: int) -> tuple[int, int]:
    """(summed PSS, processes): what a process tree really holds, each shared page divided among
    the processes that map it (psutil's `memory_full_info`, Linux; USS, else RSS, elsewhere).
    It reads each process's page map: ≈ 150 ms on a 5 GB worker, up to ≈ 0.5 s under load
    (BENCHMARKS.md), so it is read only near the cap."""
    total, procs = 0, _tree(pid)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            full = proc.memory_full_info()
            total += getattr(full, "pss", None) or getattr(full, "uss", None) or full.rss
    return total, len(procs)


class WorkerGone(Exception):
    def __init__(self, problem: Problem):
        super().__init__(problem.message)
        self.problem = problem


@dataclass
class Limits:
    timeout_s: float = 60.0
    memory_limit_mb: Optional[int] = None  # None: `default_memory_limit_mb()`

    def __post_init__(self) -> None:
        if self.memory_limit_mb is None:
            self.memory_limit_mb = default_memory_limit_mb()


OnEvent = Callable[[WorkerEvent], Awaitable[None] | None]


class Worker:
    """One warm torch process and its private JSON-lines pipe."""

    def __init__(self, python: str, cwd: str, env: dict[str, str], templates: Optional[Templates] = None):
        self.python, self.cwd, self.env, self.templates = python, cwd, env, templates
        self.proc: Optional[Any] = None  # asyncio's Process, or a `ForkedProcess` from the template
        self.info: dict[str, Any] = {}
        self.output: list[str] = []  # user stdout/stderr of the current job, truncated
        self._output_size = 0
        self._stderr_task: Optional[asyncio.Task] = None
        self.jobs_run = 0
        self._pss_read_at = 0.0  # when the tree's PSS was last read (it costs; RSS is read each turn)
        self._tree: list[psutil.Process] = []  # the worker and its subprocesses, as last listed
        self._tree_at = float("-inf")  # when (loop time)

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    async def start(self, timeout_s: float) -> dict[str, Any]:
        """Start the process (forked from the template, else on its own) and wait for its hello
        (torch imported). Raises WorkerGone."""
        env = {**self.env, "COMPILE_LENS_SERVER_PID": str(os.getpid())}  # its parent-death watch
        template = self.templates.get(self.python, env) if self.templates else None
        if template is not None:
            with contextlib.suppress(TemplateUnavailable):
                self.proc = await template.spawn(self.cwd, env, max(timeout_s, 30.0))
        if self.proc is None:
            self.proc = await asyncio.create_subprocess_exec(
                self.python, "-m", "compile_lens.worker",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=self.cwd, env=env,
                limit=64 * 1024 * 1024, start_new_session=True,
            )
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        hello = await self._next_event(max(timeout_s, 30.0), None)
        if hello is None:
            raise WorkerGone(self._death_problem("starting the analysis process"))
        if hello.get("error"):
            problem = from_dict(Problem, hello["error"])
            self.kill()
            raise WorkerGone(problem)
        self.info = hello.get("info", {})
        return self.info

    async def _drain_stderr(self) -> None:
        assert self.proc and self.proc.stderr
        while True:
            chunk = await self.proc.stderr.read(65536)
            if not chunk:
                return
            text = chunk.decode("utf-8", "replace")
            if self._output_size < STDERR_LOG_LIMIT:
                self.output.append(text[: STDERR_LOG_LIMIT - self._output_size])
            self._output_size += len(text)

    def take_output(self) -> str:
        text = "".join(self.output)
        if self._output_size > len(text):
            text += f"\n… ({self._output_size - len(text)} more characters of output not kept)"
        self.output, self._output_size = [], 0
        return text

    async def _next_event(self, timeout_s: float, memory_limit_mb: Optional[int],
                          stage: Optional[str] = None, hint: Optional[str] = None,
                          limit_s: Optional[float] = None) -> Optional[dict]:
        """The next JSON line, or None if the process died. Raises WorkerGone on timeout/memory.

        `timeout_s` is how long the worker may stay silent from now (`limit_s`: the whole limit, as
        said, when part of it has passed); `stage` (what it last said it was doing, and where its
        stack was when it went quiet) and `hint` (the one setting that raises this limit) go into
        the timeout's problem."""
        assert self.proc and self.proc.stdout
        read = asyncio.ensure_future(self.proc.stdout.readline())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            while True:
                done, _ = await asyncio.wait({read}, timeout=0.2)
                if done:
                    line = read.result()
                    if not line:
                        await self._wait_exit()
                        return None
                    try:
                        return json.loads(line)
                    except ValueError:
                        log.warning("worker sent a line that is not JSON: %r", line[:200])
                        read = asyncio.ensure_future(self.proc.stdout.readline())
                        continue
                if memory_limit_mb:
                    await self._check_memory(memory_limit_mb)
                if loop.time() > deadline:
                    self.kill()
                    where = f" ({stage})" if stage else ""
                    raise WorkerGone(Problem(
                        "timeout", f"the analysis took longer than {limit_s or timeout_s:g} s without progress{where} "
                        "and was stopped",
                        hint=hint or "raise compileLens.worker.timeoutSeconds if this code is just slow"))
        finally:
            if not read.done():
                read.cancel()

    async def _check_memory(self, limit_mb: int) -> None:
        """Stop the tree when it holds more than `limit_mb`. Summed RSS counts torch's shared pages
        once per process (a compile's workers map the same libraries), so it only says when to
        look closer: the tree's PSS, read at most once a second and in a thread (≈ 150 ms for a
        5 GB worker on a busy machine: never on the editor's event loop), is what it is held to."""
        assert self.proc
        now = asyncio.get_running_loop().time()
        if now - self._tree_at >= TREE_REFRESH_S:
            self._tree, self._tree_at = _tree(self.proc.pid), now
        if _rss(self._tree) <= limit_mb * MB:
            return  # PSS is never above RSS
        if now - self._pss_read_at < 1.0:
            return
        self._pss_read_at = now
        held, procs = await asyncio.to_thread(tree_pss, self.proc.pid)
        if held <= limit_mb * MB:
            return
        self.kill()
        others = f" and its {procs - 1} subprocess{'es' if procs != 2 else ''}" if procs > 1 else ""
        raise WorkerGone(Problem(
            "memory", f"the analysis held more than {limit_mb} MB ({held // MB} MB: the proportional set size "
                      f"of the worker{others}, each shared page counted once) and was stopped",
            hint="raise compileLens.worker.memoryLimitMB, or use smaller example inputs"))

    async def _wait_exit(self) -> None:
        assert self.proc
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 5)

    def _death_problem(self, what: str) -> Problem:
        code = self.proc.returncode if self.proc else None
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = "signal"
            return Problem("crash", f"the analysis process crashed (signal {-code}, {name}) while {what}",
                           hint="the worker was replaced; the crash is in native code the target calls")
        return Problem("exit", f"the analysis process exited (code {code}) while {what}; "
                               "user code may have called os._exit()", hint="the worker was replaced")

    async def run(self, job: AnalyzeJob, on_event: OnEvent, limits: Limits) -> Optional[Problem]:
        """Send a job and pass its events on. Returns the file-level problem, if any. Raises WorkerGone."""
        assert self.proc and self.proc.stdin
        self.jobs_run += 1
        self.proc.stdin.write((json.dumps(dataclasses.asdict(job)) + "\n").encode())
        await self.proc.stdin.drain()
        sent = ("job sent", time.monotonic(), time.process_time(), "server") if job.stamps else None
        stage = "importing the file"
        wait, hint = limits.timeout_s, None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        stalled: Optional[str] = None  # where the worker's stack was when it went quiet (a `stall` event)
        while True:
            said = f"{stage}; {stalled}" if stalled else stage
            raw = await self._next_event(max(0.0, deadline - loop.time()), limits.memory_limit_mb, said, hint,
                                         limit_s=wait)
            if raw is None:
                raise WorkerGone(self._death_problem(said))
            event = from_dict(WorkerEvent, raw)
            if event.id != job.id:
                continue
            if sent and "stamps" in event.info:  # the worker's marks, between the job's sending and the event's reading
                event.info["stamps"] = [sent, *event.info["stamps"],
                                        ("event", time.monotonic(), time.process_time(), "server")]
            if event.event == "stall":  # quiet: said, and not progress (the silence limit runs on)
                stalled = event.stage
            else:
                stalled, deadline = None, loop.time() + wait
            if event.event == "progress" and event.stage:
                stage = event.stage
                # A measurement announces how long its next stage may take (from the cold
                # compile it has seen); the silence limit is then the longer of the two.
                wait, hint = limits.timeout_s, None
                announced = (event.info or {}).get("limit_s")
                if isinstance(announced, (int, float)) and announced > limits.timeout_s:
                    wait = float(announced)
                    hint = ("raise compileLens.benchmark.maxSeconds (this stage's limit follows it and "
                            "the cold compile's duration)")
                deadline = loop.time() + wait
            result = on_event(event)
            if asyncio.iscoroutine(result):
                await result
            if event.event == "done":
                return event.error

    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            kill_tree(self.proc.pid)

    async def stop(self) -> None:
        self.kill()
        if self.proc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.proc.wait(), 5)
        if self._stderr_task:
            self._stderr_task.cancel()


SPARE_MIN_CPUS = 4  # the cores a machine needs before a lane keeps a spare worker by default


def spare_by_default() -> bool:
    """Whether a lane keeps a warm spare where the user has not said: on at least SPARE_MIN_CPUS cores.
    On fewer, the spare's torch import (about 5 s of a core, 300 MB) competes with the first trace and
    with a measurement's timing rounds, to save that import only after a crash or a cancelled job."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return cpus >= SPARE_MIN_CPUS


class WorkerSlot:
    """One lane of work (tracing, or benchmarking) with a warm worker and, where `spare`, a warm spare
    behind it.

    Jobs in a lane run one at a time. A worker that failed, or ran `recycle_after` jobs (RSS grows
    ≈ 0.6 MB per trace), is replaced by the spare, so the next job does not wait for torch to import;
    without a spare the next job starts a new worker.
    """

    def __init__(self, name: str, python: str, cwd: str, env: dict[str, str], *,
                 spare: bool = True, recycle_after: int = 200, templates: Optional[Templates] = None):
        self.name, self.python, self.cwd, self.env, self.templates = name, python, cwd, env, templates
        self.keep_spare, self.recycle_after = spare, recycle_after
        self.lock = asyncio.Lock()
        self._current: Optional[asyncio.Task] = None
        self._spare: Optional[asyncio.Task] = None
        self.on_output: Callable[[str], None] = lambda text: None
        self.starts = 0
        self._retired: list[Worker] = []

    def _spawn(self, timeout_s: float) -> asyncio.Task:
        worker = Worker(self.python, self.cwd, self.env, self.templates)
        self.starts += 1

        async def boot() -> Worker:
            try:
                await worker.start(timeout_s)
            except BaseException:  # a start cancelled (stop) or failed leaves no process behind
                worker.kill()
                raise
            return worker

        return asyncio.create_task(boot())

    def warm_up(self, timeout_s: float = 60.0) -> None:
        if self._current is None:
            self._current = self._spawn(timeout_s)
        if self.keep_spare and self._spare is None:
            self._spare = self._spawn(timeout_s)

    async def worker(self, timeout_s: float) -> Worker:
        self.warm_up(timeout_s)
        assert self._current is not None
        task = self._current
        if task.cancelled():  # its start was cancelled (stop): start another
            self._current = None
            return await self.worker(timeout_s)
        try:
            # shield: a job cancelled while its worker starts (file closed or changed) must not
            # cancel the start itself; that would leave every later job of this lane failing
            worker = await asyncio.shield(task)
        except WorkerGone:
            if self._current is task:
                self._current = None
            raise
        if not worker.alive():
            self._retire()
            return await self.worker(timeout_s)
        return worker

    def _retire(self) -> None:
        """Drop the current worker (dead, killed or worn) and promote the spare."""
        old = self._current
        if old is not None and old.done() and not old.cancelled() and old.exception() is None:
            old.result().kill()
            # reaped in stop(), so its pipes close while the loop runs; the reaped ones are dropped
            self._retired = [w for w in self._retired if w.alive()] + [old.result()]
        self._current, self._spare = self._spare, None

    async def run(self, job: AnalyzeJob, on_event: OnEvent, limits: Limits) -> Optional[Problem]:
        async with self.lock:
            worker = await self.worker(limits.timeout_s)
            try:
                return await worker.run(job, on_event, limits)
            except WorkerGone:
                self._retire()
                raise
            except asyncio.CancelledError:
                worker.kill()  # a cancelled job leaves the worker mid-run: it cannot be reused
                self._retire()
                raise
            finally:
                output = worker.take_output()
                if output.strip():
                    self.on_output(output)
                if worker.jobs_run >= self.recycle_after and self._current is not None:
                    self._retire()
                if self.keep_spare and self._spare is None and self._current is not None:
                    self._spare = self._spawn(limits.timeout_s)

    async def info(self, timeout_s: float = 60.0) -> dict[str, Any]:
        return (await self.worker(timeout_s)).info

    def pids(self) -> list[int]:
        pids = []
        for task in (self._current, self._spare):
            if task is not None and task.done() and not task.cancelled() and task.exception() is None:
                pid = task.result().pid
                if pid:
                    pids.append(pid)
        return pids

    async def stop(self) -> None:
        for task in (self._current, self._spare):
            if task is None:
                continue
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            elif not task.cancelled() and task.exception() is None:
                await task.result().stop()
        for worker in self._retired:
            await worker.stop()
        self._current = self._spare = None
        self._retired = []


def default_python() -> str:
    return sys.executable
