"""`compile-lens check` with a remote cache, end to end, with a real `redis-server` (the
`redis_url` fixture of conftest.py): the environment's (or the flag's) address → job → worker → JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from compile_lens.cli.common import settings_for
from compile_lens.cli.main import build_parser
from paths import FIXTURES

MODEL = str(FIXTURES / "remote" / "linear2_forward.py")  # forward only, library GEMMs only: the fewest compiles


@pytest.mark.slow
def test_check_measures_with_the_remote_cache_the_environment_turns_on(redis_url, tmp_path):
    """The environment's whole path: the CLI reads it (the worker's own environment never has it,
    `lanes.worker_env`), the job carries it, the worker's JSON has warm_remote (its own result cache)."""
    host, port = redis_url.removeprefix("redis://").split(":")
    env = dict(os.environ, COMPILE_LENS_CACHE_DIR=str(tmp_path / "cache"), TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE="1",
               TORCHINDUCTOR_REDIS_HOST=host, TORCHINDUCTOR_REDIS_PORT=port)
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "check", MODEL, "--format", "json", "--no-recompiles",
                           "--max-seconds", "5", "--with", "warm_remote", "-q"],
                          cwd=str(FIXTURES / "remote"), capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    [target] = [t for f in json.loads(done.stdout)["files"] for t in f["targets"] if t["name"] == "linear2_forward"]
    bench = target["benchmark"]
    assert bench["compile_s"]["warm_remote"] > 0 and bench["warm_cache"]["remote"]["fx_graph"]["hits"] > 0, bench


def test_the_flag_sets_the_remote_cache_and_a_wrong_one_says_what_to_write(capsys):
    args = build_parser().parse_args(["check", MODEL, "--remote-cache", "redis://cache.lan:6380"])
    assert settings_for(args, [MODEL], str(FIXTURES / "remote")).remote_cache == "redis://cache.lan:6380"
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["check", MODEL, "--remote-cache", "cache.lan:6380"])
    assert exited.value.code == 2 and "redis://HOST:PORT" in capsys.readouterr().err
