"""What the CLI tests share: `examples/` traced once per session (breaks only) into a result cache
of its own, which the SARIF and shard tests then read (a cached run starts no torch process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from paths import REPO


@pytest.fixture(scope="session")
def examples_traced(tmp_path_factory):
    """(`check examples --no-benchmark --no-recompiles --format json`'s document, its cache folder).
    Tests only read the cache: a run they make from it must find every file there."""
    cache = tmp_path_factory.mktemp("examples-cache")
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "check", "examples", "--no-benchmark",
                           "--no-recompiles", "--format", "json", "-q"], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONSAFEPATH": "1", "COMPILE_LENS_CACHE_DIR": str(cache)})
    assert done.stdout, done.stderr
    return json.loads(done.stdout), cache
