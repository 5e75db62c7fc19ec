"""The busy rule, pure: what was read of the machine in (`Load`), "busy, and why in words" out
(`decide`). Every asker calls it: the timing's rounds and spans (`contention.Contention`), a lever's
compile sides, the trial's runs, the busy-GPU wait before a measurement (`gpu_busy`), and the
readers of a stored reading (`busy_words`, `contention_busy`). No psutil, no NVML, no torch here, so
every case is tested with readings written by hand.

- **CPU** (the timed work runs on our threads): as strict as it has always been — others' CPU and
  our own other processes' together above the cores our threads leave idle plus half a core
  (`busy_threshold`); the words tell others (named) from ours (Inductor's compile workers, the CLI
  or server that started us).
- **CUDA**: the timed work runs on the GPU and one thread launches it, so one busy core of sixteen
  is no reason. Busy when another process holds the GPU we time on (above `gpu_threshold`%
  utilization where one is given: the wait's, read while our worker is idle; while we time, the
  utilization is ours too, so any holder counts), or when our launching thread waited for a core
  for more than `SCHED_SHARE` of the round (its run-queue delay, schedstat). No schedstat (not
  Linux, or gVisor, as on a lent H200 box): busy when others' CPU and our own other processes'
  together took more than all cores but the launching thread's (`no_schedstat_threshold`), or,
  where no CPU times can be read either, when the 1-minute load average passes the core count
  (`load_over_cores`). Not the CPU rule: with torch's threads on every core it calls half a core of
  anyone's use busy, so on an idle 16-core GPU box every figure read "busy".
- What was not read is None, and says nothing either way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Sequence, Union

from ..measured import BusyProcess, ContentionReport

BUSY_MARGIN = 0.5  # CPUs' worth others may use beyond the cores our threads leave idle
SCHED_SHARE = 0.10  # the launching thread off a core this share of the round: the round is busy


@dataclass
class CpuUse:
    """What ran beside us, in % of one CPU (200% = two CPUs' worth): `others` (not our tree), `ours`
    (our tree less this process: compile workers, the parent CLI or server), and the busiest
    processes (`top`, the JSON `contention.top`)."""
    others: float
    ours: float
    top: list[BusyProcess] = field(default_factory=list)


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    label: str  # what the user knows it by: "python train.py"


@dataclass(frozen=True)
class GpuReading:
    """One GPU as NVML saw it: its index and UUID, its utilization over NVML's last sample period
    (percent of time a kernel ran, all processes together) and the processes that hold a context on it."""
    index: int
    uuid: str
    utilization: float
    processes: tuple[GpuProcess, ...] = field(default=())


@dataclass(frozen=True)
class Load:
    """What was read of the machine over a round, a span or a moment (None: not read)."""
    cpus: int = 1
    threads: int = 1  # the threads our timed work runs on (the CPU rule leaves the other cores to others)
    cpu: Optional[CpuUse] = None
    wall_s: float = 0.0
    sched_delay_s: Optional[float] = None  # our launching thread's run-queue wait over `wall_s` (schedstat)
    load_average: Optional[float] = None  # read only where schedstat is not
    gpu_others: Optional[tuple[GpuProcess, ...]] = None  # outside our family, on the GPU we time on
    gpu_utilization: Optional[float] = None  # that GPU's, all processes together


class Verdict(NamedTuple):
    busy: bool
    why: list[str]  # the reasons in words; [] when quiet


def busy_threshold(cpus: int, threads: int) -> float:
    """Others' CPU use (% of one CPU) above which they must have taken time from our threads: the
    cores our threads leave idle, plus half a core."""
    return 100.0 * (BUSY_MARGIN + max(0, cpus - threads))


def no_schedstat_threshold(cpus: int) -> float:
    """Without schedstat, on CUDA: others' and ours together (% of one CPU) above all cores but the
    one our launching thread needs (half a core on a one-core box) must have taken it from us."""
    return 100.0 * max(cpus - 1, BUSY_MARGIN)


def load_over_cores(load: Optional[float], cpus: int) -> bool:
    """A 1-minute load average above the core count: something waited for a core (the rule's last
    resort, and what the trial says of the machine before it starts)."""
    return load is not None and cpus > 0 and load > cpus


def decide(device: str, load: Load, *, during: str = "during timing",
           gpu_threshold: Optional[float] = None) -> Verdict:
    """Busy or not on `device` ("cpu", "cuda", "cuda:1", …), and why (see the module)."""
    cpu = load.cpu
    top = cpu.top if cpu else []
    if not device.startswith("cuda"):
        words = cpu_words(cpu.others if cpu else None, cpu.ours if cpu else None, load.cpus, load.threads,
                          top, during)
        return Verdict(bool(words), words)
    words = gpu_words(load.gpu_others, load.gpu_utilization, gpu_threshold)
    if load.sched_delay_s is not None and load.wall_s > 0:
        share = load.sched_delay_s / load.wall_s
        if share > SCHED_SHARE:
            named = top_words(top, ours=False) or top_words(top, ours=True)
            words.append(f"our launching thread waited for a core {share:.0%} of the time {during}"
                         + (f" ({named})" if named else ""))
    elif load.sched_delay_s is None:  # no schedstat: what the CPU times (or the load average) can say
        words += no_schedstat_words(cpu.others if cpu else None, cpu.ours if cpu else None, load.cpus,
                                    load.load_average, top, during)
    return Verdict(bool(words), words)


def gpu_words(others: Optional[Sequence[GpuProcess]], utilization: Optional[float],
              threshold: Optional[float]) -> list[str]:
    """The GPU half: another process holds it (above `threshold`% utilization, where one is asked)."""
    if not others or (threshold is not None and (utilization is None or utilization <= threshold)):
        return []
    names = ", ".join(p.label or f"pid {p.pid}" for p in others[:3])
    return [f"{len(others)} other process{'es' if len(others) != 1 else ''} used the GPU: {names}"]


def cpu_words(others: Optional[float], ours: Optional[float], cpus: int, threads: int,
              top: list[BusyProcess], during: str = "during timing") -> list[str]:
    """The CPU rule (any CPU beyond the cores our threads leave idle and half a core, whoever used
    it), in words that tell others from our own: []: not busy."""
    others, ours = others or 0.0, ours or 0.0
    if others + ours <= busy_threshold(cpus, threads):
        return []
    parts = []
    if others >= ours or others > 100.0 * BUSY_MARGIN:
        named = top_words(top, ours=False)
        parts.append(f"other processes used {others:.0f}% CPU {during} ({cpus} CPUs)" + (f": {named}" if named else ""))
    if ours > 100.0 * BUSY_MARGIN or not parts:
        named = top_words(top, ours=True)
        parts.append(f"our own processes used {ours:.0f}% CPU {during}" + (f": {named}" if named else ""))
    return parts


def no_schedstat_words(others: Optional[float], ours: Optional[float], cpus: int, load: Optional[float],
                       top: list[BusyProcess], during: str) -> list[str]:
    """The CUDA rule's CPU half where the launching thread's wait cannot be read: []: not busy."""
    if others is not None or ours is not None:
        used = (others or 0.0) + (ours or 0.0)
        if used <= no_schedstat_threshold(cpus):
            return []
        named = top_words(top, ours=False) or top_words(top, ours=True)
        return [f"processes beside us used {used:.0f}% CPU {during} ({cpus} CPUs: no core was left for "
                "our launching thread)" + (f": {named}" if named else "")]
    if load_over_cores(load, cpus):  # no CPU times at all: a minute's average is all there is
        return [f"the load average was {load:.1f} on {cpus} CPUs {during}"]
    return []


# --- the busy-GPU wait -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Busy:
    """Why a measurement waits for the GPU: its index, utilization, and who holds it beside us."""
    gpu: int
    utilization: float
    others: tuple[GpuProcess, ...]

    @property
    def who(self) -> str:
        """`python train.py, 92%`: who uses the GPU, and how much."""
        more = f" and {len(self.others) - 1} more" if len(self.others) > 1 else ""
        return f"{self.others[0].label}{more}, {self.utilization:.0f}%"

    @property
    def text(self) -> str:
        """`GPU busy (python train.py, 92%)`: the status bar's words."""
        return f"GPU busy ({self.who})"


def gpu_busy(readings: Sequence[GpuReading], *, threshold: float, device: Union[int, str],
             own_pids: set[int]) -> Optional[Busy]:
    """Before measuring: the rule on the GPU the measurements use (`device`: an NVML index or a
    UUID), with the wait's `threshold`. Our own worker on it is no reason to wait (it is idle while
    the measurement waits); a GPU nobody else holds is free, whatever its reading; a GPU not in the
    readings is not ours to judge (free)."""
    for gpu in readings:
        if gpu.index != device and gpu.uuid != device:
            continue
        others = tuple(p for p in gpu.processes if p.pid not in own_pids)
        load = Load(gpu_others=others, gpu_utilization=gpu.utilization)
        return Busy(gpu.index, gpu.utilization, others) if decide("cuda", load, gpu_threshold=threshold).busy else None
    return None


# --- words ----------------------------------------------------------------------------------------

def process_label(cmdline: Sequence[str], name: str) -> str:
    """`python train.py` from `['/usr/bin/python3.11', 'train.py', '--lr', '3e-4']`: the program's
    name and its first argument that is not an option (for `-m`, the module)."""
    if not cmdline:
        return name
    words = [os.path.basename(cmdline[0]) or name]
    rest = list(cmdline[1:])
    while rest:
        word = rest.pop(0)
        if word == "-m" and rest:
            words += ["-m", rest[0]]
            break
        if word == "-c":  # the code itself says nothing short
            words.append("-c")
            break
        if not word.startswith("-"):
            words.append(os.path.basename(word))
            break
    return " ".join(words)


def top_words(top: list[BusyProcess], ours: bool, n: int = 3) -> str:
    """`pytest 95%, chromium 60%`: the busiest of `top` on one side (ours or others')."""
    named = [t for t in top if t.ours == ours][:n]
    return ", ".join(f"{_label(t)} {t.cpu_percent:.0f}%" for t in named)


def _label(t: BusyProcess) -> str:
    cmd = t.cmdline or ""
    if "compile_worker" in cmd:
        return "Inductor compile worker"
    return process_label(cmd.split(), t.name or "?") if cmd else (t.name or f"pid {t.pid}")


# --- a stored reading (the JSON `contention`) ---------------------------------------------------------

def _stored_words(contention: ContentionReport) -> list[str]:
    """A reading from before the rule (no `busy` of its own), judged by today's CPU rule and its GPU count."""
    pct = contention.other_cpu_percent
    load = Load(cpus=contention.cpus or 1, threads=contention.threads or 1,
                cpu=CpuUse(pct, 0.0) if pct is not None else None)
    words = decide("cpu", load).why
    gpu = contention.gpu_other_processes
    if gpu:
        words.append(f"{gpu} other process{'es' if gpu != 1 else ''} used the GPU")
    return words


def busy_words(contention: Optional[ContentionReport]) -> Optional[str]:
    """`machine busy: other processes used 180% CPU during timing (2 CPUs): pytest 95%, chromium 60%`
    when the rule fired; a reading from before the rule had its own verdict (`busy`) by today's CPU rule.
    None read: None."""
    if contention is None:
        return None
    if contention.busy is not None:
        words = contention.why
        return ("machine busy: " + " and ".join(words)) if contention.busy and words else None
    words = _stored_words(contention)
    return ("machine busy: " + " and ".join(words)) if words else None


def contention_busy(contention: Optional[ContentionReport]) -> bool:
    """The stored reading's verdict: its own `busy` where the rule gave one, else today's rule on it."""
    if contention is None:
        return False
    if contention.busy is not None:
        return contention.busy
    return bool(_stored_words(contention))
