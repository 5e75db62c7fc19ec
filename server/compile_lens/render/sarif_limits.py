"""GitHub code scanning's limits on an upload, kept before the file is written: an upload over a
hard limit is rejected whole, so a log that would exceed one is cut — deterministically, the most
severe results first — and the caller says what was cut.

The limits (GitHub's "SARIF results exceed one or more limits"): 20 runs per file, 25,000 results
per run (5,000 shown, by severity), 1,000 locations per result, 10 MB gzip-compressed per upload."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from typing import Any

_SEVERITY_ORDER = {"error": 0, "warning": 1, "note": 2, "none": 3}


@dataclass(frozen=True)
class Limits:
    results_per_run: int = 25_000
    locations_per_result: int = 1_000
    gzip_bytes: int = 10 * 1000 * 1000


GITHUB = Limits()


def gzip_size(log: dict[str, Any]) -> int:
    return len(gzip.compress(json.dumps(log, indent=2).encode("utf-8"), mtime=0))


def fit(log: dict[str, Any], limits: Limits = GITHUB) -> list[str]:
    """Cut `log` (in place) to `limits`; each cut said as a sentence (none: it fits as it is)."""
    said: list[str] = []
    for run in log.get("runs", []):
        results = run.get("results", [])
        for result in results:
            for field in ("locations", "relatedLocations"):
                if len(result.get(field, [])) > limits.locations_per_result:
                    result[field] = result[field][:limits.locations_per_result]
                    said.append(f"a {result['ruleId']} result's {field} cut to {limits.locations_per_result}")
        # stable: equal severities keep the report's order (by file, then line)
        ranked = sorted(results, key=lambda r: _SEVERITY_ORDER.get(r.get("level", "warning"), 1))
        if len(ranked) > limits.results_per_run:
            said.append(f"{len(ranked)} results are more than code scanning takes in one run "
                        f"({limits.results_per_run}): kept the {limits.results_per_run} most severe")
            ranked = ranked[:limits.results_per_run]
        run["results"] = _in_order(results, ranked)
        # the size: drop the least severe until the compressed log fits (halving, then one by one)
        if gzip_size(log) > limits.gzip_bytes:
            total = len(ranked)
            low, high = 0, total
            while low < high:  # the most results that fit
                middle = (low + high + 1) // 2
                run["results"] = _in_order(results, ranked[:middle])
                if gzip_size(log) <= limits.gzip_bytes:
                    low = middle
                else:
                    high = middle - 1
            run["results"] = _in_order(results, ranked[:low])
            said.append(f"the log is over code scanning's {limits.gzip_bytes // 1_000_000} MB (gzip) "
                        f"upload limit: kept the {low} most severe of {total} results")
    return said


def _in_order(results: list[dict[str, Any]], chosen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ids = {id(r) for r in chosen}
    return [r for r in results if id(r) in ids]
