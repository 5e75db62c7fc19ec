"""The benchmark harness: every benchmark a registered unit with a goal and a baseline (and none left
in scripts/); the runner on a trivial unit (the ledger line, the table, the failure exit, the GPU
subset's order, BENCHMARKS.md's generated blocks with the prose kept); the GPU tests unit's reading of
pytest's JUnit report, a run stopped at its limit included; and one cheap real unit's
rehearsal (`lints --dry`) from the command line to a ledger line and its markdown block."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.__main__ import main  # noqa: E402
from benchmarks.figures import Figure, Result  # noqa: E402
from benchmarks.ledger import BEGIN, END, unit_block, write_markdown  # noqa: E402

from benchmarks import UNITS, Context, load_units, unit  # noqa: E402


@unit("trivial_sum", "sum(range(n)) is n(n-1)/2", "Python's own arithmetic")
def trivial_sum(ctx):
    n = 3 if ctx.dry else 100
    got = sum(range(n))
    return {"ok": got == n * (n - 1) // 2, "n": n, "sum": got}


@unit("trivial_fails", "a unit that reports a broken figure", "nothing")
def trivial_fails(ctx):
    return {"ok": False, "why": "on purpose"}


@unit("trivial_typed", "the sum's figure typed: a count with its goal", "Python's own arithmetic")
def trivial_typed(ctx):
    n = 3 if ctx.dry else 100
    return Result({"sum": Figure(sum(range(n)), "count", "higher", n * (n - 1) // 2), "took": Figure(0.5, "s", "lower")},
                  notes={"why": "a typed unit"})


def test_a_typed_units_figures_carry_their_unit_and_goal_to_the_ledger_and_its_block(tmp_path, capsys):
    assert main(["trivial_typed", "--out", str(tmp_path)]) == 0
    row = json.loads((tmp_path / "ledger.jsonl").read_text())
    assert row["typed"] is True and row["ok"] is True and row["notes"] == {"why": "a typed unit"}
    assert row["figures"]["sum"] == {"value": 4950, "unit": "count", "better": "higher", "limit": 4950}
    assert set(row["load"]) == {"load", "others_cpu_pct", "cores"} and row["load"]["others_cpu_pct"] is not None
    assert "| trivial_typed | yes |" in capsys.readouterr().out
    md = tmp_path / "B.md"
    md.write_text(f"{BEGIN}\n{END}\n{unit_block('trivial_typed', 'old')}\n")
    write_markdown(tmp_path / "ledger.jsonl", md)
    text = md.read_text()
    assert "sum 4950 (≥ 4950 ✓)" in text  # the summary's cell (a count reads as a number)
    assert "| sum | 4950 | ≥ 4950 ✓ |" in text and "| took | 0.5 s |  |" in text and "| why (note) |" in text


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


def test_the_gpu_check_runs_what_only_a_gpu_gives_first_within_five_minutes():
    from benchmarks.gpu import INSTALL_S

    load_units()
    chosen = sorted((u for u in UNITS.values() if u.gpu), key=lambda u: u.gpu)
    assert [u.name for u in chosen] == ["gpu_capture", "gpu_tests", "gpu_busy", "gpu_autotune"]
    assert len({u.gpu for u in chosen}) == len(chosen)  # no two share a place
    assert INSTALL_S + sum(u.timeout_s for u in chosen) <= 300  # a 15-minute device slot, run twice with room


def test_the_tests_unit_reads_each_outcome_from_pytest_junit_report_even_when_stopped_at_its_limit(tmp_path):
    # a real pytest run of five tests, the last outliving the unit's limit: interrupted, its report still written
    from benchmarks.gpu import INTERRUPT_S, _pytest, outcomes

    (tmp_path / "test_kinds.py").write_text(
        "import time, pytest\n"
        "def test_pass(): pass\n"
        "def test_fail(): assert False\n"
        "def test_skip(): pytest.skip('no')\n"
        "@pytest.mark.xfail\ndef test_xfail(): assert False\n"
        "def test_slow(): time.sleep(120)\n")
    xml = tmp_path / "report.xml"
    ctx = Context("cpu", tmp_path, timeout_s=INTERRUPT_S + 2 + 12)  # interrupted 12 s in
    rc, text, stopped = _pytest(ctx, [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider",
                                      str(tmp_path / "test_kinds.py")], xml)
    assert stopped and rc == 124 and xml.exists(), text[-2000:]
    found = {k.split("::")[-1]: v for k, v in outcomes(xml).items()}
    assert found == {"test_pass": "PASSED", "test_fail": "FAILED", "test_skip": "SKIPPED", "test_xfail": "XFAIL"}, found


def test_the_markdown_blocks_are_rewritten_and_the_prose_kept(tmp_path):
    assert main(["trivial_sum", "--out", str(tmp_path)]) == 0
    md = tmp_path / "B.md"
    md.write_text(f"# Prose\nhand-written\n\n{BEGIN}\nold table\n{END}\nmore prose\n\n## Sums\n\n"
                  f"{unit_block('trivial_sum', 'old figures')}\n\nthe sums' prose\n")
    write_markdown(tmp_path / "ledger.jsonl", md)
    text = md.read_text()
    assert "old table" not in text and "| trivial_sum | yes |" in text
    assert "old figures" not in text and "| sum | 4950 |" in text and "Goal: sum(range(n)) is n(n-1)/2 (met)" in text
    assert text.startswith("# Prose\nhand-written") and text.endswith("<!-- benchmarks:unit-end trivial_sum -->\n\nthe sums' prose\n")


def test_a_ledger_of_one_run_keeps_the_other_units_figures(tmp_path):
    """A fresh ledger (one unit run) rewrites that unit's row and block only: another unit's row and
    block, measured earlier and not in this ledger, stay as the file has them."""
    assert main(["trivial_sum", "--out", str(tmp_path)]) == 0
    md = tmp_path / "B.md"
    other = "| other_unit | yes | 3.0 | cpu | 0.5 | {\"x\": 1} |"
    md.write_text(f"{BEGIN}\n- cpu: 2 cores, torch 2.13.0+cpu, commit abc1234\n\n| unit | ok | seconds | device | load (1 min) "
                  f"| figures |\n|---|---|---|---|---|---|\n{other}\n| trivial_sum | **no** | 1 | cpu | 9 | {{}} |\n{END}\n"
                  f"{unit_block('other_unit', 'its figures from last week')}\n{unit_block('trivial_sum', 'old figures')}\n")
    write_markdown(tmp_path / "ledger.jsonl", md)
    text = md.read_text()
    assert other in text and "its figures from last week" in text and "commit abc1234" in text
    assert "| trivial_sum | yes |" in text and "| trivial_sum | **no** |" not in text and "old figures" not in text
    summary = text.split(BEGIN)[1].split(END)[0]
    assert summary.index("| other_unit |") < summary.index("| trivial_sum |")  # by name


BENCH = REPO / "benchmarks"
CONCERNS = sorted(p for p in BENCH.iterdir() if (p / "__init__.py").is_file())


def test_every_unit_has_a_goal_a_baseline_and_a_concern():
    units = {n: u for n, u in load_units().items() if not n.startswith("trivial_")}
    assert len(units) >= 30
    for u in units.values():
        assert re.fullmatch(r"[a-z][a-z0-9_]+", u.name), u.name
        assert len(u.goal) > 20 and len(u.against) > 10, u.name  # the figure and its limit; torch's own floor
        assert u.run.__module__.startswith(tuple(f"benchmarks.{p.name}" for p in CONCERNS)), u.name


def test_every_benchmark_module_is_run_by_a_unit_and_scripts_holds_none():
    """Each module of a concern package is named by a unit (`py`/`module_figures` on "concern.module"),
    so no benchmark is a script nobody runs; scripts/ keeps only the tools that measure nothing."""
    registering = "\n".join(p.read_text() for c in CONCERNS for p in c.glob("*.py"))
    concern = "|".join(c.name for c in CONCERNS)
    named = set(re.findall(rf'"((?:{concern})\.\w+)"', registering))
    modules = {f"{c.name}.{p.stem}" for c in CONCERNS for p in c.glob("*.py") if p.stem not in ("__init__", "more")}
    assert modules - named == set()
    scripts = {p.name for p in (REPO / "scripts").iterdir()}
    assert not [n for n in scripts if n.startswith("bench") or "_models" in n or n.endswith(("_check.py", "_kernels.py"))]


def test_a_cheap_units_rehearsal_writes_a_ledger_line_and_its_markdown_block(tmp_path):
    md = tmp_path / "B.md"
    md.write_text(f"# Lints\n\n{BEGIN}\n{END}\n\n{unit_block('lints', 'stale figures')}\n\nprose\n")
    done = subprocess.run([sys.executable, "-m", "benchmarks", "lints", "--dry", "--out", str(tmp_path), "--markdown",
                           "--md", str(md)], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO / "server")})
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(x) for x in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [(r["unit"], r["dry"], r["ok"]) for r in rows] == [("lints", True, True)]
    figures = rows[0]["figures"]  # typed, from the one JSON line the child wrote
    assert figures["lines"]["value"] > 0 and figures["typing_ms"]["unit"] == "ms" and figures["typing_ms"]["limit"] == 50
    assert rows[0]["typed"] and rows[0]["machine"]["cores"] and rows[0]["load_at_figures"]["cores"]
    text = md.read_text()
    assert "| lints | yes |" in text and "cpu (dry)" in text
    block = text.split("<!-- benchmarks:unit lints -->", 1)[1].split("<!-- benchmarks:unit-end lints -->")[0]
    assert "stale figures" not in block and "| typing_ms |" in block and "≤ 50 ms ✓" in block and "Against: ast.parse" in block
    assert text.endswith("<!-- benchmarks:unit-end lints -->\n\nprose\n")
