"""Why a cache missed, from torch's own FX-graph cache-key details (torch_text/cache_keys.py): two
fresh processes against the same Inductor cache folder, one Inductor config option changed between
them, and the miss named by that option."""

from __future__ import annotations

import tempfile

import pytest

from compile_lens.protocol import InputRecipe, TargetSpec, Timing
from compile_lens.torch_text import cache_keys
from compile_lens.worker.measure.compile.cold import run_child
from compile_lens.worker.measure.compile.cold_job import ColdJob, ColdResult
from compile_lens.worker.measure.timing.verdict import _metric_notes
from paths import FIXTURES

ROOT = FIXTURES / "remote"
MODEL = str(ROOT / "linear2.py")  # library GEMMs only: no C++ kernel to build in each of the three processes
SPEC = TargetSpec("Linear2", "module", 20, inputs=InputRecipe("directive", "(torch.randn(16, 32),)"))


def _compile(cache_dir: str) -> ColdResult:
    job = ColdJob(MODEL, str(ROOT), SPEC, "cpu", "default", ["forward"], False, ["compile"], 60.0, "a compile")
    return run_child(job, cache_dir=cache_dir, timeout=600)


@pytest.fixture(scope="module")
def two_runs():
    """The same forward compiled twice against one cache folder; the second with size_asserts off."""
    with tempfile.TemporaryDirectory(prefix="compile-lens-inductor-") as cache_dir:
        first = _compile(cache_dir)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("TORCHINDUCTOR_SIZE_ASSERTS", "0")  # read by torch._inductor.config at import
            second = _compile(cache_dir)
        again = _compile(cache_dir)  # the first's config: hits, nothing to explain
    return first, second, again


@pytest.mark.slow
def test_a_changed_inductor_option_is_named_as_the_reason_of_the_miss(two_runs):
    first, second, again = two_runs
    assert [k["state"] for k in first.fx_keys] == ["miss"]  # an empty folder: the graph is compiled
    assert second.cache["misses"] > 0 and [k["state"] for k in second.fx_keys] == ["miss"]
    assert cache_keys.reasons(first.fx_keys, second.fx_keys) == [
        "Inductor config option `size_asserts` (True → False)"]
    # the same config as the first: a hit, and no reason to give
    assert [k["state"] for k in again.fx_keys] == ["hit"]
    assert cache_keys.reasons(first.fx_keys, again.fx_keys) == []


@pytest.mark.slow
def test_the_key_components_are_torchs_own(two_runs):
    first, _, _ = two_runs
    names = {line.split("] ", 1)[1].split(":", 1)[0].split("[", 1)[0] for line in first.fx_keys[0]["components"]}
    assert {"gm", "inductor_config", "torch_version", "system_info"} <= names, names


def test_the_warm_compile_note_says_why_it_missed():
    t = Timing(eager_ms=1.0, compiled_ms=1.0, speedup=1.0, eager_iqr_ms=0.0, compiled_iqr_ms=0.0)
    why = cache_keys.reason_words(["Inductor config option `size_asserts` (True → False)"])
    [note] = _metric_notes(t, {"hits": 1, "misses": 1}, why)
    assert note.startswith("warm compile: Inductor's caches missed 1 time(s)")
    assert note.endswith("; its cache key differed in Inductor config option `size_asserts` (True → False)")


def test_the_differing_parts_are_named_in_the_users_words():
    written = ["[aaa] gm: GraphModule()", "[bbb] torch_version: <bytes>", "[ccc] system_info[device]: {'name': 'A100'}",
               "[ddd] inductor_config[max_autotune]: False"]
    missed = ["[aaa] gm: GraphModule()", "[bbX] torch_version: <bytes>", "[ccX] system_info[device]: {'name': 'H100'}",
              "[ddd] inductor_config[max_autotune]: False"]
    assert cache_keys.differences(written, missed) == [
        "device/GPU and compiler ({'name': 'A100'} → {'name': 'H100'})", "torch version"]
