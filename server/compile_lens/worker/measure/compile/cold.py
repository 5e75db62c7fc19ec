"""The cold compile: `bench_child` in a fresh process with an empty Inductor cache folder (one per
benchmark, swept when a killed worker left it behind), with heartbeats while it runs and a limit;
and the limits of the later stages, from what the cold compile took."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Iterator, Optional, Union, overload

import psutil

import compile_lens

from ....processes import kill_tree
from ....protocol import Problem
from ....remote_cache import Remote, cold_env, remote_env
from ...loader import TargetError
from .cold_job import ColdJob, ColdResult

COLD_LIMIT_MIN_S, COLD_LIMIT_FACTOR = 300.0, 5.0  # the cold compile: a hang guard, nothing seen yet
STAGE_LIMIT_MIN_S, STAGE_LIMIT_FACTOR = 60.0, 2.0  # later stages: from the cold compile's duration
HEARTBEAT_S = 5.0  # progress while a child compiles: the pool's silence limit is for hangs only
CHILD_MODULE = "compile_lens.worker.measure.compile.bench_child"
CACHE_PREFIX = "compile-lens-inductor-"  # one temp folder per benchmark: Inductor cache + child files
STALE_S = 6 * 3600


def _child_env(cache_dir: str, remote: Optional[Remote] = None) -> dict[str, str]:
    """The child's environment: its own Inductor cache folder; no remote cache and no PGO profile
    whatever the user's environment says (cold by construction), unless `remote` serves this one."""
    env = cold_env(os.environ) if remote is None else remote_env(os.environ, remote)
    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    env["TRITON_CACHE_DIR"] = os.path.join(cache_dir, "triton")
    # the folder that holds the compile_lens package, wherever this module sits in it
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(compile_lens.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


# a child's job: the cold child's, typed (its result read back as a `ColdResult`); a lever's child's own JSON
Job = Union[ColdJob, dict[str, Any]]


@overload
def run_child(job: ColdJob, *, cache_dir: str, timeout: float, progress: Callable[..., None] = ...,
              remote: Optional[Remote] = ..., module: str = ...) -> ColdResult: ...
@overload
def run_child(job: dict[str, Any], *, cache_dir: str, timeout: float, progress: Callable[..., None] = ...,
              remote: Optional[Remote] = ..., module: str = ...) -> dict[str, Any]: ...
def run_child(job: Job, *, cache_dir: str, timeout: float,
              progress: Callable[..., None] = lambda stage, **kw: None,
              remote: Optional[Remote] = None, module: str = CHILD_MODULE) -> Union[ColdResult, dict[str, Any]]:
    """Run `bench_child` (or another child `module`: the levers' own, with their own JSON job) in a
    fresh process; its result comes back in a file, never on stdout.

    While it runs, `progress` hears from it every HEARTBEAT_S (the worker is alive, only waiting);
    `timeout` is this stage's own limit. The child's stdout and stderr (user prints included) go
    to a log file whose tail is used only to explain a crash.
    """
    if module == CHILD_MODULE and not isinstance(job, ColdJob):  # the cold child reads a ColdJob only
        raise TypeError(f"the cold child's job is a ColdJob, not a {type(job).__name__}")
    child = Child(job, cache_dir=cache_dir, timeout=timeout, remote=remote, module=module)
    try:
        return child.result(progress)
    except BaseException:  # the wait cut short (the budget's stop, an interrupt): the process ends with it
        child.stop()
        raise


class Child:
    """A fresh child process started now, its result read later (`result`): the cold compile of one
    workload can run beside the parent's own work where the machine has cores to spare
    (`spare_cpus`); `cpus` pins it to those. A `ColdJob` reads back a `ColdResult`; a lever's child's
    JSON job, its JSON result."""

    def __init__(self, job: Job, *, cache_dir: str, timeout: float, remote: Optional[Remote] = None,
                 module: str = CHILD_MODULE, cpus: Optional[set[int]] = None, gated: bool = False):
        self.work = tempfile.mkdtemp(prefix="child-", dir=cache_dir)  # goes when the benchmark's folder goes
        self.result_path = os.path.join(self.work, "result.json")
        self.log_path = os.path.join(self.work, "child.log")
        self.typed = isinstance(job, ColdJob)
        # what the process is given, as JSON (the process boundary)
        self.job = dict(job.json() if isinstance(job, ColdJob) else job, result_path=self.result_path,
                        **({"gated": True} if gated else {}))
        self.timeout = timeout
        self.started = time.perf_counter()
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus and hasattr(os, "sched_setaffinity") else None
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", module, json.dumps(self.job)],
                stdin=subprocess.PIPE if gated else subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=_child_env(cache_dir, remote), cwd=self.job.get("root") or None, preexec_fn=pin)

    def go(self) -> None:
        """A gated child (`gated`): start its tasks now; its limit counts from here."""
        self.started = time.perf_counter()
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.write(b"go\n")
                self.proc.stdin.close()
            except OSError:  # it died already: `result` says how
                pass

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Stopped for the block (a gated child importing beside the parent's timing rounds): it takes
        no CPU until the block ends; its limit counts from its `go`, so the pause costs it nothing."""
        proc = None
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(self.proc.pid)
            proc.suspend()
        try:
            yield
        finally:
            if proc is not None:
                with contextlib.suppress(psutil.Error):
                    proc.resume()

    def result(self, progress: Callable[..., None] = lambda stage, **kw: None) -> Union[ColdResult, dict[str, Any]]:
        """Wait for the child (heartbeats to `progress`), then its result (a `ColdResult` for a
        `ColdJob`); TargetError for a timeout, a crash or the error it reported."""
        job, proc, what = self.job, self.proc, self.job.get("what", "compiling")
        try:
            code = None
            while code is None:
                elapsed = time.perf_counter() - self.started
                try:
                    code = proc.wait(timeout=max(0.01, min(HEARTBEAT_S, self.timeout - elapsed)))
                except subprocess.TimeoutExpired:
                    elapsed = time.perf_counter() - self.started
                    if elapsed >= self.timeout:
                        self.stop()
                        raise TargetError(Problem(
                            "timeout", f"measuring stopped during {what} after {elapsed:.0f} s "
                            f"(its limit: {self.timeout:.0f} s, {COLD_LIMIT_FACTOR:g}× benchmark.maxSeconds, at "
                            f"least {COLD_LIMIT_MIN_S:.0f} s); nothing of the measurement was kept",
                            job.get("path"), None,
                            "raise compileLens.benchmark.maxSeconds, or use smaller example inputs")) from None
                    progress(f"{what}: {elapsed:.0f} s…", limit_s=HEARTBEAT_S * 4)
            if os.path.exists(self.result_path):
                with open(self.result_path, encoding="utf-8") as f:
                    result = json.load(f)
                if result.get("error"):
                    error = result["error"]
                    raise TargetError(Problem(**{k: error.get(k) for k in ("kind", "message", "path", "line", "hint")}))
                return ColdResult.from_json(result) if self.typed else result
            with open(self.log_path, "rb") as f:
                tail = f.read()[-2000:].decode("utf-8", "replace").strip().splitlines()
            last = next((row for row in reversed(tail) if row.strip()), "")
            raise TargetError(Problem(
                "crash", f"the benchmark process exited with code {code} before reporting"
                + (f": {last.strip()[:200]}" if last else ""), job.get("path"), None,
                "run the model once in a plain script to see the full error"))
        finally:
            shutil.rmtree(self.work, ignore_errors=True)

    def stop(self) -> None:
        """End the child and Inductor's compile workers (a measurement that ended without it)."""
        if self.proc.poll() is None:
            kill_tree(self.proc.pid)
            self.proc.wait()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        shutil.rmtree(self.work, ignore_errors=True)


SPARE_CPUS_MIN = 4  # cores beyond torch's threads before a child compiles beside the parent


def allowed_cpus() -> list[int]:
    """The cores this process may run on (its affinity; every core where the platform has none)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def spare_cpus(threads: int) -> Optional[set[int]]:
    """The cores a child may compile on beside the parent's own work (its timing rounds among it):
    those this process may use beyond the first `threads` (torch's intra-op threads), when there
    are at least SPARE_CPUS_MIN of them; None (run it before, alone) otherwise: on a 2-core machine
    a compile beside the timing would be timed with it."""
    rest = allowed_cpus()[max(1, threads):]
    return set(rest) if len(rest) >= SPARE_CPUS_MIN else None


def _sweep_stale() -> None:
    """Remove benchmark folders left by a worker that was killed mid-benchmark (hours old)."""
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(tempfile.gettempdir()):
            if entry.name.startswith(CACHE_PREFIX) and entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    if now - entry.stat(follow_symlinks=False).st_mtime > STALE_S:
                        shutil.rmtree(entry.path, ignore_errors=True)


@contextlib.contextmanager
def inductor_cache(directory: str) -> Iterator[None]:
    """Point Inductor (and Triton) at `directory` for the compiles in this block."""
    saved = {k: os.environ.get(k) for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    os.environ["TRITON_CACHE_DIR"] = os.path.join(directory, "triton")
    try:
        from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir
        ctx: Any = temporary_cache_dir(directory)
    except ImportError:  # older torch: the env var alone
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = directory
        ctx = contextlib.nullcontext()
    try:
        with ctx:
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def cold_limit(max_seconds: float) -> float:
    """The cold compile's limit: nothing has been seen yet, so generous — a guard against a hang."""
    return max(COLD_LIMIT_MIN_S, COLD_LIMIT_FACTOR * max_seconds)


def stage_limit(cold_s: Optional[float], max_seconds: float) -> float:
    """The limit of a later stage (a warm compile, the timing), from the cold compile seen: a warm
    compile takes a fraction of it, and the timing stops itself near `max_seconds`."""
    return max(STAGE_LIMIT_MIN_S, max_seconds, STAGE_LIMIT_FACTOR * (cold_s or 0.0))


def with_limits(progress: Callable[..., None]) -> Callable[..., None]:
    """`progress(stage, limit_s=...)` for a callback that takes the limit, else `progress(stage)`."""
    try:
        params = inspect.signature(progress).parameters.values()
    except (TypeError, ValueError):
        return lambda stage, **kw: progress(stage)
    if any(p.kind == p.VAR_KEYWORD or p.name == "limit_s" for p in params):
        return progress
    return lambda stage, **kw: progress(stage)
