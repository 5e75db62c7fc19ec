"""`compile-lens report PATH -o report.html` as a user runs it: real worker, torch and Inductor."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from paths import FIXTURES


def run_report(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", "report", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONSAFEPATH": "1"})


@pytest.mark.slow
def test_report_writes_one_standalone_page(tmp_path):
    # the page, not the figures: the cheapest measurement (frozen, one library GEMM: forward only, no C++ kernel)
    shutil.copy(FIXTURES / "measure_forward" / "tiny.py", tmp_path / "tiny.py")
    # the fallback ops asked for whatever the 3 s budget: the kernels the page names are read from them
    done = run_report("tiny.py", "-o", "out/report.html", "--device", "cpu", "--max-seconds", "3",
                      "--with", "fallback_ops", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    HTMLParser().feed(page)
    assert "compile-lens: wrote out/report.html (1 target in 1 file)" in done.stderr
    assert "<title>Compile report: tiny.py</title>" in page
    assert 'id="t-' in page and "<strong>Tiny</strong>" in page and "tiny.py:5" in page
    assert "✓ strict" in page or ">not run<" in page  # torch.export, or named as not run in a 3 s budget
    assert "extern_kernels.addmm" in page  # the Linear's GEMM, labelled as a library call
    # latency vs batch size (or why the budget left it out), compile-time breakdown (not the line bars)
    assert page.count("<svg class=\"chart\"") + page.count('<figure class="empty"') == 2
    assert "http://" not in page and "https://" not in page  # no graph breaks, so no links at all


def test_report_usage_errors(tmp_path):
    assert run_report("missing.py", cwd=tmp_path).returncode == 2
    (tmp_path / "notes.txt").write_text("no python here")
    assert run_report(str(tmp_path), cwd=tmp_path).returncode == 2
