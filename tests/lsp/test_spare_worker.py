"""`worker.spare`: the trace lane keeps a warm spare worker only where the machine has cores for it
(`jobs.lanes.spare_by_default`: 4 or more), unless the setting says. The server runs pinned to one
core (`taskset -c 0`), as on a small machine: unset, one trace worker starts; asked for, a spare
starts beside it."""

from __future__ import annotations

import asyncio
import shutil

import pytest
from faults_support import worker_processes

from lsp_support import start_server, stop_server

pytestmark = pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) pins the server")


@pytest.mark.asyncio
@pytest.mark.parametrize("settings, workers", [({}, 1), ({"worker.spare": True}, 2)])
async def test_one_core_starts_no_spare_unless_asked(tmp_path, settings, workers):
    client = await start_server(tmp_path, settings=settings, wrapper=("taskset", "-c", "0"))
    try:
        # the current worker and a spare are spawned together at start-up (`WorkerSlot.warm_up`): once
        # the first is there, a spare would be too
        await worker_processes(client._server.pid, count=1, timeout=60)
        await asyncio.sleep(1.0)
        found = await worker_processes(client._server.pid, count=1, timeout=1)
        assert len(found) == workers, found
    finally:
        await stop_server(client)
