"""SARIF 2.1.0 for `compile-lens check --format sarif` (code scanning): one rule per code with its
title and documentation link from `codes`, one result per finding, target errors that no finding
covers. Pure: `FileReport`s in, a JSON-safe dict out."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .. import codes
from ..protocol import FileReport, Finding, GraphBreak
from .cli_output import (
    SARIF_SRCROOT,
    SOURCE,
    _first_line,
    _is_under,
    _problem_text,
    _sorted_findings,
    display_path,
    report_problems,
)

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
SARIF_LEVELS = {"error": "error", "warning": "warning", "information": "note", "hint": "note"}


def _artifact_location(path: str, cwd: str) -> dict[str, Any]:
    full = os.path.abspath(os.path.join(cwd, path))  # a relative path is taken relative to cwd
    if _is_under(full, cwd):
        return {"uri": quote(display_path(full, cwd)), "uriBaseId": SARIF_SRCROOT}
    return {"uri": Path(full).as_uri()}


def _region(line: int, column: int, end_line: int, end_column: int) -> dict[str, int]:
    start_line = max(1, line)
    start_column = max(1, column)
    end_line = max(start_line, end_line)
    end_column = max(1, end_column)
    if end_line == start_line:
        end_column = max(start_column, end_column)
    return {"startLine": start_line, "startColumn": start_column, "endLine": end_line, "endColumn": end_column}


class _Rules:
    def __init__(self, reports: list[FileReport], names: Mapping[str, str]):
        self.names = names
        self.rules: list[dict[str, Any]] = []
        self.index: dict[str, int] = {}
        self.gb_types: dict[str, GraphBreak] = {}
        for r in reports:
            for t in r.targets:
                for g in t.graph_breaks:
                    if g.gb_id and g.gb_id not in self.gb_types:
                        self.gb_types[g.gb_id] = g

    def get(self, rule_id: str, short: str, url: str | None = None, full: str | None = None) -> int:
        if rule_id not in self.index:
            rule: dict[str, Any] = {"id": rule_id, "shortDescription": {"text": short or rule_id}}
            if full:
                rule["fullDescription"] = {"text": full}
            if url:
                rule["helpUri"] = url
            self.index[rule_id] = len(self.rules)
            self.rules.append(rule)
        elif url and "helpUri" not in self.rules[self.index[rule_id]]:
            self.rules[self.index[rule_id]]["helpUri"] = url
        return self.index[rule_id]

    def for_finding(self, f: Finding) -> int:
        g = self.gb_types.get(f.code)
        if g is not None:
            return self.get(f.code, g.gb_type, f.url or g.url, g.explanation or None)
        return self.get(f.code, self.names.get(f.code) or codes.title(f.code) or _first_line(f.message),
                        f.url or codes.href(f.code))


def render_sarif(reports: list[FileReport], *, tool_version: str, cwd: str,
                 information_uri: str | None = None,
                 rule_names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run: a result per finding (and per file or target error that no
    finding shows), paths relative to `cwd` under `%SRCROOT%` when they lie under it.

    A rule's short description is the graph-break type for `GB` ids, else `rule_names[code]` when
    given, else the code's title in `codes`, else the first finding's first message line; its
    helpUri the finding's link, else the code's documentation (`codes.href`)."""
    rules = _Rules(reports, rule_names or {})
    results: list[dict[str, Any]] = []
    for report in reports:
        for f in _sorted_findings(report.findings):
            index = rules.for_finding(f)
            result: dict[str, Any] = {
                "ruleId": f.code, "ruleIndex": index, "level": SARIF_LEVELS.get(f.severity, "warning"),
                "message": {"text": f.message or f.code},
                "locations": [{"physicalLocation": {
                    "artifactLocation": _artifact_location(f.path or report.path, cwd),
                    "region": _region(f.line, f.column, f.end_line, f.end_column)}}],
            }
            if f.related:
                result["relatedLocations"] = [
                    {"id": i, "message": {"text": s.note or (f"called from {s.name}" if i < len(f.related) - 1 else f"in {s.name}")},
                     "physicalLocation": {"artifactLocation": _artifact_location(s.path, cwd),
                                          "region": {"startLine": max(1, s.line)}}}
                    for i, s in enumerate(f.related)
                ]
            if f.predicted:
                result["properties"] = {"predicted": True}
            results.append(result)
        for ppath, pline, problem in report_problems(report):
            rule_id = f"{problem.kind}-error"
            index = rules.get(rule_id, f"Compile Lens could not analyse this ({problem.kind})")
            results.append({
                "ruleId": rule_id, "ruleIndex": index, "level": "error",
                "message": {"text": _problem_text(problem)},
                "locations": [{"physicalLocation": {
                    "artifactLocation": _artifact_location(ppath, cwd),
                    "region": {"startLine": max(1, pline), "startColumn": 1}}}],
            })
    driver: dict[str, Any] = {"name": SOURCE, "version": tool_version}
    if information_uri:
        driver["informationUri"] = information_uri
    driver["rules"] = rules.rules
    root_uri = Path(os.path.abspath(cwd)).as_uri().rstrip("/") + "/"
    run = {
        "tool": {"driver": driver},
        "originalUriBaseIds": {SARIF_SRCROOT: {"uri": root_uri}},
        "results": results,
    }
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}
