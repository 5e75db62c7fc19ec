"""Background measurements wait here while other processes use the GPU above
`compileLens.gpuBusyThreshold` (the status bar says who); "Measure anyway" lets them all go.
No NVML on this machine, or measurements on the CPU: nothing waits and nothing is said."""

from __future__ import annotations

import asyncio
import logging
from typing import Optional, Protocol

from ..busy.gpu import Reader, open_reader
from ..busy.rule import Busy
from ..busy.wait import wait_while_busy
from ..settings import Settings

log = logging.getLogger("compile_lens")

MEASURE_ANYWAY = "compileLens.measureAnyway"


class Server(Protocol):
    """What the gate uses of the server (lsp/state.py's CompileLensServer, which holds the gate):
    its settings, the status bar and the views. Typed here, so the gate does not import the state."""

    settings: Settings

    def status(self, state: str, detail: str = "", lane: Optional[str] = None) -> None: ...

    def refresh_views(self) -> None: ...


class GpuGate:
    def __init__(self) -> None:
        self.reader: Optional[Reader] = None
        self.opened = False  # NVML is started at the first measurement, off the event loop, not at server start
        self.waiting = 0
        self.busy: dict[str, Busy] = {}  # uri -> why its measurement waits (the lens says it)
        self._release: Optional[asyncio.Event] = None  # set by "Measure anyway"; one per group of waiters

    async def wait(self, ls: Server, uri: str, what: str) -> None:
        """Returns when the GPU is free for measuring `uri` (`what`: its file name), or when released."""
        if ls.settings.device == "cpu":
            return
        if not self.opened:
            self.reader, self.opened = await asyncio.to_thread(open_reader), True
        if self.reader is None:
            return
        if self._release is None:
            self._release = asyncio.Event()
        said: list[Busy] = []

        def on_busy(busy: Busy) -> None:
            if not said:
                log.info("measuring %s waits: %s (run 'Compile Lens: Measure anyway' to measure now)", what, busy.text)
            first = self.busy.get(uri) != busy
            said[:] = [busy]
            self.busy[uri] = busy
            ls.status("waiting", busy.text, lane="deep")
            if first:  # a lens that says "waiting: GPU busy (…)" instead of "measuring"
                ls.refresh_views()

        self.waiting += 1
        try:
            still = await wait_while_busy(self.reader, ls.settings.gpu_busy_threshold, on_busy=on_busy,
                                          release=self._release)
        except asyncio.CancelledError:  # the file changed or closed while it waited
            ls.status("idle", lane="deep")
            raise
        finally:
            self.waiting -= 1
            if self.busy.pop(uri, None) is not None:
                ls.refresh_views()
        if still is not None:
            log.info("measuring %s although the GPU is busy (%s): asked to measure anyway", what, still.text)
        elif said:
            log.info("the GPU is free again: measuring %s", what)
        if said:  # the status bar stops saying "waiting" at once, not at the measurement's first progress
            ls.status("benchmarking", what, lane="deep")

    def measure_anyway(self) -> int:
        """Lets every waiting measurement go; returns how many were waiting."""
        waiting, release = self.waiting, self._release
        self._release = None
        if release is not None:
            release.set()
        return waiting
