"""Each phase of a target (trace, recompile sweep, measurement) is its own result: a measurement
that outlasts the worker's time limit never erases the target's trace findings, and the targets
after it still run. Through the CLI's analysis (real worker) and the real server. The CLI's run
also checks, first, a measurement that holds more than the workers' memory cap: the CPU twin of
the CUDA out-of-memory row (tests/lsp/test_faults_own_server.py)."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import pytest
from lsprotocol import types as lsp

import paths
from compile_lens.engine import check as cli
from compile_lens.engine.finish import finish
from compile_lens.render.cli_output import render_json, render_text
from compile_lens.render.report_html import render_report
from compile_lens.settings import Settings
from lsp_support import locate, open_file, start_server, stop_server, wait_for

FIXTURES = paths.FIXTURES / "phases"
TIMEOUT_S = 20  # the worker's time limit: the trace and the sweep fit, TinyGPT's measurement does not
MAX_SECONDS = 5  # Head's measurement: its figures are not what is tested here, only that it ran
MEMORY_LIMIT_MB = 2500  # the workers' cap: Head's measurement fits, Greedy's (4,000 MB held) does not


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(FIXTURES, root)
    return root


def _phases(target: dict) -> dict[str, str]:
    return {name: p["status"] for name, p in target["phases"].items()}


@pytest.mark.slow
def test_cli_keeps_the_trace_of_a_target_whose_measurement_timed_out_and_measures_the_next(tmp_path):
    root = _workspace(tmp_path)
    path, greedy_path = root / "lm.py", root / "greedy.py"
    settings = Settings(timeout_s=TIMEOUT_S, max_seconds=MAX_SECONDS, memory_limit_mb=MEMORY_LIMIT_MB)
    reports, _runtime = asyncio.run(cli.check([str(greedy_path), str(path)], settings, benchmark=True))
    finish(reports)  # as the CLI does: ignores applied, messages in its words (`--memory-limit`)
    held, report = reports
    assert report.error is None and held.error is None
    call_site, _ = locate(path, "loss = causal_lm_loss(logits, labels)")
    gpt_line, _ = locate(path, "class TinyGPT")
    head_line, _ = locate(path, "class Head")

    doc = render_json(reports, torch_version=None, device="cpu")
    # Greedy, checked first: traced and swept; its measurement stopped at the memory cap, said on
    # Greedy with what to do; the worker replaced, lm.py's targets still run
    [greedy] = next(f for f in doc["files"] if f["path"] == str(greedy_path))["targets"]
    assert _phases(greedy) == {"trace": "done", "sweep": "done", "measure": "failed"}, greedy["phases"]
    assert greedy["phases"]["measure"]["error"]["kind"] == "memory" and greedy["benchmark"] is None
    greedy_line, _ = locate(greedy_path, "class Greedy")
    [stopped] = [d for d in next(f for f in doc["files"] if f["path"] == str(greedy_path))["diagnostics"]
                 if d["code"] == "CL003"]
    assert stopped["line"] == greedy_line + 1
    assert stopped["message"].startswith(f"`Greedy`: measuring failed: the analysis held more than {MEMORY_LIMIT_MB} MB (")
    assert stopped["message"].endswith("was stopped — raise --memory-limit, or use smaller example inputs")
    entry = next(f for f in doc["files"] if f["path"] == str(path))
    gpt = next(t for t in entry["targets"] if t["name"] == "TinyGPT")
    head = next(t for t in entry["targets"] if t["name"] == "Head")
    # TinyGPT: traced and swept; its measurement failed on the time limit, and says so
    assert _phases(gpt) == {"trace": "done", "sweep": "done", "measure": "failed"}, gpt["phases"]
    assert gpt["phases"]["measure"]["error"]["kind"] == "timeout"
    assert gpt["status"] == "ok" and gpt["benchmark"] is None
    assert [g["gb_id"] for g in gpt["graph_breaks"]] == ["GB0291"]
    assert gpt["recompiles"], "the sweep's findings are kept too"
    codes = {(d["code"], d["line"]) for d in entry["diagnostics"]}
    assert ("GB0291", call_site + 1) in codes
    [failed] = [d for d in entry["diagnostics"] if d["line"] == gpt_line + 1 and d["code"] == "CL003"]
    assert "measuring failed" in failed["message"] and f"longer than {TIMEOUT_S} s" in failed["message"]
    # Head, after it: still traced, swept and measured (or, on a very slow machine, its own
    # measurement failure is said on Head itself — never silence)
    assert _phases(head)["trace"] == "done" and _phases(head)["sweep"] == "done"
    if _phases(head)["measure"] == "done":
        assert head["benchmark"] is not None
    else:
        assert _phases(head)["measure"] == "failed", head["phases"]
        assert any(d["line"] == head_line + 1 and "measuring failed" in d["message"] for d in entry["diagnostics"])
    json.dumps(doc, allow_nan=False)

    text = render_text(reports, cwd=str(root))
    assert f"greedy.py:{greedy_line + 1}: Greedy: traced · recompiles checked · measurement failed: " \
           f"the analysis held more than {MEMORY_LIMIT_MB} MB" in text
    assert f"lm.py:{call_site + 1}:" in text and "GB0291" in text
    assert f"lm.py:{gpt_line + 1}: TinyGPT: traced · recompiles checked · measurement failed: " \
           f"the analysis took longer than {TIMEOUT_S} s" in text

    page = render_report(reports, title="phases", torch_version=None, device="cpu", cwd=str(root))
    assert "GB0291" in page
    assert "No graph breaks in the traced targets" not in page
    assert "measurement failed" in page


@pytest.mark.slow
@pytest.mark.asyncio
async def test_server_shows_the_trace_beside_a_timed_out_measurement_in_diagnostics_and_hover(tmp_path):
    root = _workspace(tmp_path)
    path = root / "lm.py"
    client = await start_server(root, settings={"worker.timeoutSeconds": TIMEOUT_S, "benchmark.maxSeconds": MAX_SECONDS})
    try:
        uri = open_file(client, path)
        call_site, _ = locate(path, "loss = causal_lm_loss(logits, labels)")
        gpt_line, gpt_col = locate(path, "TinyGPT(nn.Module)")
        head_line, head_col = locate(path, "Head(nn.Module)")

        def timed_out(ds):
            return any(d.range.start.line == gpt_line and d.code == "CL003" for d in ds)

        found = await wait_for(client, uri, timed_out, timeout=300)
        [failed] = [d for d in found if d.range.start.line == gpt_line and d.code == "CL003"]
        assert "measuring failed" in failed.message and f"longer than {TIMEOUT_S} s" in failed.message
        assert any(d.code == "GB0291" and d.range.start.line == call_site for d in found), \
            [(d.code, d.range.start.line) for d in found]

        async def hover(line: int, col: int) -> str:
            reply = await client.text_document_hover_async(lsp.HoverParams(
                lsp.TextDocumentIdentifier(uri), lsp.Position(line, col + 1)))
            return reply.contents.value if reply else ""

        card = await hover(gpt_line, gpt_col)
        assert "✓ traced" in card and "✓ recompiles checked" in card and "✗ measurement failed" in card, card
        assert "1 graph break" in card

        # Head, after it in the same measurement job: measured by the replacement worker
        deadline = time.monotonic() + 300
        while True:
            card = await hover(head_line, head_col)
            if "| forward |" in card or "✗ measurement failed" in card:  # measured: its figures (the all-✓ phase line is not shown)
                break
            assert time.monotonic() < deadline, card
            await asyncio.sleep(1.0)
        if "✗ measurement failed" in card:  # a very slow machine: then it is said on Head itself
            ds = client.diagnostics.get(uri, [])
            assert any(d.range.start.line == head_line and "measuring failed" in d.message for d in ds)
    finally:
        await stop_server(client)
