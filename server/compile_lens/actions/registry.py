"""Which fix family answers which finding (by code, through `codes`), which rewrites apply at the
cursor, and which resolver makes each family's edit (`data["fix"]`).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from lsprotocol import types as lsp

from .. import codes
from .directive import _resolve_directive, _still_guessed
from .disable import _disable_helper, _resolve_disable
from .dynamic import _recompile_fixes, _resolve_dynamic, _resolve_mark_dynamic
from .hatches import _hatch_fixes, _resolve_leaf, _resolve_nonstrict
from .header import _resolve_config
from .ignore import _ignore, _resolve_ignore
from .levers import _resolve_lever_keyword, _resolve_regional
from .print_logging import _log_reorder_fix, _logging_fix, _print_fix
from .scalars import _capture_scalar
from .source import QUICKFIX, REWRITE, Edit, Source, _action
from .wrap import _resolve_wrap, _wrap_candidates


def _fixes_for(src: Source, uri: str, d: lsp.Diagnostic, hatches: frozenset[str] = frozenset()) -> list[lsp.CodeAction]:
    code = str(d.code)
    data = d.data if isinstance(d.data, dict) else {}
    found: list[lsp.CodeAction] = []
    gb = data.get("gb_id") or (code if codes.is_gb_id(code) else None)
    line = d.range.start.line + 1
    if gb == codes.GB_ITEM or code == codes.ITEM:
        found += _capture_scalar(src, uri, d, line)
    if gb in (codes.GB_PRINT, codes.GB_PRINT_ARGS) or code == codes.PRINT:
        found += _print_fix(src, uri, d, line, gb, hatches)
    if gb == codes.GB_LOGGER or code == codes.LOGGING or data.get("call_site"):  # `logging.warning` breaks inside it
        found += _logging_fix(src, uri, d, line, hatches)
    if hatches and data.get("kind") == "graph_break":
        found += _log_reorder_fix(src, uri, d, line, gb, hatches)
    found += _disable_helper(src, uri, d, data, code)
    if hatches and data.get("kind") == "graph_break":
        found += _hatch_fixes(src, uri, d, data, gb, hatches)
    if data.get("kind") == "recompile":
        found += _recompile_fixes(src, uri, d, data)
    if data.get("kind") == "guessed_inputs" and data.get("text") and _still_guessed(src, str(data.get("target"))):
        found.append(_action(f"Write the guessed inputs as a directive to correct: inputs={data['text']}", QUICKFIX,
                             {"fix": "directive", "uri": uri, "target": data["target"], "text": data["text"]}, d))
    found += _ignore(src, uri, d, code)
    return found


def _rewrites_at(src: Source, uri: str, line0: int, figures: dict[str, str],
                 guesses: Optional[dict[str, Any]] = None) -> list[lsp.CodeAction]:
    line = line0 + 1
    found = src.discovery()
    modules = {t.name for t in found.targets if t.kind == "module"} if found else set()
    actions = []
    for kind, node, name in _wrap_candidates(src, line, modules):
        figure = figures.get(name) if name else None
        title = "Wrap in torch.compile" + (f" ({figure} measured)" if figure else "")
        actions.append(_action(title, REWRITE, {"fix": "wrap", "uri": uri, "what": kind, "line": node.lineno,
                                                "name": name}))
    for spec in found.targets if found else []:
        if spec.line == line and spec.inputs is not None and spec.inputs.source == "inferred":
            # a guess made after import (from a library's config) is known once the worker ran
            made = (guesses or {}).get(spec.name)
            text = spec.inputs.text or (getattr(made, "text", "") if spec.inputs.after_import else "")
            if not text:
                continue
            origin = spec.inputs.origin or (getattr(made, "origin", "") if made is not None else "")
            directive = f"inputs={text}"
            actions.append(_action(f"Write these inputs as a directive: {directive}" + (f" ({origin})" if origin else ""),
                                   REWRITE, {"fix": "directive", "uri": uri, "target": spec.name, "text": text}))
    return actions


_RESOLVERS: dict[str, Callable[[Source, dict], Optional[list[Edit]]]] = {
    "ignore": _resolve_ignore,
    "config": _resolve_config,
    "disable": _resolve_disable,
    "dynamic": _resolve_dynamic,
    "mark_dynamic": _resolve_mark_dynamic,
    "wrap": _resolve_wrap,
    "directive": _resolve_directive,
    "nonstrict": _resolve_nonstrict,
    "leaf": _resolve_leaf,
    "regional": _resolve_regional,
    "lever_keyword": _resolve_lever_keyword,
}
