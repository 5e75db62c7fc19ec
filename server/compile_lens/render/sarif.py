"""SARIF 2.1.0 for `compile-lens check --format sarif` (code scanning): one rule per code with its
title and its documentation as text (`codes.doc_section`: it reads without any link), one result per
finding with a fingerprint of its stable key (`render.keys`), target errors that no finding covers.
`FileReport`s in, a JSON-safe dict out (the findings' files are read for their lines' text)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .. import codes
from ..protocol import FileReport, Finding, GraphBreak
from . import keys
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
FINGERPRINT = "compileLens/v1"  # partialFingerprints' key: a new version when the key's fields change
WORKER_KINDS = ("crash", "timeout", "memory", "exit")


def automation_id(shard: str | None = None) -> str:
    """The run's category for code scanning: one per shard, so shards' uploads do not replace each other."""
    return f"compile-lens/{shard or 'all'}/"


def _is_web(url: str | None) -> bool:
    return bool(url) and url.startswith(("https://", "http://"))  # type: ignore[union-attr]


def _plain(markdown: str) -> str:
    """The help's text form: the markdown without its heading marks and code fences."""
    rows = [r for r in markdown.splitlines() if not r.startswith("```")]
    return "\n".join(r.lstrip("#").strip() if r.startswith("#") else r for r in rows).strip()


def _gb_help(g: GraphBreak) -> str:
    parts = [f"**{g.gb_type}**" if g.gb_type else "", g.explanation]
    if g.hints:
        parts.append("\n".join(f"- Hint: {h}" for h in g.hints))
    if _is_web(g.url):
        parts.append(f"torch's page for this break: {g.url}")
    return "\n\n".join(p for p in parts if p)


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

    def get(self, rule_id: str, short: str, url: str | None = None, full: str | None = None,
            help_markdown: str | None = None) -> int:
        """The rule's index; made on first use with its descriptions and help (code scanning shows
        them beside each alert); `helpUri` only for a page a browser can open."""
        if rule_id not in self.index:
            short = short or rule_id
            help_markdown = help_markdown or short
            rule: dict[str, Any] = {
                "id": rule_id, "shortDescription": {"text": short}, "fullDescription": {"text": full or short},
                "help": {"text": _plain(help_markdown), "markdown": help_markdown}}
            if _is_web(url):
                rule["helpUri"] = url
            self.index[rule_id] = len(self.rules)
            self.rules.append(rule)
        elif _is_web(url) and "helpUri" not in self.rules[self.index[rule_id]]:
            self.rules[self.index[rule_id]]["helpUri"] = url
        return self.index[rule_id]

    def for_finding(self, f: Finding) -> int:
        g = self.gb_types.get(f.code)
        if g is not None:
            return self.get(f.code, g.gb_type, f.url or g.url, g.explanation or None, _gb_help(g))
        doc = codes.doc_section(f.code)
        return self.get(f.code, self.names.get(f.code) or codes.title(f.code) or _first_line(f.message),
                        f.url or codes.web_href(f.code), _doc_summary(doc), doc)

    def for_problem(self, kind: str) -> int:
        code = codes.WORKER if kind in WORKER_KINDS else codes.IMPORT if kind == "import" else codes.TARGET
        doc = codes.doc_section(code)
        return self.get(f"{kind}-error", f"Compile Lens could not analyse this ({kind})", None,
                        _doc_summary(doc), doc)


def _doc_summary(doc: str | None) -> str | None:
    """A code's entry without its heading, up to its first blank line: what the code means."""
    if not doc:
        return None
    body = doc.split("\n", 1)[1] if doc.startswith("#") and "\n" in doc else doc
    return " ".join(body.split("\n\n")[0].split()) or None


def _fingerprints(fields: dict[str, str], seen: dict[str, int]) -> dict[str, str]:
    """The stable key's hash, with its occurrence (1, 2, …) among results whose keys are equal."""
    base = keys.fingerprint(fields)
    seen[base] = seen.get(base, 0) + 1
    return {FINGERPRINT: f"{base}:{seen[base]}"}


def render_sarif(reports: list[FileReport], *, tool_version: str, cwd: str,
                 information_uri: str | None = None,
                 rule_names: Mapping[str, str] | None = None, shard: str | None = None) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run: a result per finding (and per file or target error that no
    finding shows), paths relative to `cwd` under `%SRCROOT%` when they lie under it; each result's
    `partialFingerprints` from its stable key, the run's `automationDetails.id` from `shard`.

    A rule's short description is the graph-break type for `GB` ids, else `rule_names[code]` when
    given, else the code's title in `codes`, else the first finding's first message line; its help
    the code's entry in docs/codes.md (a GB id's: torch's explanation and hints); its helpUri only a
    web page (torch's page of a GB id)."""
    rules = _Rules(reports, rule_names or {})
    results: list[dict[str, Any]] = []
    lines = keys.LineCache()
    seen: dict[str, int] = {}
    for report in reports:
        for f in _sorted_findings(report.findings):
            index = rules.for_finding(f)
            path = f.path or report.path
            result: dict[str, Any] = {
                "ruleId": f.code, "ruleIndex": index, "level": SARIF_LEVELS.get(f.severity, "warning"),
                "message": {"text": f.message or f.code},
                "locations": [{"physicalLocation": {
                    "artifactLocation": _artifact_location(path, cwd),
                    "region": _region(f.line, f.column, f.end_line, f.end_column)}}],
                "partialFingerprints": _fingerprints(keys.identity(f, cwd, lines(path)), seen),
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
            index = rules.for_problem(problem.kind)
            fields = {"path": keys.relative_path(ppath, cwd), "code": rule_id,
                      "line_text": keys.line_text(lines(ppath), pline), "problem": problem.kind}
            results.append({
                "ruleId": rule_id, "ruleIndex": index, "level": "error",
                "message": {"text": _problem_text(problem)},
                "locations": [{"physicalLocation": {
                    "artifactLocation": _artifact_location(ppath, cwd),
                    "region": {"startLine": max(1, pline), "startColumn": 1}}}],
                "partialFingerprints": _fingerprints(fields, seen),
            })
    driver: dict[str, Any] = {"name": SOURCE, "version": tool_version}
    if information_uri:
        driver["informationUri"] = information_uri
    driver["rules"] = rules.rules
    root_uri = Path(os.path.abspath(cwd)).as_uri().rstrip("/") + "/"
    run = {
        "tool": {"driver": driver},
        "automationDetails": {"id": automation_id(shard)},
        "originalUriBaseIds": {SARIF_SRCROOT: {"uri": root_uri}},
        "results": results,
    }
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}
