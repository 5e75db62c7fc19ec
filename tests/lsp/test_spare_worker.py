"""`worker.spare`: the trace lane keeps a warm spare worker only where the machine has cores for it
(`jobs.lanes.spare_by_default`: 4 or more), unless the setting says. The server runs pinned to one
core (`taskset -c 0`), as on a small machine: unset, one trace worker starts; asked for, a spare
starts beside it."""

from __future__ import annotations

import asyncio
import shutil

import pytest
from faults_support import worker_processes

from lsp_support import start_server, stop_server, wait_status

pytestmark = pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) pins the server")


@pytest.mark.asyncio
@pytest.mark.parametrize("settings, workers", [({}, 1), ({"worker.spare": True}, 2)])
async def test_one_core_starts_no_spare_unless_asked(tmp_path, settings, workers):
    client = await start_server(tmp_path, settings=settings, wrapper=("taskset", "-c", "0"))
    try:
        # the current worker and a spare are asked for together at start-up (`WorkerSlot.warm_up`) and
        # forked as soon as the worker template has imported torch (on one loaded core: up to minutes):
        # once the server says it is ready (the current worker's hello), a spare would be there too
        await wait_status(client, lambda s: s.state == "idle" and s.detail == "ready", timeout=300)
        await asyncio.sleep(1.0)
        found = await worker_processes(client._server.pid, count=1, timeout=1)
        assert len(found) == workers, found
    finally:
        await stop_server(client)
