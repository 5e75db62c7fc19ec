"""The levers phase in the result cache (`jobs/cache.py`): stored with the figures' key once the
phase is done, read back as `Lever`s; a phase with an inconclusive or unmeasured lever (a busy
machine, the budget) is not stored: it says nothing about the code."""

from __future__ import annotations

from compile_lens.jobs.cache import (
    SCHEMA_VERSION,
    ResultCache,
    TargetKeys,
    read_levers,
    write_levers,
)
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


def test_a_cache_of_the_dict_shaped_timings_is_dropped_saying_why(tmp_path, caplog):
    """Schema 4 stored a lever's forward as {"before", "after", "ci", …}: read as a `Timing` it would fail
    on the user's model, so the whole cache is dropped, with the change named in the log."""
    _old_cache(tmp_path, 4, {"lever": "regional", "change": "", "verdict": "better",
                             "forward": {"before": 0.5, "after": 0.4}})
    with caplog.at_level("WARNING", logger="compile_lens.jobs.cache"):
        assert read_levers(ResultCache(str(tmp_path)), KEYS) is None
    assert f"holds schema 4, this version reads {SCHEMA_VERSION} (a lever's timings are Timing records" in caplog.text


def test_a_cache_of_the_dict_shaped_contention_is_dropped_saying_why(tmp_path, caplog):
    """Schema 5 stored a timing's machine load as a dict of the fields read (`contention`); it is a
    `ContentionReport` record now, so a schema-5 cache is dropped, the change named in the log."""
    _old_cache(tmp_path, 5, {"lever": "regional", "change": "", "verdict": "better",
                             "forward": {"eager_ms": 0.5, "compiled_ms": 0.4, "speedup": 1.25,
                                         "busy": "machine busy: …",
                                         "contention": {"busy": True, "why": ["…"], "cpus": 2}}})
    with caplog.at_level("WARNING", logger="compile_lens.jobs.cache"):
        assert read_levers(ResultCache(str(tmp_path)), KEYS) is None
    assert f"holds schema 5, this version reads {SCHEMA_VERSION} (a timing's machine load (contention) is a typed " \
           "record)" in caplog.text


def _old_cache(tmp_path, schema: int, lever: dict) -> None:
    """A result cache as schema `schema` wrote it, holding one lever for KEYS (the table as it was)."""
    import json
    import sqlite3

    db = sqlite3.connect(str(tmp_path / "results.sqlite"))
    db.execute("CREATE TABLE results (key TEXT PRIMARY KEY, kind TEXT NOT NULL, value TEXT NOT NULL, source TEXT,"
               " created REAL NOT NULL)")
    db.execute("INSERT INTO results VALUES (?, 'levers', ?, NULL, 0)", (KEYS.levers, json.dumps([lever])))
    db.execute(f"PRAGMA user_version={schema}")
    db.commit()
    db.close()
