"""The report in the editor's side panel (~520 px): each target's cells carry their column's name,
which a narrow page shows when it stacks them (checked by a 520 px screenshot, BENCHMARKS/issue 25)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from compile_lens.render import report_html as rh

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_report_html import ROOT, sample_reports  # noqa: E402


def test_each_target_cell_names_its_column_for_the_stacked_layout():
    page = rh.render_report(sample_reports(), title="r", torch_version="2.13.0+cpu", device="cpu", cwd=ROOT)
    rows = re.findall(r'<tr class="target">(.*?)</tr>', page, re.S)
    assert rows
    for row in rows:
        labels = re.findall(r'<td data-label="([^"]*)"', row)
        assert labels[0] == "Target" and len(labels) == row.count("<td")
        assert set(labels) <= set(rh.COLUMNS)
    assert "Forward speedup" in re.findall(r'<td data-label="([^"]*)"', rows[0])
    assert "@media (max-width: 640px)" in page and 'tr class="head"' in page
