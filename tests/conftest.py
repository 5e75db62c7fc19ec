import os
import shutil
import tempfile
from pathlib import Path

import pytest

from paths import FIXTURES

# Results and Inductor caches of this run stay out of the user's ~/.cache/compile-lens: every
# server, CLI and worker the tests start inherits this (tests that need their own pass one).
os.environ.setdefault("COMPILE_LENS_CACHE_DIR", tempfile.mkdtemp(prefix="compile-lens-tests-"))


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
