"""The levers phase in the result cache (`jobs/cache.py`): stored with the figures' key once the
phase is done, read back as `Lever`s; a phase with an inconclusive or unmeasured lever (a busy
machine, the budget) is not stored: it says nothing about the code."""

from __future__ import annotations

from compile_lens.jobs.cache import ResultCache, TargetKeys, read_levers, write_levers
from compile_lens.protocol import LEVERS, Lever, TargetResult, with_phase

KEYS = TargetKeys("t", "s", "b")


def _result(*verdicts: str) -> TargetResult:
    levers = [Lever("regional", "each Block compiled once", v, compile_s={"before": 40.0, "after": 12.0})
              for v in verdicts]
    return with_phase(TargetResult("Stack", "module", 3, levers=levers), LEVERS, "done")


def test_a_done_phase_is_stored_and_read_back(tmp_path):
    cache = ResultCache(str(tmp_path))
    assert read_levers(cache, KEYS) is None
    assert write_levers(cache, KEYS, _result("better"))
    [lever] = read_levers(cache, KEYS)
    assert (lever.lever, lever.verdict, lever.compile_s) == ("regional", "better", {"before": 40.0, "after": 12.0})
    assert write_levers(cache, KEYS, _result())  # none applied: an answer too
    assert read_levers(cache, KEYS) == []


def test_inconclusive_unmeasured_or_unfinished_is_not_stored(tmp_path):
    cache = ResultCache(str(tmp_path))
    assert not write_levers(cache, KEYS, _result("better", "inconclusive"))
    assert not write_levers(cache, KEYS, _result("not measured"))
    assert not write_levers(cache, KEYS, TargetResult("Stack", "module", 3))  # the phase did not run
    assert read_levers(cache, KEYS) is None


def test_the_trace_entry_never_keeps_the_levers(tmp_path):
    """A result written as it streams (`ResultWriter`) carries its levers: only their own entry keeps them."""
    from compile_lens.jobs.cache import read_trace, write_trace

    cache = ResultCache(str(tmp_path))
    result = with_phase(_result("better"), "trace", "done")
    assert write_trace(cache, KEYS, result, "class Stack: pass\n")
    assert read_trace(cache, KEYS, "class Stack: pass\n", "/w/blocks.py").levers == []
