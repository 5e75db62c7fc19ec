import os
import shutil
import tempfile
from pathlib import Path

import pytest

from paths import FIXTURES

# Results and Inductor caches of this run stay out of the user's ~/.cache/compile-lens: every
# server, CLI and worker the tests start inherits this (tests that need their own pass one). Under
# pytest-xdist the controller sets it before it starts its workers, so they share the one folder
# (sqlite and Inductor's cache take concurrent writers), as one process's tests would.
os.environ.setdefault("COMPILE_LENS_CACHE_DIR", tempfile.mkdtemp(prefix="compile-lens-tests-"))

# OpenMP threads that wait at a barrier sleep rather than spin, in every torch process the tests
# start: on the loaded 2-core test machine a thread whose partner is descheduled spun through its
# wait and charged it to the thread's CPU clock (an eager call measured at 5× its CPU time), the
# clock the rounds count under a test's declared quiet (a first look then ended at 5 or 7 of its 8
# rounds), and every spin is CPU the suite's other processes wait for. Users' runs keep torch's default.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


# Test modules that share a session fixture, by the group that runs them on one xdist worker (so
# the fixture is built once): any other module is a group of its own.
SHARED_FIXTURE = {
    "tests/cli/test_cli_sarif.py": "examples_traced",  # tests/cli/conftest.py
    "tests/cli/test_shard.py": "examples_traced",
}


def xdist_group(nodeid: str) -> str:
    module = nodeid.split("::")[0]
    return SHARED_FIXTURE.get(module, module)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`pytest -n N --dist loadscope` (make pytest): a module's tests run on one worker, so its
    fixtures (a server, a traced model) are built once. xdist's own `loadgroup` marks do not take
    on pytest 9 (xdist 3.8 renames `item._nodeid`, which pytest 9 no longer reads), so the groups
    are the modules, and SHARED_FIXTURE."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    return ByModule(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: the heaviest groups (most `slow` tests, then most tests) first, so the
    controller (`--no-loadscope-reorder`) hands them out first and no worker is left with a long
    compile at the end. A run without xdist keeps the files' order."""
    if not hasattr(config, "workerinput"):
        return
    cost: dict[str, tuple[int, int]] = {}
    for item in items:
        slow, count = cost.get(xdist_group(item.nodeid), (0, 0))
        cost[xdist_group(item.nodeid)] = (slow + (item.get_closest_marker("slow") is not None), count + 1)
    items.sort(key=lambda item: (-cost[xdist_group(item.nodeid)][0], -cost[xdist_group(item.nodeid)][1]))  # stable


@pytest.fixture
def workspace(tmp_path: Path):
    """A fresh copy of a fixture folder: tests may edit its files."""

    def make(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(FIXTURES / name, target)
        return target

    return make


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A real `redis-server` on 127.0.0.1 (tests/redis_server.py), its `redis://127.0.0.1:PORT`; stopped after the module."""
    from redis_server import redis_server

    with redis_server(str(tmp_path_factory.mktemp("redis"))) as url:
        yield url

