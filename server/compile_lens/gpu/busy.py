"""The decision, pure: GPU readings in, "busy, because of whom" out. No NVML, no psutil here, so
every case is tested with readings written by hand (tests/test_gpu_busy.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional, Sequence, Union


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
class Busy:
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


def decide(readings: Sequence[GpuReading], *, threshold: float, device: Union[int, str],
           own_pids: set[int]) -> Optional[Busy]:
    """Busy when the GPU the measurements use (`device`: an NVML index or a UUID) runs above
    `threshold` percent while a process outside our own tree holds it. Our own worker on it is no
    reason to wait (it is idle while the measurement waits); a GPU nobody else holds is free,
    whatever its reading; a GPU not in the readings is not ours to judge (free)."""
    for gpu in readings:
        if gpu.index != device and gpu.uuid != device:
            continue
        others = tuple(p for p in gpu.processes if p.pid not in own_pids)
        if others and gpu.utilization > threshold:
            return Busy(gpu.index, gpu.utilization, others)
        return None
    return None


def measured_device(cuda_visible_devices: Optional[str]) -> Union[int, str]:
    """The NVML index or UUID of `cuda:0`, the device torch measures on: the first entry of
    CUDA_VISIBLE_DEVICES when it is set (NVML ignores that variable), else GPU 0."""
    first = (cuda_visible_devices or "").split(",")[0].strip()
    if not first:
        return 0
    return int(first) if first.isdigit() else first


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
