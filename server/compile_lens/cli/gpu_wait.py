"""`--wait-gpu SECONDS` (check, report): before a file's measurements, wait while other
processes use the GPU above `gpuBusyThreshold`, at most SECONDS over the whole run; then measure
anyway and say so. Without the flag the CLI never waits."""

from __future__ import annotations

import argparse
import time
from typing import Optional

from ..busy.gpu import open_reader
from ..busy.rule import Busy
from ..busy.wait import wait_while_busy
from ..settings import Settings
from .common import say


def add_wait_gpu_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait-gpu", type=float, default=None, metavar="SECONDS",
                        help="before measuring, wait up to SECONDS (in all) while other processes use the GPU "
                             "above gpuBusyThreshold (needs nvidia-ml-py); default: never wait")


class GpuWait:
    def __init__(self, seconds: Optional[float], settings: Settings, *, quiet: bool) -> None:
        self.left = seconds
        self.threshold = settings.gpu_busy_threshold
        self.quiet = quiet
        self.reader = open_reader() if seconds is not None and settings.device != "cpu" else None
        if seconds is not None and settings.device != "cpu" and self.reader is None and not quiet:
            say("--wait-gpu: cannot read the GPU's use here (no nvidia-ml-py, or no NVIDIA driver); not waiting")

    async def __call__(self, what: str) -> None:
        """Before measuring `what` (a file name)."""
        if self.reader is None or self.left is None:
            return
        started, said = time.monotonic(), []

        def on_busy(busy: Busy) -> None:
            if not said and not self.quiet:
                say(f"waiting: {busy.text} before measuring {what} (up to {max(self.left or 0, 0):.0f} s)")
            said.append(busy)

        still = await wait_while_busy(self.reader, self.threshold, on_busy=on_busy, timeout=max(self.left, 0.0))
        self.left -= time.monotonic() - started
        if still is not None:  # said even with --quiet: the figures were taken on a shared GPU
            say(f"the GPU is still busy ({still.who}) after --wait-gpu: "
                f"measuring {what} anyway; its figures may read slower than on an idle GPU")
