"""The cold compiles of one measurement: one fresh process per workload (`bench_child`), each with an
empty Inductor cache folder of its own, so each workload's cold figure is a new process's first
compile (a process that already compiled something pays far less).

The forward's child is started first (as the job arrives, where the worker knows the target then:
`Early`, gated until the measurement needs it) and waited for: its cache is what the forward's warm compile
reads, and the forward is the figure the user waits for. The train step's child starts beside the
parent's own work only where the machine has cores to spare (`spare_cpus`, pinned to them: never on
the cores the timing rounds use); otherwise it starts when the forward's figures are done, alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Union

from ....protocol import CompileTime, TargetSpec
from .cold import CACHE_PREFIX, Child, cold_limit, run_child, spare_cpus, stage_limit
from .cold_job import ColdJob, ColdResult, FirstLook


@dataclass
class Cold:
    workload: str
    compile_s: Optional[float]  # the workload's cold compile, fresh process, empty cache
    import_s: float  # Dynamo and Inductor's import in that process
    limit: float  # how long a later stage may be silent
    child_job: ColdJob  # what the fresh process was asked, for the warm-remote ones
    fx_keys: list[dict[str, Any]]  # its FX-graph cache lookups (`cache_keys`): why a later compile missed
    cache_dir: str  # the cache it filled: the warm compile of this workload reads it
    compile_time: Optional[CompileTime] = None  # its frames (`compile.per_frame`)
    # the forward's: its first look, timed in that fresh process right after the compile
    # (`timing.per_workload.first_look`); None for others
    first_look: Optional[FirstLook] = None


def child_job(path: str, root: str, spec: TargetSpec, device: str, mode: str, step_begin: bool,
              wl: str, max_seconds: float) -> ColdJob:
    """What a workload's cold child is asked (`bench_child`): the forward's also takes the first look
    at its timing (`timing.per_workload.first_look`), on the measurement's budget (`max_seconds`)."""
    label = "forward" if wl == "forward" else "train step"
    return ColdJob(os.path.abspath(path), os.path.abspath(root), spec, device, mode, [wl], step_begin,
                   ["compile", "first_look"] if wl == "forward" else ["compile"], max_seconds,
                   f"the {label}'s cold compile (fresh process)")


class Early:
    """The cold children of the job's first measured target (the forward's; the train step's for a
    module), started as the job arrives: a fresh process's imports and the model's build (seconds:
    torch, the user's file and its libraries) run beside the parent's own import and trace, then
    each waits, idle, for the word to compile (`Child.go`, given when the measurement would have
    started it: never beside the parent's timing). Their folder becomes the measurement's
    (`run_benchmark(early=...)`), which removes it; `stop` ends those not taken."""

    def __init__(self, name: str, jobs: dict[str, ColdJob], max_seconds: float):
        self.name, self.asked, self.taken = name, jobs, False
        self.base = tempfile.mkdtemp(prefix=CACHE_PREFIX)
        self.children: dict[str, Child] = {}
        for wl, job in jobs.items():
            cache_dir = os.path.join(self.base, wl)
            os.makedirs(cache_dir, exist_ok=True)
            self.children[wl] = Child(job, cache_dir=cache_dir, timeout=cold_limit(max_seconds), gated=True)

    def take(self, wl: str, asked: ColdJob) -> Optional[Child]:
        """Workload `wl`'s child, when it was asked exactly `asked` (the built target's spec, the
        resolved device); else it is ended and None (the measurement starts its own)."""
        self.taken = True  # a measurement took the folder: it removes it
        child = self.children.pop(wl, None)
        if child is not None and asked != self.asked.get(wl):
            child.stop()
            child = None
        return child

    def stop(self) -> None:
        """End the children not taken, and remove the folder when no measurement adopted it."""
        for child in self.children.values():
            child.stop()
        self.children.clear()
        if not self.taken:
            shutil.rmtree(self.base, ignore_errors=True)


class ColdChildren:
    """`get(wl)`: the cold compile of workload `wl`, started when first needed (or at once, beside)."""

    def __init__(self, job: Any, workloads: list[str], threads: int, run: Callable[..., ColdResult] = run_child,
                 early: Optional[Early] = None):
        self.job, self.workloads, self.run = job, workloads, run  # `run`: a child waited for (`run_child`)
        self.beside: dict[str, Child] = {}  # children started beside the parent's work
        self.cold: dict[str, Cold] = {}
        self.spare = spare_cpus(threads)
        # children started as the job arrived (`Early`), when asked what this measurement asks: the
        # forward's compiles now; a later one waits for its turn (`get`), as one started then would
        self.gated: dict[str, Child] = {}
        for wl in workloads if early is not None else ():
            if (found := early.take(wl, self._child_job(wl))) is None:
                continue
            if wl == workloads[0]:
                found.go()
                self.beside[wl] = found
            else:
                self.gated[wl] = found
        if self.spare:  # all but the first compile beside the parent's work, on cores it does not use
            for wl in workloads[1:]:
                if wl in self.gated:  # started early: pinned to those cores (its compile workers follow)
                    self.beside[wl] = child = self.gated.pop(wl)
                    with contextlib.suppress(OSError, AttributeError):
                        os.sched_setaffinity(child.proc.pid, self.spare)
                    child.go()
                    continue
                self.beside[wl] = Child(self._child_job(wl), cache_dir=self._cache_dir(wl),
                                        timeout=cold_limit(job.max_seconds), cpus=self.spare)

    def prestart(self, wl: str) -> None:
        """Start workload `wl`'s child now, gated (its imports and the model's build, seconds of one
        core, then it waits idle): called once the forward's child is done, so that they run beside
        this process's warm compile instead of before the train step's timed compile. `paused()`
        stops it while timing rounds run here."""
        if wl in self.cold or wl in self.beside or wl in self.gated:
            return
        with contextlib.suppress(OSError):  # no process to spare: `get` starts it when it is needed
            self.gated[wl] = Child(self._child_job(wl), cache_dir=self._cache_dir(wl),
                                   timeout=cold_limit(self.job.max_seconds), gated=True)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The gated children stopped for the block (timing rounds here: not beside their imports)."""
        with contextlib.ExitStack() as stack:
            for child in self.gated.values():
                stack.enter_context(child.paused())
            yield

    def _child_job(self, wl: str) -> ColdJob:
        job = self.job
        return child_job(job.path, job.root, job.target.spec, job.device, job.mode, job.step_begin, wl,
                         job.max_seconds)

    def _cache_dir(self, wl: str) -> str:
        cache_dir = os.path.join(self.job.cache_dir, wl)
        os.makedirs(cache_dir, exist_ok=True)
        return cache_dir

    def get(self, wl: str) -> Cold:
        if wl in self.cold:
            return self.cold[wl]
        job = self.job
        label = "forward" if wl == "forward" else "train step"
        then = " and timing it" if "first_look" in self._child_job(wl).tasks else ""
        job.stage(f"compiling the {label} with a cold cache (fresh process){then}",
                  f"compiling {job.name} {label} with Inductor (cold cache, fresh process){then}…")
        t_wait = time.perf_counter()
        if wl in self.gated:
            child = self.gated.pop(wl)
            self.beside[wl] = child  # held until it reports: `stop` ends it if the wait is cut (the budget)
            child.go()
        found: Union[ColdResult, dict[str, Any]]
        if wl in self.beside:
            try:
                found = self.beside[wl].result(job.progress)
            except BaseException:  # timed out, crashed, or the wait was cut: no compile left running
                self.beside[wl].stop()
                raise
        else:
            found = self.run(self._child_job(wl), cache_dir=self._cache_dir(wl), timeout=cold_limit(job.max_seconds),
                             progress=job.progress)
        # the wait is the stage (a child started beside earlier work cost the parent nothing before)
        job.add_stage("cold_child" if wl == "forward" else "cold_child_train", t_wait)
        if not isinstance(found, ColdResult):  # a ColdJob's child reads back a ColdResult (`cold.Child`)
            raise TypeError(f"the cold child's result is a {type(found).__name__}, not a ColdResult")
        cold_s = found.compile_s.get(wl)
        job.notes.extend(n for n in found.notes if n not in job.notes)
        self.cold[wl] = Cold(wl, cold_s, found.import_s, stage_limit(cold_s, job.max_seconds),
                             self._child_job(wl), found.fx_keys, self._cache_dir(wl), found.compile_time,
                             found.first_look)
        return self.cold[wl]

    def stop(self) -> None:
        """End the children still running beside (the measurement failed before it needed them)."""
        for wl, child in [*self.beside.items(), *self.gated.items()]:
            if wl not in self.cold:
                child.stop()
