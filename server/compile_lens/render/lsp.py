"""Findings → LSP diagnostics (lsprotocol types). Pure: no server state."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp

from .. import codes
from ..protocol import Finding

SOURCE = "Compile Lens"
SEVERITY = {
    "error": lsp.DiagnosticSeverity.Error,
    "warning": lsp.DiagnosticSeverity.Warning,
    "information": lsp.DiagnosticSeverity.Information,
    "hint": lsp.DiagnosticSeverity.Hint,
}


def uri_of(path: str) -> str:
    return Path(path).resolve().as_uri()


def to_range(line: int, column: int, end_line: int, end_column: int) -> lsp.Range:
    """1-based records → 0-based LSP positions."""
    return lsp.Range(lsp.Position(max(line - 1, 0), max(column - 1, 0)),
                     lsp.Position(max(end_line - 1, 0), max(end_column - 1, 0)))


def to_diagnostic(finding: Finding) -> lsp.Diagnostic:
    related = [
        lsp.DiagnosticRelatedInformation(
            location=lsp.Location(uri_of(frame.path), to_range(frame.line, 1, frame.line, 1)),
            message=frame.note or (f"called from `{frame.name}`" if i else f"traced from `{frame.name}`"),
        )
        for i, frame in enumerate(finding.related)
    ]
    href = finding.url or codes.href(finding.code)  # a break's own page, else the code's documentation
    message = finding.message + (" (predicted)" if finding.predicted and "predicted" not in finding.message else "")
    return lsp.Diagnostic(
        range=to_range(finding.line, finding.column, finding.end_line, finding.end_column),
        message=message,
        severity=SEVERITY.get(finding.severity, lsp.DiagnosticSeverity.Warning),
        code=finding.code,
        code_description=lsp.CodeDescription(href=href) if href else None,
        source=SOURCE,
        related_information=related or None,
        data=finding.data or None,
    )
