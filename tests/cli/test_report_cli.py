"""`compile-lens report PATH -o report.html` as a user runs it: real worker, torch and Inductor."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from paths import FIXTURES


def run_report(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", "report", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONSAFEPATH": "1", **(env or {})})


@pytest.mark.slow
def test_report_writes_one_standalone_page(tmp_path):
    # the cheapest measurement (frozen, one library GEMM: forward only, no C++ kernel), the machine declared
    # quiet (under pytest only: every round counts); the strict export asked for runs whatever the 3 s budget
    shutil.copy(FIXTURES / "measure_forward" / "tiny.py", tmp_path / "tiny.py")
    done = run_report("tiny.py", "-o", "out/report.html", "--device", "cpu", "--max-seconds", "3",
                      "--with", "strict_export,fallback_ops", cwd=tmp_path, env={"COMPILE_LENS_TEST_QUIET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    HTMLParser().feed(page)
    assert "compile-lens: wrote out/report.html (1 target in 1 file)" in done.stderr
    assert "<title>Compile report: tiny.py</title>" in page
    assert 'id="t-' in page and "<strong>Tiny</strong>" in page and "tiny.py:5" in page
    assert 'title="torch.export works, strict and non-strict">✓ strict</td>' in page
    # the table's figures: one GEMM behind a compiled wrapper is several times slower than eager, conclusively
    row = re.search(r'data-label="Forward speedup" class="num bad" title="eager (\d+(?:\.\d+)?) (µs|ms) ± [^,]+, compiled '
                    r'(\d+(?:\.\d+)?) (µs|ms) ± [^;]+; 95% CI (\d\.\d\d)–(\d\.\d\d)× over (\d+) paired rounds">'
                    r'slower: \5–\6× \(median (\d\.\d\d)×(?:, imprecise)?\)</td>', page)
    assert row, page[page.find('data-label="Forward speedup"'):][:400]
    eager, compiled = (float(v) * (1000 if unit == "ms" else 1) for v, unit in (row.group(1, 2), row.group(3, 4)))
    lo, hi, rounds, median = (float(v) for v in row.group(5, 6, 7, 8))
    assert eager < compiled and lo <= median <= hi < 1.0 and rounds >= 8, row.group(0)
    assert '<td data-label="Break-even" class="num">never</td>' in page  # a slower forward never pays back
    assert f"not worth it: forward slower: {lo:.2f}–{hi:.2f}× (median {median:.2f}×" in page
    assert '<td data-label="Train-step speedup" class="num muted">–</td>' in page  # frozen: no train step
    assert "extern_kernels.addmm" in page  # the Linear's GEMM, labelled as a library call
    # latency vs batch size (or why the budget left it out), compile-time breakdown (not the line bars)
    assert page.count("<svg class=\"chart\"") + page.count('<figure class="empty"') == 2
    assert "http://" not in page and "https://" not in page  # no graph breaks, so no links at all


def test_report_usage_errors(tmp_path):
    assert run_report("missing.py", cwd=tmp_path).returncode == 2
    (tmp_path / "notes.txt").write_text("no python here")
    assert run_report(str(tmp_path), cwd=tmp_path).returncode == 2
