"""The compile report's HTML, from realistic hand-built FileReports: structure, charts, links, CSP."""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser

import pytest

from compile_lens.protocol import (
    BatchSweep,
    Benchmark,
    CompileSeconds,
    Errors,
    ExportCheck,
    FallbackOp,
    FileReport,
    Finding,
    Frame,
    GraphBreak,
    InputRecipe,
    PeakMemory,
    Problem,
    Recompile,
    Report,
    SkippedLoop,
    TargetResult,
    Timing,
    from_dict,
)
from compile_lens.render import report_html as rh

ROOT = "/ws"
GB_URL = "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0124.html"
GB_TYPE = "Unsupported Tensor.item() call with capture_scalar_outputs=False"


def sample_reports() -> list[FileReport]:
    """Two files: an MLP measured with every figure, a model with a break in a helper that does not
    export and falls back, one target that failed, and a function with no batch dimension."""
    mlp_path, item_path, helper = f"{ROOT}/models/mlp.py", f"{ROOT}/models/item.py", f"{ROOT}/models/helpers.py"
    bench = Benchmark(
        device="cpu", device_name="Intel(R) Xeon(R) CPU (2 threads)", mode="default",
        forward=Timing(0.412, 0.368, 1.12, 0.02, 0.015, [1.08, 1.16], True, 12),
        train_step=Timing(1.30, 1.383, 0.94, 0.05, 0.06, [0.91, 0.97], True, 12),
        compile_s=CompileSeconds(9.8, 1.7), break_even_calls=222_727,
        peak_memory_bytes=PeakMemory(5_242_880, 6_291_456, "peak RSS growth"),
        max_abs_error=Errors(1.3e-7, 2e-10), max_rel_error=Errors(9e-3, None),
        verdict="not worth it: compiled is 0.94× (slower) on cpu (train step)",
        torch="2.13.0+cpu", inputs="float32[64, 512]", measured_at=1767225600.0,
        notes=["timing: the machine was busy (load average 3.1 on 2 CPUs)"])
    sweep = {"dim": 0, "example_batch": 64, "sizes": [16, 32, 64, 128, 256], "compiles": 1, "dynamic": True,
             "device": "cpu", "workload": "forward (eval, no_grad)", "points": [
                 {"batch": b, "eager_ms": e, "compiled_ms": c, "eager_iqr_ms": e * 0.05,
                  "compiled_iqr_ms": c * 0.04, "speedup": e / c}
                 for b, e, c in ((16, 0.11, 0.12), (32, 0.2, 0.19), (64, 0.41, 0.37), (128, 0.83, 0.7), (256, 1.7, 1.35))]}
    mlp = TargetResult(
        name="MLP", kind="module", line=5, inputs=InputRecipe("directive", "(torch.randn(64, 512),)"),
        graph_count=1, benchmark=bench,
        export=ExportCheck(ok=True, strict=True), fallback_ops=[FallbackOp("extern_kernels.addmm", 3, "extern")],
        report=Report(from_dict(BatchSweep, sweep), kernels=2))

    stack = [Frame(item_path, 14, "forward"), Frame(helper, 4, "scale_of")]
    gb = GraphBreak(path=helper, line=4, column=12, end_line=4, end_column=25, gb_id="GB0124", gb_type=GB_TYPE,
                    explanation="Dynamo does not support tracing `Tensor.item()` <by default>.",
                    hints=["Set `torch._dynamo.config.capture_scalar_outputs = True`."], url=GB_URL,
                    reason="...", stack=stack)
    item_bench = Benchmark(
        device="cpu", device_name="Intel(R) Xeon(R) CPU (2 threads)", mode="default",
        forward=Timing(0.30, 0.21, 1.43, 0.01, 0.01, [1.38, 1.47], True, 12), train_step=None,
        compile_s=CompileSeconds(11.2, 2.1), break_even_calls=124_445,
        peak_memory_bytes=PeakMemory(None, None, "not measured"),
        max_abs_error=Errors(0.0, None), max_rel_error=Errors(0.0, None),
        verdict="only for long runs: 1.43× forward on cpu, compile 11.2 s, pays back after 124,445 calls; 1 graph break",
        torch="2.13.0+cpu", inputs="float32[8, 16]", measured_at=1767225600.0,
        notes=["graph breaks: 1 — the code after a break runs eagerly"])
    item = TargetResult(
        name="ItemNet", kind="module", line=9, inputs=InputRecipe("directive", "(torch.randn(8, 16),)"),
        graph_count=2, graph_breaks=[gb], benchmark=item_bench,
        recompiles=[Recompile(line=14, variation="batch 17", kind="automatic-dynamic",
                              reason="tensor 'x' size mismatch at index 0. expected 8, actual 17", changed="x",
                              path=item_path)],
        export=ExportCheck(ok=False, strict=False, line=16, path=item_path,
                           message="GuardOnDataDependentSymNode: Could not guard on data-dependent expression zuf0 > 0.0"),
        fallback_ops=[FallbackOp("aten.sort", 1), FallbackOp("mylib.shifted_sin", 2),
                      FallbackOp("extern_kernels.mm", 1, "extern")],
        report=Report(None, kernels=3, notes=["batch sweep: failed: RuntimeError: shape mismatch"]))
    broken = TargetResult(name="Big", kind="module", line=30, status="error",
                          error=Problem("build", "building `Big()` failed: TypeError: missing 'hidden'", item_path, 30))
    scale = TargetResult(name="scale", kind="function", line=40, inputs=InputRecipe("inferred", "(torch.randn(16),)"),
                         graph_count=1)
    findings = [Finding(item_path, 14, 9, 14, 30, "warning", "GB0124", "the break", url=GB_URL),
                Finding(item_path, 20, 5, 20, 12, "information", "CL101", "print() inside forward will break the graph",
                        predicted=True)]
    return [FileReport(mlp_path, targets=[mlp]), FileReport(item_path, targets=[item, broken, scale], findings=findings)]


class Collect(HTMLParser):
    """Tags, attributes and text of a page; fails on unbalanced structural tags."""

    VOID = {"meta", "br", "img", "input", "link", "hr", "rect", "line", "polyline", "circle"}

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.stack: list[str] = []
        self.text: list[str] = []
        self.in_svg_text = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse(page: str) -> Collect:
    parser = Collect()
    parser.feed(page)
    parser.close()
    assert parser.stack == [], parser.stack
    return parser


@pytest.fixture(scope="module")
def standalone() -> str:
    return rh.render_report(sample_reports(), title="Compile report: models", torch_version="2.13.0+cpu",
                            device="cpu", cwd=ROOT, generated_at=1767225600.0)


@pytest.fixture(scope="module")
def webview() -> str:
    return rh.render_report(sample_reports(), title="Compile report", torch_version="2.13.0+cpu", device="cpu",
                            cwd=ROOT, for_webview=True, nonce="abc123")


def rows_of(page: Collect) -> list[str]:
    return [attrs.get("id", "") for tag, attrs in page.tags if tag == "td" and attrs.get("class") == "name"]


def test_standalone_parses_and_has_a_row_per_target(standalone):
    page = parse(standalone)
    assert standalone.startswith("<!DOCTYPE html>")
    text = " ".join(page.text)
    assert rows_of(page) == ["t-ws-models-mlp-py-mlp", "t-ws-models-item-py-itemnet",
                             "t-ws-models-item-py-big", "t-ws-models-item-py-scale"]
    for column in rh.COLUMNS:
        assert column in text
    # the MLP row: speedups, compile times, break-even, memory, accuracy, export, library calls, verdict
    for needle in ("1.12×", "0.94×", "9.8 s / 1.7 s", "222,727 calls", "5.0 MB → 6.0 MB", "out 1.3e-07 · grad 2.0e-10",
                   "✓ strict", "none (+3 library)", "not worth it: compiled is 0.94× (slower) on cpu (train step)"):
        assert needle in text, needle
    # ItemNet: the failed export at its line, the fallbacks, the error row, the unmeasured function
    for needle in ("line 16", "aten.sort ×1, mylib.shifted_sin ×2", "building `Big()` failed", "not measured yet"):
        assert needle in text, needle
    assert "torch 2.13.0+cpu" in text and "2 files" in text and "4 targets" in text


def test_every_row_of_the_targets_table_spans_its_columns(standalone):
    table = standalone[standalone.index('<table class="targets">'):]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)
    assert len(rows) == 1 + 4 + 2  # header, four targets, a verdict line under each measured one
    for row in rows[1:]:
        cells = re.findall(r"<td([^>]*)>", row)
        spans = sum(int(m.group(1)) if (m := re.search(r'colspan="(\d+)"', c)) else 1 for c in cells)
        assert spans == len(rh.COLUMNS), row[:200]


def test_one_svg_per_plot(standalone):
    page = parse(standalone)
    svgs = [attrs for tag, attrs in page.tags if tag == "svg"]
    labels = [a.get("aria-label") for a in svgs]
    # MLP: latency + breakdown; ItemNet: breakdown only (its sweep failed, said in words)
    assert labels == ["Forward latency vs batch size", "Where the compile time goes", "Where the compile time goes"]
    assert "shape mismatch" in standalone
    # the latency chart: a polyline per side, a dot per batch size and side
    latency = standalone[standalone.index('aria-label="Forward latency'):]
    latency = latency[: latency.index("</svg>")]
    assert latency.count("<polyline") == 2 and latency.count("<circle") == 10
    assert "batch 64, compiled: 370 µs" in latency


def test_graph_breaks_listed_with_location_id_link_and_hints(standalone):
    assert f'<a class="gb" href="{GB_URL}">GB0124</a>' in standalone
    assert "models/helpers.py:4:12" in standalone
    assert "capture_scalar_outputs = True" in standalone
    assert "call chain:" in standalone and "scale_of (models/helpers.py:4)" in standalone
    assert "&lt;by default&gt;" in standalone  # torch's text is escaped, never markup


def test_no_network_needed(standalone, webview):
    for page in (standalone, webview):
        urls = set(re.findall(r"""(?:https?:)?//[^\s"'<>)]+""", page))
        assert urls == {GB_URL}, urls
        assert "<link" not in page and "src=" not in page.replace("script-src", "")
        assert "@import" not in page and "url(" not in page


def test_standalone_has_no_script_and_no_webview_links(standalone):
    assert "<script" not in standalone and "data-path" not in standalone
    assert "--vscode-" not in standalone and "prefers-color-scheme: dark" in standalone


def test_webview_has_csp_theme_colours_and_open_links(webview):
    page = parse(webview)
    (csp,) = [a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp.startswith("default-src 'none'; style-src 'unsafe-inline'; img-src data:;")
    assert "script-src 'nonce-abc123'" in csp
    (script,) = [a for t, a in page.tags if t == "script"]
    assert script == {"nonce": "abc123"}
    assert "var(--vscode-editor-foreground)" in webview and "var(--vscode-charts-blue)" in webview
    links = [a for t, a in page.tags if t == "a" and "data-path" in a]
    opened = {(a["data-path"], a["data-line"]) for a in links}
    assert (f"{ROOT}/models/helpers.py", "4") in opened  # the graph break
    assert (f"{ROOT}/models/mlp.py", "5") in opened  # the target's class line
    assert (f"{ROOT}/models/item.py", "16") in opened  # the line that does not export
    assert all(a["href"] == "#" for a in links)


def test_empty_and_old_results_render():
    """No targets at all, and results from before the report fields existed."""
    empty = rh.render_report([], title="Nothing", torch_version=None, device="cpu", cwd=ROOT)
    parse(empty)
    assert "No targets" in empty
    old = TargetResult(name="Old", kind="module", line=1, graph_count=1)
    page = rh.render_report([FileReport(f"{ROOT}/a.py", targets=[old])], title="t", torch_version="2.4",
                            device="cpu", cwd=ROOT)
    parse(page)
    assert "not measured yet" in page and "<svg" not in page


def test_nice_ticks():
    from compile_lens.render import html_parts

    assert html_parts.nice_ticks(1.7) == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert html_parts.nice_ticks(0.037) == [0.0, 0.01, 0.02, 0.03, 0.04]
    assert html_parts.nice_ticks(0) == [0.0, 1.0]


# --- the server command and the other views of the same data ------------------------------------

def _fake_server(current: bool = True):
    from types import SimpleNamespace

    from compile_lens.protocol import TargetSpec

    mlp_report = sample_reports()[0]
    mlp = mlp_report.targets[0]
    specs = [TargetSpec("MLP", "module", 5), TargetSpec("Later", "module", 40)]
    state = SimpleNamespace(
        path=mlp_report.path, discovery=SimpleNamespace(targets=specs), saved=None, problem=None,
        traced={"MLP": dataclasses.replace(mlp, benchmark=None)},
        benchmarks={"MLP": mlp.benchmark})
    return SimpleNamespace(
        docs={"file:///ws/models/mlp.py": state}, runtime={"torch": "2.13.0+cpu", "cuda": False}, root=ROOT,
        settings=SimpleNamespace(device="auto"), torch_version=None, is_current=lambda s: current,
        buffer_map=lambda s: None, root_for=lambda path: ROOT)


def _published(state):
    return [Finding(state.path, 7, 1, 7, 2, "information", "CL101", "print() inside forward")]


def test_report_command_builds_the_webview_page_from_server_state():
    from compile_lens.lsp.features.report import report_html

    answer = report_html(_fake_server(), "file:///ws/models/mlp.py", _published)
    assert (answer["files"], answer["targets"]) == (1, 2)
    page = answer["html"]
    parse(page)
    assert "Content-Security-Policy" in page and "<title>Compile report: mlp.py</title>" in page
    assert "1.12×" in page  # the measurement was merged into its traced result
    assert page.count("<svg") == 2
    assert "not measured yet" in page  # a target the server has not traced yet
    assert "print() inside forward" in page  # the published findings
    assert report_html(_fake_server(), None, _published)["files"] == 1  # null: every open file


def test_report_command_hides_results_of_older_code():
    from compile_lens.lsp.features.report import report_html

    page = report_html(_fake_server(current=False), "file:///ws/models/mlp.py", _published)["html"]
    assert "changed since the last analysis" in page and "1.12×" not in page
    assert "not open in the editor" in report_html(_fake_server(), "file:///ws/other.py", _published)["html"]


def test_json_and_hover_card_carry_export_and_fallbacks():
    from compile_lens.render.cards import REPORT_LINK, detail_lines, hover_card
    from compile_lens.render.cli_output import render_json

    reports = sample_reports()
    doc = render_json(reports, torch_version="2.13.0+cpu", device="cpu")
    item = next(t for f in doc["files"] for t in f["targets"] if t["name"] == "ItemNet")
    assert item["export"]["ok"] is False and item["export"]["line"] == 16
    assert item["fallback_ops"][0] == {"op": "aten.sort", "count": 1, "kind": "fallback"}
    t = reports[1].targets[0]
    card = hover_card(t, t.benchmark, guessed_inputs=False)
    details = "\n".join(detail_lines(t, t.benchmark, guessed_inputs=False))  # a click away from the card
    assert "- torch.export: ✗ fails at `item.py:16`: GuardOnDataDependentSymNode" in details
    assert ("- ops that fall back to eager: `aten.sort` ×1, `mylib.shifted_sin` ×2 · library calls "
            "(not generated code): `extern_kernels.mm` ×1") in details
    assert card.endswith(REPORT_LINK)
    mlp = reports[0].targets[0]
    details = "\n".join(detail_lines(mlp, mlp.benchmark, guessed_inputs=False))
    assert "- torch.export: ✓ exports (strict and non-strict)" in details
    assert "- ops that fall back to eager: none · library calls" in details
    unmeasured = hover_card(reports[1].targets[2], None, guessed_inputs=False)
    assert "torch.export" not in unmeasured and unmeasured.endswith(REPORT_LINK)


def test_a_break_inside_a_loop_is_listed_at_its_line_with_the_loop_torch_skips():
    path = f"{ROOT}/models/decode.py"
    loop = SkippedLoop(path, 18, 9, 18, 42, "forward", "GB7000", GB_URL.replace("gb0124", "gb7000"))
    gb = GraphBreak(path=path, line=22, column=16, end_line=22, end_column=36, gb_id="GB0124", gb_type=GB_TYPE,
                    explanation="", hints=[], url=GB_URL, reason="...", stack=[Frame(path, 22, "forward")], loop=loop)
    target = TargetResult(name="GreedyDecoder", kind="module", line=7, graph_count=0, graph_breaks=[gb])
    page = rh.render_report([FileReport(path, targets=[target])], title="t", torch_version="2.13.0",
                            device="cpu", cwd=ROOT)
    parse(page)
    assert f'<a class="gb" href="{GB_URL}">GB0124</a>' in page and "models/decode.py:22:16" in page
    assert f'<a class="gb" href="{loop.url}">GB7000</a> inside the loop at' in page
    assert "models/decode.py:18:9" in page
    assert "torch skips the whole <code>forward</code>, which runs eagerly" in page
