"""The report's Details section: every measured target's facts the hover card leaves out
(`cards.detail_lines`), under an anchor the card's Details link opens the report at. Pure."""

from __future__ import annotations

import re
from typing import Optional

from ..protocol import FileReport
from . import progress_rows
from .cards import detail_lines
from .html_parts import _e, _slug

_SPAN = re.compile(r"(?<!\\)(`+)(.+?)\1")
_STRONG = re.compile(r"(?<!\\)\*\*(.+?)(?<!\\)\*\*")
_ESCAPED = re.compile(r"\\([\\`*_\[\]<>|#])")


def details_anchor(path: str, name: str) -> str:
    """The id of a target's details: what `compileLens.reportHtml [uri, target]` scrolls to."""
    return f"details-{_slug(path)}-{_slug(name)}"


def md_html(text: str) -> str:
    """A card bullet's markdown (code spans, bold, backslash escapes, as `cards` writes them) as HTML."""
    out, at = [], 0
    for m in _SPAN.finditer(text):
        out.append(_inline(text[at:m.start()]))
        out.append(f"<code>{_e(m.group(2).strip())}</code>")
        at = m.end()
    out.append(_inline(text[at:]))
    return "".join(out)


def _inline(text: str) -> str:
    out, at = [], 0
    for m in _STRONG.finditer(text):
        out += [_plain(text[at:m.start()]), f"<strong>{_plain(m.group(1))}</strong>"]
        at = m.end()
    return "".join(out) + _plain(text[at:])


def _plain(text: str) -> str:
    return _e(_ESCAPED.sub(r"\1", text))


def details_section(reports: list[FileReport]) -> str:
    """`<section><h2>Details</h2>`: per measured target, its card's facts as a list."""
    items = []
    for r in reports:
        for t in sorted(r.targets, key=lambda t: t.line):
            if t.benchmark is None:
                continue
            guessed = bool(t.inputs and t.inputs.source == "inferred")
            bullets = detail_lines(t, t.benchmark, guessed_inputs=guessed, rows=progress_rows.states(t))
            items.append(f'<h3 id="{details_anchor(r.path, t.name)}">{_e(t.name)}</h3><ul>'
                         + "".join(f"<li>{md_html(b.removeprefix('- '))}</li>" for b in bullets) + "</ul>")
    return '<section><h2>Details</h2>' + "".join(items) + "</section>" if items else ""


def focus_of(reports: list[FileReport], target: Optional[str]) -> Optional[str]:
    """The anchor the page opens at: `target`'s details in the first report that measured it, else
    its row in the targets table; None when no report has it."""
    for r in reports:
        for t in r.targets:
            if t.name == target:
                return details_anchor(r.path, t.name) if t.benchmark is not None else f"t-{_slug(r.path)}-{_slug(t.name)}"
    return None
