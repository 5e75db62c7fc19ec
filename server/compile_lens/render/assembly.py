"""One file's findings, assembled the same way for the editor and the CLI.

Static lints, what the source alone says about each target (no inputs, a directive that cannot be
read), and the trace results' findings; a trace break or a cleanly traced target clears the lints
that predicted it (`findings.merge_with_lints`). A break inside a helper in another workspace file
is reported there too; a library's own file gets none.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Iterable, Optional

from ..protocol import Benchmark, Finding, TargetResult, TargetSpec
from . import findings as fnd


def in_workspace(path: str, root: str) -> bool:
    """Under the root and not an installed package's file (a venv inside the project)."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return (real == top or real.startswith(top.rstrip(os.sep) + os.sep)) and \
        not any(part in ("site-packages", "dist-packages") for part in real.split(os.sep))


def static_findings(path: str, targets: Iterable[TargetSpec], directive_errors: Iterable, *,
                    runs: bool = True) -> list[Finding]:
    """What the source says without torch: targets that cannot run as written, unreadable directives."""
    found = [f for t in targets for f in fnd.static_target_findings(t, path, runs=runs)]
    return found + [Finding(path, e.line, 1, e.line, 1, "warning", fnd.CODE_DIRECTIVE, e.message)
                    for e in directive_errors]


def traced_findings(results: Iterable[TargetResult], path: str, root: str,
                    benchmarks: Optional[dict[str, Benchmark]] = None) -> tuple[list[Finding], dict[str, list[Finding]]]:
    """The results' findings in this file, and by path those in other workspace files (helpers).
    `benchmarks`: measurements kept apart from the results (accuracy warnings, compile costs)."""
    here: list[Finding] = []
    elsewhere: dict[str, list[Finding]] = {}
    for result in results:
        if benchmarks and result.name in benchmarks:
            result = dataclasses.replace(result, benchmark=benchmarks[result.name])
        for f in fnd.target_findings(result, path):
            if fnd.same_file(f.path, path):
                here.append(f)
            elif in_workspace(f.path, root):  # a library's own line: a related location only
                elsewhere.setdefault(f.path, []).append(f)
    return here, elsewhere


def covered_lines(specs: Iterable[TargetSpec], results: dict[str, TargetResult]) -> list[tuple[int, int]]:
    """The lines of the targets that traced cleanly: a lint there predicted a break that is not."""
    return [(t.line, t.end_line or t.line) for t in specs
            if t.name in results and results[t.name].status == "ok"]


def file_findings(lints: list[Finding], statics: list[Finding], traced: list[Finding],
                  covered: list[tuple[int, int]]) -> list[Finding]:
    """Lints the trace did not settle, the trace's own findings, then the static ones."""
    return fnd.merge_with_lints(lints, traced, covered) + statics
