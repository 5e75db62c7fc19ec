"""Discovery from a statement-by-statement parse (the big-file path) equals a whole-file parse."""

from __future__ import annotations

import ast
import sys

import pytest

from compile_lens.discovery import discover, fingerprint
from compile_lens.discovery.statements import StatementParser, Superseded
from paths import REPO

sys.path.insert(0, str(REPO))  # the benchmark modules (benchmarks/)
from benchmarks.editor.typing_latency import busy_file  # noqa: E402

SOURCE = busy_file(600)


def summary(found):
    return ([(t.name, t.kind, t.line, t.column, t.end_line, t.compile_options, repr(t.inputs))
             for t in found.targets],
            [(s.target, s.line, s.column, s.end_line, s.end_column, s.options) for s in found.call_sites],
            found.fingerprint)


def edits():
    lines = SOURCE.split("\n")
    middle = next(i for i, row in enumerate(lines) if "h = self.norm(x)" in row and i > 200)
    typed = lines[:middle] + [lines[middle] + "  # x"] + lines[middle + 1:]
    entered = lines[:12] + [""] + lines[12:]
    new_class = lines + ["class Fresh(nn.Module):", "    def forward(self, x):", "        return x", ""]
    return {"typed": typed, "enter": entered, "new class": new_class}


def test_same_targets_call_sites_and_fingerprint_as_a_whole_parse():
    parser = StatementParser()
    tree, code_fp = parser.parse(SOURCE)
    assert code_fp == fingerprint(ast.parse(SOURCE))
    assert summary(discover(SOURCE, tree, code_fp)) == summary(discover(SOURCE))
    for label, lines in edits().items():  # from the cache of the first parse, as while typing
        source = "\n".join(lines)
        tree, code_fp = parser.parse(source)
        assert summary(discover(source, tree, code_fp)) == summary(discover(source)), label


def test_a_new_class_is_a_target_and_its_compile_calls_are_found():
    source = "\n".join(edits()["new class"])
    found = discover(source, *StatementParser().parse(source))
    assert "Fresh" in {t.name for t in found.targets}
    assert len(found.call_sites) == source.count("torch.compile(model)")


def test_a_syntax_error_gives_none_and_the_next_parse_recovers():
    parser = StatementParser()
    parser.parse(SOURCE)
    broken = SOURCE.replace("h = self.norm(x)", "h = self.norm((x)", 1)
    assert parser.parse(broken) is None
    assert parser.parse(SOURCE)[1] == fingerprint(ast.parse(SOURCE))


def test_a_keystroke_stops_a_running_parse():
    with pytest.raises(Superseded):
        StatementParser().parse(SOURCE, cancelled=lambda: True)
