"""Where GPU readings come from: NVML through `nvidia-ml-py` (import `pynvml`) when it is installed
and a driver answers, else nowhere (never wait; the timing says GPU use by others is unknown).
Process names come from psutil; which GPU is ours to judge from CUDA_VISIBLE_DEVICES.

`COMPILE_LENS_GPU_READINGS=<file.json>` replaces NVML with a JSON file read again on every poll;
the tests use it to play a busy GPU through the real server (format in `FileReader`).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Optional, Protocol, Union

import psutil

from ..processes import our_pids
from .rule import GpuProcess, GpuReading, process_label

log = logging.getLogger("compile_lens")

READINGS_ENV = "COMPILE_LENS_GPU_READINGS"


class Reader(Protocol):
    def read(self) -> list[GpuReading]: ...


def label_of(pid: int) -> str:
    try:
        proc = psutil.Process(pid)
        return process_label(proc.cmdline(), proc.name())
    except psutil.Error:  # another container's pid, or gone since NVML listed it
        return f"pid {pid}"


def own_pids() -> set[int]:
    """This process and everything it started (the workers, their compile children) and, in a worker,
    the CLI or server that started it with its other workers (`processes.our_pids`)."""
    try:
        return our_pids()
    except psutil.Error:
        return {os.getpid()}


def measured_device(cuda_visible_devices: Optional[str]) -> Union[int, str]:
    """The NVML index or UUID of `cuda:0`, the device torch measures on: the first entry of
    CUDA_VISIBLE_DEVICES when it is set (NVML ignores that variable), else GPU 0."""
    first = (cuda_visible_devices or "").split(",")[0].strip()
    if not first:
        return 0
    return int(first) if first.isdigit() else first


class NvmlReader:
    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml

    def read(self) -> list[GpuReading]:
        nvml, readings = self.nvml, []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid = nvml.nvmlDeviceGetUUID(handle)
            pids: dict[int, None] = {}  # a process with compute and graphics contexts, once
            for running in (nvml.nvmlDeviceGetComputeRunningProcesses, nvml.nvmlDeviceGetGraphicsRunningProcesses):
                pids.update(dict.fromkeys(p.pid for p in running(handle)))
            readings.append(GpuReading(
                index, uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
                tuple(GpuProcess(pid, label_of(pid)) for pid in pids)))
        return readings


class FileReader:
    """`{"gpus": [{"index": 0, "uuid": "GPU-…", "utilization": 92, "pids": [1234]}]}`: the pids'
    labels come from psutil, as NVML's do."""

    def __init__(self, path: str) -> None:
        self.path = path

    def read(self) -> list[GpuReading]:
        with open(self.path, encoding="utf-8") as f:
            data = json.load(f)
        return [GpuReading(int(g["index"]), str(g.get("uuid", "")), float(g["utilization"]),
                           tuple(GpuProcess(int(pid), label_of(int(pid))) for pid in g.get("pids", [])))
                for g in data["gpus"]]


def open_reader() -> Optional[Reader]:
    """The reader for this machine, or None: no `nvidia-ml-py`, or no driver to answer it."""
    return open_reader_why()[0]


def open_reader_why() -> tuple[Optional[Reader], str]:
    """The reader, or None and why not, in words (the timing says what it could not read)."""
    path = os.environ.get(READINGS_ENV)
    if path:
        return FileReader(path), ""
    try:
        import pynvml  # nvidia-ml-py: optional, feature-detected
    except ImportError:
        return None, "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, _DriverNotLoaded, …: no GPU to share
        log.debug("NVML is installed but did not start (%s): measurements never wait for the GPU", exc)
        return None, f"NVML did not start ({type(exc).__name__})"
    return NvmlReader(pynvml), ""


_READER: Optional[tuple[Optional[Reader], str]] = None  # opened once per process, at the first timing


def _reader() -> tuple[Optional[Reader], str]:
    global _READER
    if _READER is None:
        _READER = open_reader_why()
    return _READER


def gpu_others() -> tuple[Optional[tuple[GpuProcess, ...]], str]:
    """Processes outside our family with a context on the GPU we time on, or None and why not (no NVML)."""
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
            return tuple(p for p in held if p.pid not in mine), ""
    return (), ""
