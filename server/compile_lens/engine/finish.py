"""The findings' last touches before they are shown outside the editor: what `# compile-lens: ignore`
comments silence is dropped, and messages written for the editor are put in the terminal's words.
The CLI and the MCP server apply it to `check`'s reports; the editor does both its own way."""

from __future__ import annotations

import dataclasses
from typing import Optional

from ..protocol import Benchmark, FileReport, Problem
from ..render import findings as fnd
from ..render.cli_output import cli_words


def lines_of(path: str, cache: dict[str, list[str]]) -> list[str]:
    if path not in cache:
        try:
            with open(path, encoding="utf-8") as fh:
                cache[path] = fh.read().splitlines()
        except (OSError, UnicodeDecodeError):
            cache[path] = []
    return cache[path]


def apply_ignores(reports: list[FileReport]) -> None:
    """Drop what `# compile-lens: ignore` comments silence; findings span their whole line."""
    cache: dict[str, list[str]] = {}
    for report in reports:
        kept = []
        for f in report.findings:
            lines = lines_of(f.path, cache)
            if not fnd.suppressed(f, lines):
                kept.append(fnd.whole_line(f, lines))
        report.findings = kept


def reword(reports: list[FileReport]) -> None:
    """Messages written for the editor, in the terminal's words (`raise --timeout`)."""
    def problem(p: Optional[Problem]) -> Optional[Problem]:
        return p and dataclasses.replace(p, message=cli_words(p.message) or p.message, hint=cli_words(p.hint))

    def measured(b: Optional[Benchmark]) -> Optional[Benchmark]:
        return b and dataclasses.replace(b, notes=[cli_words(n) or n for n in b.notes],
                                         verdict=cli_words(b.verdict) or b.verdict)

    for report in reports:
        report.error = problem(report.error)
        report.targets = [dataclasses.replace(t, error=problem(t.error), benchmark=measured(t.benchmark))
                          for t in report.targets]
        # copies: a file's lint findings are kept by `lints` for its next lint
        report.findings = [dataclasses.replace(f, message=cli_words(f.message) or f.message)
                           for f in report.findings]


def finish(reports: list[FileReport]) -> None:
    apply_ignores(reports)
    reword(reports)
