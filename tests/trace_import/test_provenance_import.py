"""`compile-lens import` gives each imported line its kernels: a real TORCH_TRACE made with Inductor's
provenance tracking on (tests/data/provenance_trace/train_tiny_lm.log.gz: `INDUCTOR_PROVENANCE=1
TORCH_TRACE=dir python train_tiny_lm.py --steps 2` on the CPU, trimmed to the records the import reads
by benchmarks/recordings/provenance_trace.py), imported onto a workspace copy at another path. In-process:
no torch, no compile (the trace was made once)."""

from __future__ import annotations

import gzip
import json
import re
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compile_lens.cli.trace_import import import_text
from compile_lens.render.imported_json import import_json
from compile_lens.trace_import.report import import_trace
from paths import DATA

LOG = DATA / "provenance_trace" / "train_tiny_lm.log.gz"
PROGRAM = DATA / "trace_programs" / "train_tiny_lm.py"


def line(text: str) -> int:
    return next(i for i, t in enumerate(PROGRAM.read_text().splitlines(), 1) if text in t)


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    base = tmp_path_factory.mktemp("provenance")
    ws, trace = base / "ws", base / "trace"
    ws.mkdir()
    trace.mkdir()
    shutil.copy(PROGRAM, ws / "train_tiny_lm.py")
    text = gzip.decompress(LOG.read_bytes()).decode()
    (trace / "dedicated_log_torch_trace_0.log").write_text(text)
    result = import_trace(str(trace), str(ws))
    return {"ws": ws, "text": text, "imported": result, "doc": import_json(result)}


def lines_of(doc, ws):
    entry = next(e for e in doc["files"] if e["path"] == str(ws / "train_tiny_lm.py"))
    (target,) = [t for t in entry["targets"] if t["name"] == "forward"]
    return {ln["line"]: ln for ln in target["lines"]}


def output_code_kernels(text: str) -> set[str]:
    """The kernels the log's `inductor_output_code` payloads define (`cpp_fused_x_0 = async_compile.cpp_pybinding(...)`)."""
    return set(re.findall(r"^\t(\w+) = async_compile\.\w+\(", text, flags=re.M))


def test_each_line_names_its_kernels_without_times(imported):
    lines = lines_of(imported["doc"], imported["ws"])
    linear = lines[line("x = x + self.mlp(self.norm(x))")]
    kinds = {(k["name"], k["backward"]) for k in linear["kernels"]}
    assert ("extern_kernels.addmm", False) in kinds and ("extern_kernels.mm", True) in kinds, kinds
    for ln in lines.values():
        assert ln["eager_us"] is None and ln["compiled_us"] is None
        assert all(k["us"] is None for k in ln["kernels"])
    assert lines[line("logits = self.head(x / scale)")]["kernels"]  # the frame after the break too


def test_fused_partners_name_each_other_and_the_kernels_are_the_output_codes(imported):
    lines = lines_of(imported["doc"], imported["ws"])
    defined = output_code_kernels(imported["text"])
    named = {k["name"] for ln in lines.values() for k in ln["kernels"] if k["kind"] == "generated"}
    assert named and named <= defined, named - defined
    for n, ln in lines.items():
        for k in ln["kernels"]:
            if k["kind"] == "generated" and k["lines"] > 1:
                partners = {r["line"] for r in ln["fused_with"]}
                others = {m for m, other in lines.items() if m != n and any(
                    o["name"] == k["name"] and o["compile_id"] == k["compile_id"] and o["backward"] == k["backward"]
                    for o in other["kernels"])}
                assert others <= partners and len(others) == k["lines"] - 1, (n, k, others, partners)


def test_the_text_shows_each_line_and_a_trace_without_provenance_has_none(imported, tmp_path):
    text = import_text(imported["imported"], str(imported["ws"]))
    assert f"train_tiny_lm.py:{line('x = x + self.mlp(self.norm(x))')}: extern_kernels.addmm (extern)" in text
    assert "(backward, extern)" in text
    plain = tmp_path / "trace"
    plain.mkdir()
    kept, skip = [], False
    for raw in imported["text"].splitlines(keepends=True):
        if not raw.startswith("\t"):
            skip = "inductor_provenance_tracking" in raw
        if not skip:
            kept.append(raw)
    (plain / "dedicated_log_torch_trace_0.log").write_text("".join(kept))
    doc = import_json(import_trace(str(plain), str(imported["ws"])))
    assert all(t["lines"] == [] for e in doc["files"] for t in e["targets"])
    json.dumps(doc)  # still JSON


def test_a_backward_graph_names_only_its_own_kernels(imported):
    """Inductor's globals make each lazily compiled backward graph's artifacts also list the backward
    graphs compiled before it (`kernel_provenance`, stale entries): 0/0's backward is compiled after
    1/0's (the backward runs the frames in reverse), so without dropping them the lines after the
    break would get kernels of compile 0/0."""
    lines = lines_of(imported["doc"], imported["ws"])
    brk = line("scale = x.abs().max().item()")
    for n, ln in lines.items():  # the break's own line starts the resumed frame: it may have both
        frames = {k["compile_id"].split("/")[0] for k in ln["kernels"]}
        assert n == brk or frames == ({"0"} if n < brk else {"1"}), (n, ln["kernels"])


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=30), inner, max_size=4),
                    max_leaves=12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stacks=JSON, maps=JSON)
def test_provenance_payloads_of_any_shape_never_raise(imported, tmp_path_factory, stacks, maps):
    """The two artifacts' payloads replaced by any JSON (a newer torch, a cut log): the import still
    gives the rest, and any line it gives is well formed."""
    out, replace = [], None
    for raw in imported["text"].splitlines(keepends=True):
        if not raw.startswith("\t"):
            replace = (stacks if "kernel_stack_traces" in raw else maps if "node_mappings" in raw else None)
            out.append(raw)
            if replace is not None:
                out.append("\t" + json.dumps(replace) + "\n")
        elif replace is None:
            out.append(raw)
    trace = tmp_path_factory.mktemp("fuzz")
    (trace / "dedicated_log_torch_trace_0.log").write_text("".join(out))
    doc = import_json(import_trace(str(trace), str(imported["ws"])))
    for e in doc["files"]:
        for t in e["targets"]:
            for ln in t["lines"]:
                assert isinstance(ln["line"], int) and all(isinstance(k["name"], str) for k in ln["kernels"])
