"""Issue 24.2: SARIF that code scanning can track — every result fingerprinted from its stable key
(a line moved above it keeps it), every run categorised (`automationDetails.id`), rules whose help
reads without a link, and GitHub's limits kept by a deterministic cut."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from compile_lens.render import sarif_limits
from compile_lens.render.sarif import FINGERPRINT
from paths import DATA, REPO

ROOT = REPO
EXAMPLES = ROOT / "examples"
SCHEMA = json.loads((DATA / "sarif-schema-2.1.0.json").read_text())


def run_cli(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONSAFEPATH": "1", "COMPILE_LENS_CACHE_DIR": str(cache)})


@pytest.fixture(scope="module")
def examples_sarif(examples_traced):
    """examples/ as SARIF, from the session's traced cache (conftest: traced once for these and the
    shard tests)."""
    _, cache = examples_traced
    done = run_cli("check", "examples", "--no-benchmark", "--no-recompiles", "--format", "sarif", cwd=ROOT,
                   cache=cache)
    assert "tracing" not in done.stderr, done.stderr  # read from the cache
    return json.loads(done.stdout), cache


def test_every_result_is_fingerprinted_and_the_run_categorised(examples_sarif):
    log, _ = examples_sarif
    jsonschema.validate(log, SCHEMA)
    (run,) = log["runs"]
    assert run["automationDetails"] == {"id": "compile-lens/all/"}
    assert run["results"]
    prints = [r["partialFingerprints"][FINGERPRINT] for r in run["results"]]
    assert len(prints) == len(set(prints)), "equal keys are told apart by their occurrence"
    assert all(p.split(":")[1].isdigit() for p in prints)
    for rule in run["tool"]["driver"]["rules"]:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["help"]["text"] and rule["help"]["markdown"]
        assert rule.get("helpUri", "https://").startswith("https://"), rule  # never a file:// link
    gb = [r for r in run["tool"]["driver"]["rules"] if r["id"].startswith("GB")]
    assert gb and all(r["helpUri"].startswith("https://") for r in gb)


def test_a_line_moved_above_a_finding_keeps_its_fingerprint(tmp_path):
    project, cache = tmp_path / "p", tmp_path / "cache"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    source = (EXAMPLES / "item_scale.py").read_text()
    (project / "item_scale.py").write_text(source)

    def fingerprints() -> dict[str, int]:
        done = run_cli("check", ".", "--no-benchmark", "--no-recompiles", "--format", "sarif", "-q",
                       "--no-cache", cwd=project, cache=cache)
        results = json.loads(done.stdout)["runs"][0]["results"]
        return {r["partialFingerprints"][FINGERPRINT]: r["locations"][0]["physicalLocation"]["region"]["startLine"]
                for r in results}

    before = fingerprints()
    (project / "item_scale.py").write_text('"""Moved down by this docstring."""\n\nimport os  # noqa\n' + source)
    after = fingerprints()
    assert before and set(after) == set(before)
    assert all(after[p] == before[p] + 3 for p in before)


def _log(levels: list[str], related: int = 0) -> dict:
    results = [{"ruleId": f"R{i}", "level": level, "message": {"text": "x" * 50},
                "locations": [], **({"relatedLocations": [{"id": j} for j in range(related)]} if related else {})}
               for i, level in enumerate(levels)]
    return {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "t"}}, "results": results}]}


def test_a_log_over_the_limits_is_cut_most_severe_first_and_said():
    log = _log(["note", "warning", "error", "note", "error"])
    said = sarif_limits.fit(log, sarif_limits.Limits(results_per_run=3))
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["R1", "R2", "R4"]  # in the report's order
    assert said and "5 results" in said[0] and "3 most severe" in said[0]
    assert sarif_limits.fit(log, sarif_limits.Limits(results_per_run=3)) == []  # it fits now: nothing said
    many = _log(["warning"], related=5)
    assert sarif_limits.fit(many, sarif_limits.Limits(locations_per_result=2))
    assert len(many["runs"][0]["results"][0]["relatedLocations"]) == 2


def test_a_log_over_the_size_limit_keeps_the_most_that_fit():
    log = _log(["note"] * 40 + ["error"] * 5)
    limit = sarif_limits.gzip_size(_log(["error"] * 10))
    said = sarif_limits.fit(log, sarif_limits.Limits(gzip_bytes=limit))
    kept = log["runs"][0]["results"]
    assert sarif_limits.gzip_size(log) <= limit and said
    assert {r["level"] for r in kept[:5]} >= {"error"} and sum(r["level"] == "error" for r in kept) == 5
    again = _log(["note"] * 40 + ["error"] * 5)
    sarif_limits.fit(again, sarif_limits.Limits(gzip_bytes=limit))
    assert again == log  # deterministic
