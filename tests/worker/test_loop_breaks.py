"""A break inside a loop is squiggled where torch points: at the break's own line, with its own
registry id. The loop fallback (GB7000: torch skips the whole frame the loop is in) is said in the
message and as related information on the loop's header, never in the break's place.

The lines torch names are read from torch's own `TORCH_LOGS=graph_breaks` output of the same code
(`torch.compile(backend="eager")` in a subprocess), captured here."""

from __future__ import annotations

import pytest

from compile_lens.discovery import discover
from compile_lens.discovery.inputs import resolve_inputs
from compile_lens.protocol import TargetResult
from compile_lens.render.findings import graph_break_findings
from compile_lens.worker.breaks.graph_breaks import trace_graph_breaks
from compile_lens.worker.loader import build_target, import_file
from paths import FIXTURES
from torch_log import LOOP_TARGETS, lines_torch_names

LOOPS = FIXTURES / "loops"


def _line_of(name: str, text: str) -> int:
    lines = (LOOPS / name).read_text().splitlines()
    return next(i for i, row in enumerate(lines, 1) if text in row)


@pytest.fixture(scope="module")
def torch_names() -> dict[str, set[int]]:
    return lines_torch_names(LOOPS, LOOP_TARGETS)


@pytest.fixture(scope="module")
def traced() -> dict[str, tuple[int, list]]:
    """file -> (torch's graph count, the breaks) of its target, through the worker's tracer."""
    found = {}
    for file, (cls, _) in LOOP_TARGETS.items():
        path, root = LOOPS / file, str(LOOPS)
        [spec] = [s for s in resolve_inputs(str(path), root, list(discover(path.read_text()).targets))
                  if s.name == cls]
        found[file] = trace_graph_breaks(build_target(import_file(str(path), root), spec, str(path)), root)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("file", sorted(LOOP_TARGETS))
def test_a_warning_sits_on_each_line_torch_names(file, torch_names, traced):
    graphs, breaks = traced[file]
    assert torch_names[file], "torch named no line: the fixture no longer breaks inside its loop"
    assert {b.line for b in breaks if b.path == str(LOOPS / file)} == torch_names[file]
    result = TargetResult(name=LOOP_TARGETS[file][0], kind="module", line=1, graph_breaks=breaks, graph_count=graphs)
    findings = graph_break_findings(result, str(LOOPS / file))
    assert {f.line for f in findings} == torch_names[file]
    assert len(findings) == len(breaks) == 1  # one break, one count: the loop is not a second one


LOOP_HEADERS = {"layers.py": ("for i, block in enumerate(self.layers):", "x.norm().item()"),
                "decode.py": ("while steps < self.max_new_tokens:", "next_id[0, 0].item()"),
                # the helper `expand` breaks; the loop that calls it is in `forward`
                "regulator.py": ("for batch, target in zip(x, durations):", "durations[i].item()")}


@pytest.mark.slow
@pytest.mark.parametrize("file", sorted(LOOP_TARGETS))
def test_the_break_keeps_its_id_and_says_the_loop_torch_skips(file, traced):
    header, broke = LOOP_HEADERS[file]
    [br] = traced[file][1]
    assert (br.line, br.gb_id) == (_line_of(file, broke), "GB0124")  # torch's own id, not GB7000
    assert br.loop is not None and (br.loop.gb_id, br.loop.function) == ("GB7000", "forward")
    assert br.loop.line == br.loop.end_line == _line_of(file, header)
    assert br.loop.url.endswith("/gb7000.html")
    row = (LOOPS / file).read_text().splitlines()[br.loop.line - 1]
    assert row[br.loop.column - 1:br.loop.end_column - 1] == header.rstrip(":").strip()
    [finding] = graph_break_findings(TargetResult(name=LOOP_TARGETS[file][0], kind="module", line=1,
                                                                  graph_breaks=[br]),
                                     str(LOOPS / file))
    assert (finding.code, finding.line, finding.data["gb_id"]) == ("GB0124", br.line, "GB0124")
    said = f"inside the loop at line {br.loop.line}: torch skips the whole `forward`, which runs eagerly"
    assert finding.message.splitlines()[0].endswith(" — " + said), finding.message
    assert "capture_scalar_outputs" in finding.message  # the break's own hint: what to do
    [loop] = [r for r in finding.related if r.line == br.loop.line]
    assert loop.note.startswith("GB7000: the loop this break is in")
