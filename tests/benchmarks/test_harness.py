"""The benchmark harness's runner on a trivial unit: the ledger line, the table, the failure exit,
the GPU subset's order and BENCHMARKS.md's generated section (the rest of the file kept)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.__main__ import main  # noqa: E402
from benchmarks.ledger import BEGIN, END, write_markdown  # noqa: E402

from benchmarks import UNITS, load_units, unit  # noqa: E402


@unit("trivial_sum", "sum(range(n)) is n(n-1)/2", "Python's own arithmetic")
def trivial_sum(ctx):
    n = 3 if ctx.dry else 100
    got = sum(range(n))
    return {"ok": got == n * (n - 1) // 2, "n": n, "sum": got}


@unit("trivial_fails", "a unit that reports a broken figure", "nothing")
def trivial_fails(ctx):
    return {"ok": False, "why": "on purpose"}


def test_a_unit_run_goes_to_the_ledger_and_the_table(tmp_path, capsys):
    rc = main(["trivial_sum", "--out", str(tmp_path), "--device", "cpu"])
    assert rc == 0
    rows = [json.loads(x) for x in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [r["unit"] for r in rows] == ["trivial_sum"]
    row = rows[0]
    assert row["ok"] is True and row["figures"] == {"n": 100, "sum": 4950}
    assert row["device"] == "cpu" and row["machine"]["cores"] and "load" in row["load"]
    assert row["goal"] == "sum(range(n)) is n(n-1)/2"
    out = capsys.readouterr().out
    assert "| trivial_sum | yes |" in out
    assert (tmp_path / "summary.md").read_text().startswith("| unit |")


def test_a_failed_figure_fails_the_run(tmp_path):
    assert main(["trivial_sum", "trivial_fails", "--out", str(tmp_path), "--dry"]) == 1
    rows = [json.loads(x) for x in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [(r["unit"], r["ok"], r["dry"]) for r in rows] == [("trivial_sum", True, True), ("trivial_fails", False, True)]


def test_an_unknown_unit_is_a_usage_error(tmp_path):
    assert main(["no_such_unit", "--out", str(tmp_path)]) == 2


def test_the_gpu_subset_runs_the_speedup_truth_first():
    load_units()
    order = [u.name for u in sorted((u for u in UNITS.values() if u.gpu), key=lambda u: u.gpu)]
    assert order[:3] == ["speedup_truth", "cuda_capture", "line_costs"]
    assert len({u.gpu for u in UNITS.values() if u.gpu}) == len(order)  # no two share a place


def test_the_markdown_section_is_rewritten_and_the_prose_kept(tmp_path):
    assert main(["trivial_sum", "--out", str(tmp_path)]) == 0
    md = tmp_path / "B.md"
    md.write_text(f"# Prose\nhand-written\n\n{BEGIN}\nold table\n{END}\nmore prose\n")
    write_markdown(tmp_path / "ledger.jsonl", md)
    text = md.read_text()
    assert "old table" not in text and "| trivial_sum | yes |" in text
    assert text.startswith("# Prose\nhand-written") and text.endswith(f"{END}\nmore prose\n")
