"""lsp/published: the JSON kept per diagnostic. Each publish equals encoding every finding afresh
(the LSP tests check the same through the real server, edit after edit); here, the cases one by
one: a duplicate published once, a silenced one left out, a finding without columns re-placed when
its line's text changes, a kept finding object reused only while its line is the same."""

from __future__ import annotations

import dataclasses
import json

from pygls.protocol import default_converter

from compile_lens.lsp.published import EncodedDiagnostics, params_json
from compile_lens.protocol import Finding, Frame
from compile_lens.render import findings as fnd
from compile_lens.render.lsp import to_diagnostic

CONVERTER = default_converter()
PATH = "/work/m.py"


def fresh(found: list[Finding], lines: list[str]) -> list[dict]:
    """What `_send` published before diagnostics were kept: every finding converted again."""
    out, seen = [], set()
    for f in found:
        f = fnd.whole_line(dataclasses.replace(f), lines)
        place = (f.line, f.column, f.code, f.message)
        if place in seen or fnd.suppressed(f, lines):
            continue
        seen.add(place)
        out.append(CONVERTER.unstructure(to_diagnostic(f)))
    return out


def published(encoded: EncodedDiagnostics, found: list[Finding], lines: list[str]) -> list[dict]:
    return json.loads(params_json("file:///work/m.py", 3, encoded.encode(found, lines, CONVERTER)))["diagnostics"]


def test_each_publish_equals_encoding_every_finding_afresh():
    lines = ["import torch", "    print(x)", "# compile-lens: inputs=(", "y = x.item()"]
    item = Finding(PATH, 4, 5, 4, 13, "warning", "CL102", "`.item()` will break", predicted=True,
                   related=[Frame(PATH, 2, "forward")], data={"kind": "item"})
    printed = Finding(PATH, 2, 5, 2, 13, "warning", "CL101", "print()", data={"statement": [2, 5, 2, 13]})
    directive = Finding(PATH, 3, 1, 3, 1, "warning", "CL004", "cannot read this directive")  # no columns
    encoded = EncodedDiagnostics()
    found = [item, printed, dataclasses.replace(printed), directive]  # the print twice: published once
    assert published(encoded, found, lines) == fresh(found, lines)
    assert len(published(encoded, found, lines)) == 3
    assert directive.column == directive.end_column == 1  # the caller's finding is not changed

    lines[2] = "    " + lines[2] + "  "  # the directive's line indented: its range follows the text
    assert published(encoded, found, lines) == fresh(found, lines)
    lines[1] += "  # compile-lens: ignore"  # the same finding objects, their line silenced
    assert published(encoded, found, lines) == fresh(found, lines)
    assert len(published(encoded, found, lines)) == 2
    moved = [dataclasses.replace(item, line=5, end_line=5)]  # a line added above: another key
    assert published(encoded, moved, lines + ["y = x.item()"]) == fresh(moved, lines + ["y = x.item()"])


def test_params_leave_out_a_version_they_do_not_have():
    assert json.loads(params_json("file:///a.py", None, [])) == {"uri": "file:///a.py", "diagnostics": []}
    assert json.loads(params_json("file:///a.py", 0, ['{"message": "m"}']))["version"] == 0


def test_the_kept_key_covers_every_field_of_a_finding_and_of_its_frames():
    """`_key` lists Finding's fields by hand (it runs per finding per keystroke): a field added to
    Finding or Frame and left out of it would publish a kept diagnostic with the old value."""
    from compile_lens.lsp.published import _key

    base = Finding(PATH, 3, 1, 3, 5, "warning", "GB0124", "m", url="u", data={"a": 1},
                   related=[Frame(PATH, 1, "f", note="n")])
    changed = {int: 99, str: "changed", bool: True}
    for field in dataclasses.fields(Finding):
        if field.name == "related":
            continue
        value = getattr(base, field.name)
        other = {"a": 2} if isinstance(value, dict) else changed.get(type(value), "changed")
        assert other != value
        assert _key(dataclasses.replace(base, **{field.name: other}), "x") != _key(base, "x"), field.name
    frame = base.related[0]
    for field in dataclasses.fields(Frame):
        value = getattr(frame, field.name)
        other = changed.get(type(value), "changed")
        moved = dataclasses.replace(base, related=[dataclasses.replace(frame, **{field.name: other})])
        assert _key(moved, "x") != _key(base, "x"), f"related.{field.name}"
    assert _key(base, "y") != _key(base, "x")  # and the line's text
