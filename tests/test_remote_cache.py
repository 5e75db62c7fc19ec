"""The remote cache's plain rules (compile_lens/remote_cache.py, no torch): which address a
setting, a flag or the environment names, and one that does not answer, said within the 1 s check."""

from __future__ import annotations

import time

from compile_lens import remote_cache as rc
from compile_lens.settings import Settings
from redis_server import free_port


def test_an_address_that_does_not_answer_is_measured_without_and_said():
    port = free_port()
    started = time.perf_counter()
    remote, note = rc.resolve(f"redis://127.0.0.1:{port}", {})
    assert remote is None and f"redis://127.0.0.1:{port}" in note and "measured without the remote cache" in note
    assert time.perf_counter() - started < 2 * rc.CONNECT_S
    remote, note = rc.resolve("http://cache.lan", {})
    assert remote is None and "redis://HOST:PORT" in note


def test_the_environment_names_the_cache_when_no_setting_does():
    env = {"TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "1", "TORCHINDUCTOR_REDIS_HOST": "cache.lan",
           "TORCHINDUCTOR_REDIS_PORT": "6380"}
    assert rc.from_environment(env) == rc.Remote("cache.lan", 6380, "environment")
    assert rc.from_environment({"TORCHINDUCTOR_REDIS_HOST": "cache.lan"}) is None  # no cache switched on


def test_the_setting_is_checked_where_it_is_read():
    settings, problems = Settings.from_client({"compileLens.remoteCache": "redis://cache.lan:6380"})
    assert settings.remote_cache == "redis://cache.lan:6380" and not problems
    settings, problems = Settings.from_client({"compileLens.remoteCache": "cache.lan"})
    assert settings.remote_cache is None and "redis://HOST:PORT" in problems[0]
