"""The CLI's output formats (text, JSON, SARIF) and exit code, from hand-built records."""

from __future__ import annotations

import json

import jsonschema
import pytest

from compile_lens import codes
from compile_lens.protocol import (
    Benchmark,
    CompileSeconds,
    Errors,
    FileReport,
    Finding,
    Frame,
    GraphBreak,
    InputRecipe,
    PeakMemory,
    Problem,
    Recompile,
    TargetResult,
    Timing,
)
from compile_lens.render.cli_output import exit_code, render_json, render_text
from compile_lens.render.sarif import render_sarif
from paths import DATA

ROOT = "/ws"
SCHEMA_PATH = DATA / "sarif-schema-2.1.0.json"
GB_URL = "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0124.html"
GB_TYPE = "Unsupported Tensor.item() call with capture_scalar_outputs=False"
GB_EXPLANATION = "Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False."
GB_HINTS = ["Set `torch._dynamo.config.capture_scalar_outputs = True` or `export TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS=1` to include these operations in the captured graph."]


def _reports() -> list[FileReport]:
    item = f"{ROOT}/examples/item.py"
    helper = f"{ROOT}/examples/helpers.py"
    mlp = f"{ROOT}/examples/mlp.py"
    steps = f"{ROOT}/examples/steps.py"
    broken = f"{ROOT}/examples/broken.py"

    # A .item() break inside a helper called from forward: 2-frame stack, outermost first.
    stack = [Frame(item, 11, "forward"), Frame(helper, 4, "scale_of")]
    gb = GraphBreak(
        path=helper, line=4, column=12, end_line=4, end_column=25, gb_id="GB0124", gb_type=GB_TYPE,
        explanation=GB_EXPLANATION, hints=GB_HINTS, url=GB_URL,
        reason=f"Unsupported Tensor.item() call with capture_scalar_outputs=False\n  Explanation: {GB_EXPLANATION}\n"
               f"\n For more details about this graph break, please visit: {GB_URL}",
        stack=stack)
    gb_message = f"{GB_TYPE}: {GB_EXPLANATION}\nHint: {GB_HINTS[0]}"
    item_net = TargetResult(
        name="ItemNet", kind="module", line=5,
        inputs=InputRecipe(source="directive", text="(torch.randn(8, 16),)", line=4),
        graph_count=2, graph_breaks=[gb])
    item_report = FileReport(
        path=item, targets=[item_net],
        findings=[
            # the break, seen from forward's call line
            Finding(item, 11, 20, 11, 36, "warning", "GB0124", gb_message, url=GB_URL,
                    related=stack, data={"gb_id": "GB0124"}),
            # a static lint, not yet confirmed by a trace
            Finding(item, 12, 9, 12, 23, "information", "CL101",
                    "print() inside forward will break the graph (predicted)", predicted=True),
            # the break again on the helper's own file
            Finding(helper, 4, 12, 4, 25, "warning", "GB0124", gb_message, url=GB_URL, related=stack),
        ])

    timing = Timing(eager_ms=0.412, compiled_ms=0.368, speedup=1.12, eager_iqr_ms=0.02, compiled_iqr_ms=0.015,
                    speedup_ci=[1.08, 1.16], conclusive=True, rounds=12)
    step = Timing(eager_ms=1.30, compiled_ms=1.383, speedup=0.94, eager_iqr_ms=0.05, compiled_iqr_ms=0.06,
                  speedup_ci=[0.91, 0.97], conclusive=True, rounds=12)
    bench = Benchmark(
        device="cpu", device_name="Intel(R) Xeon(R) CPU", mode="default", forward=timing, train_step=step,
        compile_s=CompileSeconds(9.8, 1.7, 8.1, 1.2), break_even_calls=222_727,
        peak_memory_bytes=PeakMemory(5_242_880, 6_291_456, "peak RSS of a fresh process"),
        max_abs_error=Errors(1.3e-7, 2e-10), max_rel_error=Errors(9e-3, float("nan")),
        verdict="not worth it: 1.12× forward but pays back only after 222,727 calls",
        torch="2.13.0+cpu", inputs="(torch.randn(64, 512),)", measured_at=1767225600.0)
    mlp_report = FileReport(path=mlp, targets=[
        TargetResult(name="Net", kind="module", line=5,
                     inputs=InputRecipe(source="inferred", text="(torch.randn(2, 512),)"),
                     graph_count=1, benchmark=bench),
    ])

    rec = Recompile(line=9, variation="variant 2", kind="specialization",
                    reason="0/1: steps == 2", changed="steps", compile_s=0.31, path=steps)
    steps_report = FileReport(
        path=steps,
        targets=[
            TargetResult(name="run", kind="function", line=8,
                         inputs=InputRecipe(source="directive", text="(torch.randn(4), 2)",
                                            variants=["(torch.randn(4), 3)"]),
                         graph_count=1, recompiles=[rec]),
            # a target that could not be built: its diagnostic is not among the findings
            TargetResult(name="Big", kind="module", line=14, status="error",
                         error=Problem(kind="build", message="Big.__init__() missing 1 required positional argument: 'hidden'",
                                       line=14, hint="add `# compile-lens: init=Big(hidden=...)` above the class")),
        ],
        findings=[Finding(steps, 8, 5, 8, 8, "warning", "CL201",
                          "Recompiles for every new value of `steps` (2, 3): steps == 2 — each costs a compile")])

    broken_report = FileReport(path=broken, error=Problem(
        kind="import", message="ModuleNotFoundError: No module named 'missing_pkg'", path=broken, line=3,
        hint="install it in the interpreter Compile Lens uses"))
    return [steps_report, mlp_report, item_report, broken_report]


# --- text -------------------------------------------------------------------------------------

def test_text_lines_ordering_and_summary():
    out = render_text(_reports(), cwd=ROOT)
    lines = out.splitlines()
    assert lines[:6] == [
        "examples/broken.py:3:1: error: ModuleNotFoundError: No module named 'missing_pkg'"
        " (hint: install it in the interpreter Compile Lens uses)",
        f"examples/helpers.py:4:12: GB0124 {GB_TYPE}: {GB_EXPLANATION} [warning]",
        f"examples/item.py:11:20: GB0124 {GB_TYPE}: {GB_EXPLANATION} [warning]",
        "examples/item.py:12:9: CL101 print() inside forward will break the graph (predicted) [information, predicted]",
        "examples/steps.py:8:5: CL201 Recompiles for every new value of `steps` (2, 3): steps == 2 — each costs a compile [warning]",
        "examples/steps.py:14:1: error: Big.__init__() missing 1 required positional argument: 'hidden'"
        " (hint: add `# compile-lens: init=Big(hidden=...)` above the class)",
    ]
    assert lines[6] == ""
    assert lines[7] == ("examples/mlp.py:5: Net: forward faster: 1.08–1.16× (median 1.12×) · train step slower: "
                        "0.91–0.97× (median 0.94×) · compile 9.8 s cold / 1.7 s warm · pays back after 222,727 calls (cpu)")
    assert lines[8] == ""
    assert lines[9] == ("Found 2 errors, 3 warnings (2 graph breaks (torch: 4 graphs), 1 recompile), 1 information (1 predicted break)"
                        " in 4 files (4 targets).")
    assert len(lines) == 10
    assert out.endswith("\n")
    # benchmark lines never look like findings
    assert [ln for ln in lines if " GB" in ln] == lines[1:3]


def test_text_clean_and_outside_cwd():
    clean = [FileReport(path="/elsewhere/m.py", targets=[TargetResult(name="M", kind="module", line=1)])]
    assert render_text(clean, cwd=ROOT) == "No problems found in 1 file (1 target).\n"
    clean[0].findings.append(Finding("/elsewhere/m.py", 3, 1, 3, 5, "warning", "GB0059", "Attempted to call builtin print"))
    assert render_text(clean, cwd=ROOT).splitlines()[0] == "/elsewhere/m.py:3:1: GB0059 Attempted to call builtin print [warning]"


def test_text_target_error_shown_once_when_a_finding_covers_it():
    path = f"{ROOT}/a.py"
    report = FileReport(path=path, targets=[TargetResult(
        name="A", kind="module", line=2, status="error", error=Problem(kind="build", message="boom", line=2))],
        findings=[Finding(path, 2, 7, 2, 8, "error", "CL001", "A cannot be built: boom")])
    lines = render_text([report], cwd=ROOT).splitlines()
    assert lines == ["a.py:2:7: CL001 A cannot be built: boom [error]", "",
                     "Found 1 error in 1 file (1 target)."]


# --- JSON -------------------------------------------------------------------------------------

TARGET_KEYS = {"name", "kind", "line", "inputs", "status", "error", "graph_count", "graph_breaks", "recompiles", "benchmark",
               "export", "fallback_ops", "left_out", "phases", "unmeasured", "levers",
               "batch_sweep", "parts", "parts_s"}
GB_KEYS = {"path", "line", "column", "end_line", "end_column", "gb_id", "gb_type", "explanation", "hints", "url", "stack",
           "loop", "compile_id"}
DIAG_KEYS = {"line", "column", "end_line", "end_column", "severity", "code", "source", "message"}
BENCH_KEYS = {"device", "device_name", "mode", "forward", "train_step", "compile_s", "break_even_calls",
              "peak_memory_bytes", "max_abs_error", "max_rel_error", "verdict", "torch", "inputs", "measured_at", "notes",
              "conclusive", "contention", "guard_latency_us", "warm_cache", "unmeasured", "compile_time", "accuracy_drift",
              "precision", "stages_s", "phases_s"}  # phases_s: stages_s's 0.1.0 name, printed too until 0.2.0
TIMING_KEYS = {"eager_ms", "compiled_ms", "speedup", "eager_iqr_ms", "compiled_iqr_ms", "speedup_ci", "conclusive", "rounds",
               "ci_rel_width",
               # where the time goes, line by line (render/line_costs.py)
               "lines", "unattributed_us", "unattributed_why", "profile_us", "lines_note", "compiled_lines_note",
               "gpu_idle_share", "lines_caveat"}


def test_json_shape():
    doc = render_json(_reports(), torch_version="2.13.0+cpu", device="cpu")
    doc = json.loads(json.dumps(doc, allow_nan=False))  # strict JSON round trip
    assert set(doc) == {"schema", "torch", "device", "files"}
    assert (doc["schema"], doc["torch"], doc["device"]) == (1, "2.13.0+cpu", "cpu")
    files = {f["path"]: f for f in doc["files"]}
    # the helper's file gets its own entry for the break published on it
    assert list(files) == [f"{ROOT}/examples/{n}.py" for n in ("steps", "mlp", "item", "broken", "helpers")]
    for f in doc["files"]:
        assert set(f) == {"path", "error", "targets", "diagnostics"}
        for t in f["targets"]:
            assert set(t) == TARGET_KEYS
            assert t["inputs"] is None or set(t["inputs"]) == {"source", "text", "origin"}
            assert t["error"] is None or set(t["error"]) == {"kind", "message", "line", "hint"}
            for g in t["graph_breaks"]:
                assert set(g) - {"reason"} == GB_KEYS
                for s in g["stack"]:
                    assert set(s) == {"path", "line", "name"}
            for r in t["recompiles"]:
                assert set(r) == {"line", "variation", "kind", "reason", "changed", "compile_s", "compile_id"}
            b = t["benchmark"]
            if b is not None:
                assert set(b) == BENCH_KEYS and b["phases_s"] == b["stages_s"]  # the alias holds the same seconds
                assert set(b["forward"]) == TIMING_KEYS
                assert b["train_step"] is None or set(b["train_step"]) == TIMING_KEYS
                # as every measurement gives them (`warm_remote` too where a remote cache served it)
                assert set(b["compile_s"]) == {"cold", "warm", "cold_forward", "warm_forward"}
                assert set(b["peak_memory_bytes"]) == {"eager", "compiled", "method"}
                assert set(b["max_abs_error"]) == set(b["max_rel_error"]) == {"output", "grad"}
        for d in f["diagnostics"]:
            assert set(d) >= DIAG_KEYS
            assert set(d) - DIAG_KEYS <= {"url", "predicted", "related", "data"}
            assert d["source"] == "Compile Lens"

    item = files[f"{ROOT}/examples/item.py"]
    assert item["error"] is None
    (t,) = item["targets"]
    assert (t["name"], t["kind"], t["line"], t["status"], t["graph_count"]) == ("ItemNet", "module", 5, "ok", 2)
    assert t["inputs"] == {"source": "directive", "text": "(torch.randn(8, 16),)", "origin": None}
    (g,) = t["graph_breaks"]
    assert (g["gb_id"], g["line"], g["column"], g["end_line"], g["end_column"]) == ("GB0124", 4, 12, 4, 25)
    assert g["url"] == GB_URL and g["hints"] == GB_HINTS
    assert [(s["line"], s["name"]) for s in g["stack"]] == [(11, "forward"), (4, "scale_of")]
    assert [(d["line"], d["code"], d["severity"], d["predicted"]) for d in item["diagnostics"]] == [
        (11, "GB0124", "warning", False), (12, "CL101", "information", True)]
    assert [d["code"] for d in files[f"{ROOT}/examples/helpers.py"]["diagnostics"]] == ["GB0124"]
    assert files[f"{ROOT}/examples/helpers.py"]["targets"] == []

    steps = files[f"{ROOT}/examples/steps.py"]
    assert steps["targets"][0]["recompiles"] == [{"line": 9, "variation": "variant 2", "kind": "specialization",
                                                  "reason": "0/1: steps == 2", "changed": "steps", "compile_s": 0.31,
                                                  "compile_id": None}]
    big = steps["targets"][1]
    assert big["status"] == "error" and big["error"]["kind"] == "build" and big["error"]["line"] == 14
    assert big["benchmark"] is None and big["inputs"] is None

    b = files[f"{ROOT}/examples/mlp.py"]["targets"][0]["benchmark"]
    assert b["forward"]["speedup"] == 1.12 and b["train_step"]["speedup"] == 0.94
    assert b["compile_s"] == {"cold": 9.8, "warm": 1.7, "cold_forward": 8.1, "warm_forward": 1.2} and b["break_even_calls"] == 222_727
    assert b["max_rel_error"] == {"output": 9e-3, "grad": None}  # NaN is not JSON: null

    broken = files[f"{ROOT}/examples/broken.py"]
    assert broken["error"] == {"kind": "import", "message": "ModuleNotFoundError: No module named 'missing_pkg'",
                               "line": 3, "hint": "install it in the interpreter Compile Lens uses"}
    assert broken["targets"] == [] and broken["diagnostics"] == []


def test_json_no_torch():
    doc = render_json([FileReport(path="a.py")], torch_version=None, device="cpu")
    assert json.loads(json.dumps(doc)) == {"schema": 1, "torch": None, "device": "cpu", "files": [
        {"path": "a.py", "error": None, "targets": [], "diagnostics": []}]}


# --- SARIF ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sarif_validator():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_sarif_valid_and_complete(sarif_validator):
    log = render_sarif(_reports(), tool_version="0.1.0", cwd=ROOT, information_uri="https://example.invalid/compile-lens",
                       rule_names={"CL201": "Recompiles for every new value of a Python scalar"})
    log = json.loads(json.dumps(log, allow_nan=False))
    sarif_validator.validate(log)
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json" and log["version"] == "2.1.0"
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("Compile Lens", "0.1.0")
    rules = driver["rules"]
    ids = [r["id"] for r in rules]
    assert len(ids) == len(set(ids))
    assert set(ids) == {"GB0124", "CL101", "CL201", "build-error", "import-error"}
    gb_rule = rules[ids.index("GB0124")]
    assert gb_rule["shortDescription"]["text"] == GB_TYPE and gb_rule["helpUri"] == GB_URL
    # a CL rule: its title and documentation from the codes registry (docs/codes.md#cl101), as text:
    # a file:// link opens nowhere in code scanning, so there is no helpUri
    cl101 = rules[ids.index("CL101")]
    assert "helpUri" not in cl101 and cl101["help"]["markdown"] == codes.doc_section("CL101")
    assert cl101["help"]["markdown"].startswith("### CL101") and "print" in cl101["fullDescription"]["text"]
    assert rules[ids.index("CL201")]["shortDescription"]["text"] == "Recompiles for every new value of a Python scalar"
    assert rules[ids.index("CL101")]["shortDescription"]["text"] == "print() in compiled code"
    assert driver["informationUri"] == "https://example.invalid/compile-lens"

    results = run["results"]
    assert len(results) == 6  # 4 findings + the unbuildable target + the file that failed to import
    for r in results:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        loc = r["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert not loc["artifactLocation"]["uri"].startswith("/")
    by_rule = {}
    for r in results:
        by_rule.setdefault(r["ruleId"], []).append(r)
    gb = [r for r in by_rule["GB0124"] if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "examples/item.py"][0]
    assert gb["level"] == "warning"
    assert gb["locations"][0]["physicalLocation"]["region"] == {"startLine": 11, "startColumn": 20, "endLine": 11, "endColumn": 36}
    assert [(x["physicalLocation"]["artifactLocation"]["uri"], x["physicalLocation"]["region"]["startLine"])
            for x in gb["relatedLocations"]] == [("examples/item.py", 11), ("examples/helpers.py", 4)]
    (lint,) = by_rule["CL101"]
    assert lint["level"] == "note" and lint["properties"] == {"predicted": True}
    assert by_rule["import-error"][0]["level"] == "error"
    assert by_rule["import-error"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 3
    assert by_rule["build-error"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 14
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == "file:///ws/"


def test_sarif_outside_cwd_and_empty(sarif_validator):
    report = FileReport(path="/other place/m.py", findings=[
        Finding("/other place/m.py", 3, 1, 3, 1, "hint", "CL102", "x.numpy() breaks the graph (predicted)", predicted=True)])
    log = render_sarif([report], tool_version="0.1.0", cwd=ROOT)
    sarif_validator.validate(log)
    (result,) = log["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "file:///other%20place/m.py"}
    assert result["level"] == "note"
    empty = render_sarif([], tool_version="0.1.0", cwd=ROOT)
    sarif_validator.validate(empty)
    assert empty["runs"][0]["results"] == [] and empty["runs"][0]["tool"]["driver"]["rules"] == []


def test_sarif_schema_rejects_broken_logs(sarif_validator):
    """The vendored schema really checks: a result without a message is refused."""
    log = render_sarif(_reports(), tool_version="0.1.0", cwd=ROOT)
    del log["runs"][0]["results"][0]["message"]
    with pytest.raises(jsonschema.ValidationError):
        sarif_validator.validate(log)


# --- exit code --------------------------------------------------------------------------------

def test_exit_code():
    assert exit_code([]) == 0
    assert exit_code([FileReport(path="a.py", targets=[TargetResult(name="A", kind="module", line=1)])]) == 0
    assert exit_code(_reports()) == 1
    assert exit_code([FileReport(path="a.py", error=Problem(kind="import", message="x"))]) == 1
    assert exit_code([FileReport(path="a.py", targets=[TargetResult(name="A", kind="module", line=1, status="error")])]) == 1
    # information findings (a prediction, a recompile that settles, needs inputs) do not fail a build
    assert exit_code([FileReport(path="a.py", findings=[Finding("a.py", 1, 1, 1, 2, "hint", "CL101", "m", predicted=True)])]) == 0
    assert exit_code([FileReport(path="a.py", findings=[
        Finding("a.py", 1, 1, 1, 1, "information", "CL210", "settles"),
        Finding("a.py", 2, 1, 2, 1, "information", "CL001", "needs inputs")])]) == 0
    assert exit_code([FileReport(path="a.py", findings=[Finding("a.py", 1, 1, 1, 1, "warning", "CL211", "every value")])]) == 1
    # a warning the baseline holds does not fail either
    held = Finding("a.py", 1, 1, 1, 1, "warning", "GB0124", "item", data={"baseline": True})
    assert exit_code([FileReport(path="a.py", findings=[held])]) == 0


def test_text_summary_counts_levels_apart_and_hides_the_baseline():
    path = f"{ROOT}/m.py"
    report = FileReport(path=path, findings=[
        Finding(path, 3, 1, 3, 1, "warning", "CL211", "recompiles for every value"),
        Finding(path, 4, 1, 4, 1, "information", "CL210", "recompiles once"),
        Finding(path, 5, 1, 5, 1, "information", "CL213", "recompiles once per mode"),
        Finding(path, 6, 1, 6, 1, "warning", "GB0124", "item", data={"baseline": True}),
    ])
    lines = render_text([report], cwd=ROOT, baselined=1).splitlines()
    assert [ln.split(":")[1] for ln in lines[:3]] == ["3", "4", "5"]  # the held one is not listed
    assert lines[-1] == ("Found 1 warning (1 recompile), 2 information (2 recompiles) in 1 file (0 targets);"
                         " 1 finding in the baseline not shown.")
    assert all(d["code"] != "GB0124" for d in render_json([report], torch_version=None, device="cpu")["files"][0]["diagnostics"])
    assert all(r["ruleId"] != "GB0124" for r in render_sarif([report], tool_version="0", cwd=ROOT)["runs"][0]["results"])
