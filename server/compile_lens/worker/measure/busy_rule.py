"""Was the machine busy while we timed? One rule for the benchmark's rounds, every lever's and the
trial's, per device (`decide`, pure), read by `Contention`.

- **CPU**: as strict as it has always been — others' CPU and our own other processes' together
  above the cores our threads leave idle plus half a core (`processes.busy_threshold`); the words
  tell others (named) from ours (Inductor's compile workers, the CLI or server that started us).
- **CUDA**: the timed work runs on the GPU and one thread launches it, so one busy core of sixteen
  is no reason. Busy when another process holds the GPU we time on (NVML, through the reader the
  busy-GPU wait uses: `gpu/readers.py`), or when our launching thread waited for a core for more
  than `SCHED_SHARE` of the round (its run-queue delay, `/proc/self/task/TID/schedstat`). What
  cannot be read is said (`contention.unknown`), and the rule falls back to what it can read: no
  NVML, GPU use by others is unknown; no schedstat (not Linux, or gVisor, as on a lent H200 box),
  busy when others' CPU and our own other processes' together took more than all cores but the
  launching thread's (`no_schedstat_threshold`: then it must have waited for one), or, where no CPU
  times can be read either, when the 1-minute load average passes the core count. Not the CPU
  rule: with torch's threads on every core it calls half a core of anyone's use busy, so on an
  idle 16-core GPU box every figure read "busy".

Tests only: `COMPILE_LENS_TEST_QUIET=1` declares the machine quiet (`declared_quiet`), read only
while pytest runs a test (`PYTEST_CURRENT_TEST`, which the processes a test starts inherit), so that
a test on a loaded 2-core machine gets the figures a user's idle machine gives and can assert them;
the contention then says so (`declared_quiet: true`, and what the rule would have said), so no
figure pretends. Its rounds on the CPU are timed on the timing thread's CPU clock (`round_clock`,
`clock: "thread CPU"`): on a 2-core machine shared with an editor and another test worker, wall
time per call rose ×4–×7 and the train step's ratio fell to ×1.2 from ×2.2, while CPU time is what
the call itself did. Never a user setting: docs/settings.md does not name it.

Before the rounds, `settle` waits for Inductor's compile pool to be ready and for our own
processes to go quiet (the pool starts at the first compile, one worker per core).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, Optional

import torch

from ...gpu.busy import measured_device
from ...gpu.readers import Reader, open_reader_why, own_pids
from ...processes import BUSY_MARGIN, CpuUse, OthersCPU, cpu_busy_words, top_words

PROC = "/proc"  # where schedstat and loadavg are read (a test points it at a folder without them)
SCHED_SHARE = 0.10  # the launching thread off a core this share of the round: the round is busy
SETTLE_MAX_S = 5.0  # at most this long waiting for our own processes to go quiet before timing
SETTLE_PERCENT = 20.0  # our own processes under this share of one CPU: quiet
SETTLE_WINDOW_S = 0.1
SETTLE_WINDOWS = 2
QUIET_ENV = "COMPILE_LENS_TEST_QUIET"  # tests only (see the module): "1" under pytest declares the machine quiet


def thread_run_delay_s(tid: Optional[int] = None, proc: str = PROC) -> Optional[float]:
    """Seconds the thread `tid` (default: the calling one) has waited on a run queue for a core,
    since it started (the second field of /proc/self/task/TID/schedstat); None: not readable."""
    tid = threading.get_native_id() if tid is None else tid
    try:
        with open(f"{proc}/self/task/{tid}/schedstat", encoding="ascii") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def declared_quiet() -> bool:
    """A test declared the machine quiet: `COMPILE_LENS_TEST_QUIET=1` while pytest runs a test
    (read at each call: a test sets it for the processes it starts). Outside pytest it is ignored."""
    return os.environ.get(QUIET_ENV) == "1" and bool(os.environ.get("PYTEST_CURRENT_TEST"))


def round_clock(device: str) -> Optional[Callable[[], float]]:
    """The clock timing rounds read instead of wall time: the thread's CPU time under a test's
    declaration on the CPU (another process's load does not enter it; the test models run on one
    thread), else None (wall time, and on CUDA the Timer's synchronising clock)."""
    return time.thread_time if declared_quiet() and not device.startswith("cuda") else None


def load_average(proc: str = PROC) -> Optional[float]:
    """The 1-minute load average (/proc/loadavg's first field); None: not readable."""
    try:
        with open(f"{proc}/loadavg", encoding="ascii") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def no_schedstat_threshold(cpus: int) -> float:
    """Without schedstat, on CUDA: others' and ours together (% of one CPU) above all cores but the
    one our launching thread needs (half a core on a one-core box) must have taken it from us."""
    return 100.0 * max(cpus - 1, BUSY_MARGIN)


def no_schedstat_words(others: Optional[float], ours: Optional[float], cpus: int, load: Optional[float],
                       top: list[dict[str, Any]], during: str) -> list[str]:
    """The CUDA rule's CPU half where the launching thread's wait cannot be read: []: not busy."""
    if others is not None or ours is not None:
        used = (others or 0.0) + (ours or 0.0)
        if used <= no_schedstat_threshold(cpus):
            return []
        named = top_words(top, ours=False) or top_words(top, ours=True)
        return [f"processes beside us used {used:.0f}% CPU {during} ({cpus} CPUs: no core was left for "
                "our launching thread)" + (f": {named}" if named else "")]
    if load is not None and load > cpus:  # no CPU times at all: a minute's average is all there is
        return [f"the load average was {load:.1f} on {cpus} CPUs {during}"]
    return []


_READER: Optional[tuple[Optional[Reader], str]] = None


def _reader() -> tuple[Optional[Reader], str]:
    global _READER
    if _READER is None:
        _READER = open_reader_why()
    return _READER


def gpu_others() -> tuple[Optional[list[dict[str, Any]]], str]:
    """Processes outside our family with a context on the GPU we time on ([{pid, name}]), or None
    and why not (no NVML)."""
    reader, why = _reader()
    if reader is None:
        return None, why
    try:
        readings = reader.read()
    except Exception as exc:  # noqa: BLE001 - NVMLError_*: unknown this time, not a failed measurement
        return None, f"NVML did not answer ({type(exc).__name__})"
    device = measured_device(os.environ.get("CUDA_VISIBLE_DEVICES"))
    for gpu in readings:
        if gpu.index == device or gpu.uuid == device:
            held = [p for p in gpu.processes if p.pid != os.getpid()]
            mine = own_pids() if held else set()  # a pass over the process table only when someone else holds it
            return [{"pid": p.pid, "name": p.label} for p in held if p.pid not in mine], ""
    return [], ""


def gpu_other_processes() -> Optional[int]:
    """How many processes outside our family hold the GPU we time on; None: unknown."""
    found, _ = gpu_others()
    return None if found is None else len(found)


def decide(device: str, *, cpus: int, threads: int, cpu: Optional[CpuUse], wall_s: float,
           gpu: Optional[list[dict[str, Any]]], sched_delay_s: Optional[float],
           during: str = "during timing", load: Optional[float] = None) -> tuple[bool, list[str]]:
    """(busy, the reasons in words) of one round or span, from what was read (None: not read);
    `load`: the load average, read only where schedstat is not."""
    others = cpu.others if cpu else None
    ours = cpu.ours if cpu else None
    top = cpu.top if cpu else []
    if not device.startswith("cuda"):
        words = cpu_busy_words(others, ours, cpus, threads, top, during)
        return bool(words), words
    words = []
    if gpu:
        names = ", ".join(str(g.get("name") or g.get("pid")) for g in gpu[:3])
        words.append(f"{len(gpu)} other process{'es' if len(gpu) != 1 else ''} used the GPU: {names}")
    if sched_delay_s is not None and wall_s > 0:
        share = sched_delay_s / wall_s
        if share > SCHED_SHARE:
            named = top_words(top, ours=False) or top_words(top, ours=True)
            words.append(f"our launching thread waited for a core {share:.0%} of the time {during}"
                         + (f" ({named})" if named else ""))
    elif sched_delay_s is None:  # no schedstat: what the CPU times (or the load average) can say
        words += no_schedstat_words(None if cpu is None else others, None if cpu is None else ours, cpus, load,
                                    top, during)
    return bool(words), words


class Contention:
    """What ran beside us since `start()`, judged by the device's rule (see the module)."""

    def __init__(self, device: str = "cpu", proc: str = PROC, cpus: Optional[int] = None):
        self.device, self.proc = device, proc
        self.cpus = cpus or os.cpu_count() or 1
        self._cpu = OthersCPU()
        self._tid = threading.get_native_id()  # the thread that launches the timed work
        self.start(gpu=True)

    def start(self, gpu: bool = False) -> None:
        """`gpu` (a span's start, e.g. a workload's timing): a full reading that can name processes;
        else a round's start (cheap)."""
        self._cpu.start(full=gpu)
        self._t0 = time.perf_counter()
        self._sched0 = thread_run_delay_s(self._tid, self.proc)
        self._gpu0 = gpu_others() if self.device.startswith("cuda") else (None, "")

    def other_cpu_percent(self) -> Optional[float]:
        use = self._cpu.use()
        return None if use is None else use.others

    def _read(self) -> dict[str, Any]:
        wall = time.perf_counter() - self._t0
        cpu = self._cpu.use()
        threads = torch.get_num_threads()
        found: dict[str, Any] = {"cpus": self.cpus, "threads": threads, "rule": "cuda" if self.device.startswith("cuda") else "cpu"}
        if cpu is not None:
            found["other_cpu_percent"] = round(cpu.others, 1)
            found["own_cpu_percent"] = round(cpu.ours, 1)
        sched = None
        if self._sched0 is not None and (now := thread_run_delay_s(self._tid, self.proc)) is not None:
            sched = max(0.0, now - self._sched0)
            found["launch_wait_percent"] = round(100.0 * sched / max(wall, 1e-9), 1)
        unknown = []
        gpu = None
        if self.device.startswith("cuda"):
            later, why = gpu_others()
            seen = [g for g in (self._gpu0[0], later) if g is not None]
            gpu = list({p["pid"]: p for g in seen for p in g}.values()) if seen else None
            found["gpu_other_processes"] = None if gpu is None else len(gpu)
            if gpu is None:
                unknown.append(f"other processes on the GPU ({why or self._gpu0[1]})")
        load = None
        if self.device.startswith("cuda") and sched is None:
            load = load_average(self.proc)
            if load is not None:
                found["load_average"] = load
            unknown.append("our launching thread's wait for a core (no /proc schedstat): busy only when "
                           "others' CPU left no core for it")
        busy, words = decide(self.device, cpus=self.cpus, threads=threads, cpu=cpu, wall_s=wall, gpu=gpu,
                             sched_delay_s=sched, load=load)
        found["busy"] = busy
        if busy:
            found["why"] = words
        if declared_quiet():  # a test's declaration: every round counts, and the reading says why
            found.update(busy=False, declared_quiet=True)
            if round_clock(self.device) is not None:
                found["clock"] = "thread CPU"
            if busy:
                found["busy_by_rule"] = True
        if cpu is not None and cpu.top:
            found["top"] = cpu.top
        if unknown:
            found["unknown"] = unknown
        return found

    def round_quiet(self) -> Optional[bool]:
        """Was this round quiet by the device's rule? None: nothing could be read."""
        found = self._read()
        if found.get("declared_quiet"):
            return True
        if "other_cpu_percent" not in found and "launch_wait_percent" not in found and not found.get("gpu_other_processes"):
            return None
        return not found["busy"]

    def report(self) -> dict[str, Any]:
        """The JSON `contention`: {cpus, threads, rule, other_cpu_percent, own_cpu_percent,
        launch_wait_percent, gpu_other_processes, busy, why, top, unknown}, and under a test's
        declaration `declared_quiet` (busy False; `busy_by_rule` and `why`: what the rule saw)."""
        return self._read()


def settle(max_s: float = SETTLE_MAX_S) -> float:
    """Before timing: wait for Inductor's compile pool (if this process started one) to be ready,
    then for our own other processes to go quiet; the seconds waited."""
    started = time.perf_counter()
    mod = sys.modules.get("torch._inductor.async_compile")
    pool = getattr(getattr(mod, "AsyncCompile", None), "process_pool", None)
    info = getattr(pool, "cache_info", None)
    quiesced = info is not None and info().currsize and getattr(pool(), "quiesce_waitcounter", None) is not None
    if info is not None and info().currsize and not quiesced:  # its workers may still be starting (a quiesced
        try:  # pool has none running: waiting for it would start them)
            mod.AsyncCompile.wait_pool_ready(timeout=max_s)  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - a pool that failed to start is Inductor's business, not the timing's
            pass
    watch, quiet = OthersCPU(), 0
    while time.perf_counter() - started < max_s and quiet < SETTLE_WINDOWS:
        watch.start(full=False)
        time.sleep(SETTLE_WINDOW_S)
        use = watch.use()
        # quiet windows in a row: on a loaded machine a busy process of ours can miss one window
        quiet = quiet + 1 if use is None or use.ours < SETTLE_PERCENT else 0
    return time.perf_counter() - started


def busy_words(contention: dict[str, Any]) -> Optional[str]:
    """`machine busy: other processes used 180% CPU during timing (2 CPUs): pytest 95%, chromium 60%`
    when the rule fired; a reading from before the rule had its own verdict (`busy`) by today's CPU rule."""
    if "busy" in contention:
        words = contention.get("why") or []
        return ("machine busy: " + " and ".join(words)) if contention["busy"] and words else None
    pct = contention.get("other_cpu_percent")
    cpu = CpuUse(pct, 0.0) if pct is not None else None
    _, words = decide("cpu", cpus=int(contention.get("cpus") or 1), threads=int(contention.get("threads") or 1),
                      cpu=cpu, wall_s=0.0, gpu=None, sched_delay_s=None)
    gpu = contention.get("gpu_other_processes")
    if gpu:
        words.append(f"{gpu} other process{'es' if gpu != 1 else ''} used the GPU")
    return ("machine busy: " + " and ".join(words)) if words else None
