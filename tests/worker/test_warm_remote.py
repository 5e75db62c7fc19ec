"""Inductor's remote cache (Redis) in the measurement, with a real `redis-server` (the `redis_url`
fixture of conftest.py): the cold compile stays cold whatever the user's environment says, and the
warm-remote compile is served by the cache. One measurement of a small model is shared by the tests of
its figures: two bias-free Linears (linear2.py), whose forward and training step Inductor compiles,
caches and serves as any model's, with no C++ kernel to build (what the tests check is the cache's
bookkeeping, not kernels)."""

from __future__ import annotations

import tempfile

import pytest

from compile_lens import remote_cache as rc
from compile_lens.jobs.lanes import worker_env
from compile_lens.protocol import InputRecipe, TargetSpec
from compile_lens.worker.measure.compile.cold import _child_env, run_child
from compile_lens.worker.measure.compile.cold_job import ColdJob, ColdResult
from paths import FIXTURES
from redis_server import key_count

ROOT = FIXTURES / "remote"
MODEL = str(ROOT / "linear2.py")
SPEC = TargetSpec("Linear2", "module", 20, inputs=InputRecipe("directive", "(torch.randn(16, 32),)"))


def test_the_cold_child_has_remote_caches_and_pgo_off_whatever_the_user_set(monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "1")
    monkeypatch.setenv("TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE", "1")
    monkeypatch.setenv("TORCHINDUCTOR_REDIS_URL", "redis://cache.lan:6379")
    monkeypatch.setenv("TORCH_DYNAMO_AUTOMATIC_DYNAMIC_REMOTE_PGO", "1")
    monkeypatch.setenv("TORCH_COMPILE_JOB_ID", "team-run-7")  # what lets torch keep a PGO profile
    env = _child_env("/tmp/x")
    # unset, not "0": torch hashes some of these into its cache keys (None != False)
    assert not set(env) & set(rc.REMOTE_SWITCHES + rc.PGO_SWITCHES + rc.REDIS_ADDRESS)
    assert not set(worker_env(None)) & set(rc.REMOTE_SWITCHES + rc.PGO_SWITCHES + rc.REDIS_ADDRESS)
    served = _child_env("/tmp/x", rc.Remote("127.0.0.1", 7000, "setting"))
    assert served["TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE"] == "1" and served["TORCHINDUCTOR_REDIS_PORT"] == "7000"
    assert "TORCHINDUCTOR_BUNDLED_AUTOTUNE_REMOTE_CACHE" not in served and "TORCH_COMPILE_JOB_ID" not in served


def _cold_child(cache_dir: str) -> ColdResult:
    job = ColdJob(MODEL, str(ROOT), SPEC, "cpu", "default", ["train", "forward"], False, ["compile"], 60.0, "cold")
    return run_child(job, cache_dir=cache_dir, timeout=600)


@pytest.fixture(scope="module")
def measured(redis_url):
    from compile_lens.worker.loader import build_target, import_file
    from compile_lens.worker.measure.run.benchmark import run_benchmark

    target = build_target(import_file(MODEL, str(ROOT)), SPEC, MODEL)
    result = run_benchmark(target, path=MODEL, root=str(ROOT), device="cpu", max_seconds=5,
                           remote_cache=redis_url)
    return result


@pytest.mark.slow
def test_warm_remote_is_served_by_redis_alone(measured, redis_url):
    # Served, not faster: how much it saves is a figure (benchmarks/cache/remote_cache.py, BENCHMARKS.md),
    # and on two loaded cores a single fresh-process compile swings by more than the saving.
    remote = measured.warm_cache["remote"]
    assert measured.compile_s.warm_remote > 0 and measured.compile_s.cold > 0
    assert key_count(redis_url) > 0  # the fill compile wrote to the real server
    # every FX-graph and AOTAutograd lookup of the fresh process (empty local folder) hit Redis
    assert remote["fx_graph"]["hits"] > 0 and remote["fx_graph"]["misses"] == 0, remote
    assert remote["aot_autograd"]["hits"] > 0 and remote["aot_autograd"]["misses"] == 0, remote
    assert remote["autotune"] == "n/a"  # GPU kernels only: not 0 on the CPU
    assert not [n for n in measured.notes if n.startswith("remote cache:")], measured.notes


@pytest.mark.slow
def test_the_cold_compile_stays_cold_with_a_warm_redis_in_the_users_environment(measured, redis_url, monkeypatch):
    port = redis_url.rsplit(":", 1)[1]
    for name in rc.REMOTE_SWITCHES:
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("TORCHINDUCTOR_REDIS_HOST", "127.0.0.1")
    monkeypatch.setenv("TORCHINDUCTOR_REDIS_PORT", port)
    with tempfile.TemporaryDirectory(prefix="compile-lens-inductor-") as cache_dir:
        cold = _cold_child(cache_dir)
    assert cold.remote_cache["fx_graph"] == {"hits": 0, "misses": 0}  # never asked the warm Redis
    assert cold.cache["hits"] == 0
    ratio = cold.compile_s["train"] / measured.compile_s.cold
    print(f"cold with a warm Redis in the environment / cold with an empty one: {ratio:.2f}")
