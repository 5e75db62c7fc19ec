"""Waiting for the GPU, shared by the server (background measurements, until released by
"Measure anyway") and the CLI (`--wait-gpu SECONDS`): the rule's `gpu_busy` on each poll."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Callable, Optional

from .gpu import Reader, measured_device, own_pids
from .rule import Busy, gpu_busy

log = logging.getLogger("compile_lens")

POLL_S = 2.0  # NVML's utilization is an average over its last sample period (1/6 s to 1 s)


async def busy_now(reader: Reader, threshold: float) -> Optional[Busy]:
    """The decision for the GPU `cuda:0` is in this process's environment; a reader that fails
    says "free" (and why, in the log): a broken reading never holds measurements back."""
    try:
        readings = await asyncio.to_thread(reader.read)
    except Exception as exc:  # noqa: BLE001 - NVMLError, a bad readings file: never a reason to wait
        log.warning("cannot read the GPU's use (%s): measuring without waiting", exc)
        return None
    return gpu_busy(readings, threshold=threshold, device=measured_device(os.environ.get("CUDA_VISIBLE_DEVICES")),
                    own_pids=own_pids())


async def wait_while_busy(reader: Reader, threshold: float, *, on_busy: Callable[[Busy], None],
                          timeout: Optional[float] = None, release: Optional[asyncio.Event] = None,
                          poll_s: float = POLL_S) -> Optional[Busy]:
    """Returns once the GPU is free (None), or still busy when `timeout` seconds have passed or
    `release` is set (the last reading). `on_busy` hears every busy reading."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        busy = await busy_now(reader, threshold)
        if busy is None:
            return None
        on_busy(busy)
        left = poll_s if deadline is None else min(poll_s, deadline - time.monotonic())
        if left <= 0:
            return busy
        if release is None:
            await asyncio.sleep(left)
            continue
        try:
            await asyncio.wait_for(release.wait(), left)
            return busy
        except asyncio.TimeoutError:
            continue
