"""`check --compare-with PYTHON`: the same analysis with another interpreter's workers, and what
changes per target. Interpreters that cannot run a worker are refused before anything runs; a live
comparison with the same torch says nothing changed; a recorded torch 2.14.1 result (`tests/data/torch_2_14_1/`:
`compile-lens check --format json` of examples/item_scale.py in a torch 2.14.1 venv) compared with this torch's live run names what differs."""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compile_lens.engine.check import check
from compile_lens.interpreters import MIN_TORCH, InterpreterError, probe
from compile_lens.protocol import ContentionReport
from compile_lens.render.report_torch_diff import compare_section
from compile_lens.render.torch_diff_text import render_torch_diff_text
from compile_lens.settings import Settings
from compile_lens.torch_diff import compare
from paths import DATA, REPO
from torch_results import load_recorded

EXAMPLES = REPO / "examples"
RECORDED = DATA / "torch_2_14_1"


def run_cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONSAFEPATH": "1", **(env or {})})


# --- interpreters that cannot run a worker: refused, named, before any worker starts ----------

@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory) -> Path:
    """A real venv of this Python with nothing installed (no torch, no psutil)."""
    where = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    return where


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _venv_with(bare: Path, tmp: Path, name: str, links: list[Path], written: dict[str, str]) -> Path:
    """A copy of the bare venv whose site-packages also reads `tmp/name` (a .pth): real packages
    linked in there, or a dist-info written there."""
    venv = tmp / name
    shutil.copytree(bare, venv, symlinks=True)
    extra = tmp / f"{name}-packages"
    extra.mkdir()
    for link in links:
        (extra / link.name).symlink_to(link)
    for path, text in written.items():
        (extra / path).parent.mkdir(parents=True, exist_ok=True)
        (extra / path).write_text(text)
    (_site_packages(venv) / "extra.pth").write_text(str(extra) + "\n")
    return venv / "bin" / "python"


def test_a_missing_interpreter_is_named(tmp_path):
    done = run_cli("check", str(EXAMPLES / "mlp.py"), "--compare-with", str(tmp_path / "nope" / "bin" / "python"),
                   cwd=tmp_path)
    assert done.returncode == 2
    assert f"--compare-with {tmp_path / 'nope' / 'bin' / 'python'}: no such interpreter" in done.stderr
    assert done.stdout == ""


def test_an_interpreter_without_torch_says_how_to_install_it(bare_venv, tmp_path):
    python = bare_venv / "bin" / "python"
    done = run_cli("check", str(EXAMPLES / "mlp.py"), "--compare-with", str(python), cwd=tmp_path)
    assert done.returncode == 2
    assert f"{python} (Python {sys.version.split()[0]}) has no torch: install it with `{python} -m pip install torch`" \
        in done.stderr


def test_an_interpreter_without_psutil_is_refused(bare_venv, tmp_path):
    import torch

    real = Path(torch.__file__).parent.parent
    dist = next(real.glob("torch-*.dist-info"))
    python = _venv_with(bare_venv, tmp_path, "no-psutil", [real / "torch", dist], {})
    with pytest.raises(InterpreterError, match=r"has no psutil .* install it with `.*no-psutil/bin/python -m pip "
                                               r"install psutil`"):
        probe(str(python))


def test_a_torch_older_than_the_worker_reads_is_refused(bare_venv, tmp_path):
    import psutil

    old = "2.3.1"
    python = _venv_with(bare_venv, tmp_path, "old-torch", [Path(psutil.__file__).parent],
                        {f"torch-{old}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {old}\n",
                         "psutil-7.0.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: psutil\nVersion: 7.0.0\n"})
    done = run_cli("check", str(EXAMPLES / "mlp.py"), "--compare-with", str(python), cwd=tmp_path)
    assert done.returncode == 2
    oldest = ".".join(map(str, MIN_TORCH))
    assert f"has torch {old}, older than the {oldest} the analysis needs" in done.stderr


def test_sarif_and_write_baseline_are_refused(tmp_path):
    for extra in (["--format", "sarif"], ["--baseline", str(tmp_path / "b.json"), "--write-baseline"]):
        done = run_cli("check", str(EXAMPLES / "mlp.py"), "--compare-with", sys.executable, *extra, cwd=tmp_path)
        assert done.returncode == 2 and "--compare-with" in done.stderr, done.stderr


def test_this_interpreter_probes_as_its_own_torch():
    import torch

    found = probe(sys.executable)
    assert found.torch == torch.__version__ and found.python == os.path.abspath(sys.executable)


# --- live runs -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def same_torch(tmp_path_factory) -> dict:
    """One live comparison of a file with a break with the same interpreter: no result cache, so
    both sides are real runs of their own workers."""
    cache = tmp_path_factory.mktemp("compare-cache")
    done = run_cli("check", str(EXAMPLES / "item_scale.py"), "--no-benchmark", "--no-cache", "--format", "json",
                   "--compare-with", sys.executable, cwd=REPO, env={"COMPILE_LENS_CACHE_DIR": str(cache)})
    assert done.returncode == 1, done.stderr  # the break is a warning, as without --compare-with
    assert done.stderr.count("compile-lens: with ") == 2
    return json.loads(done.stdout)


@pytest.mark.slow
def test_the_same_torch_changes_nothing(same_torch):
    diff = same_torch["compare"]
    assert diff["schema"] == 1 and diff["base"]["torch"] == diff["other"]["torch"] == same_torch["torch"]
    [target] = diff["targets"]
    assert target["name"] == "ScaledNorm" and target["status"] == {"base": "ok", "other": "ok"}
    assert target["graph_breaks"]["base"] == target["graph_breaks"]["other"] == 1
    assert target["graph_breaks"]["added"] == target["graph_breaks"]["removed"] == [] and target["changes"] == []
    assert target["recompiles"]["base"] == target["recompiles"]["other"] is not None
    assert target["forward"] == {"base": None, "other": None}  # --no-benchmark: nothing measured, nothing claimed
    release = same_torch["torch"].split("+")[0]
    assert diff["verdict"] == f"torch {release} → {release}: no change in 1 target"
    text = render_torch_diff_text(diff)
    assert re.search(r"^item_scale\.py:ScaledNorm +1 +", text, re.M) and text.endswith(diff["verdict"]), text


@pytest.mark.slow
def test_a_recorded_torch_2_14_1_against_this_torch_names_what_changed_and_nothing_else():
    """A real run of this torch against a real 2.14.1 result of the same file. Both torches break at
    the same line and recompile alike (the recorded result says so): the comparison must find that
    and name no change of breaks or recompiles; a change it would name is checked by the pure diff
    below (`test_a_break_one_torch_adds_...`)."""
    recorded, runtime = load_recorded(RECORDED / "item_scale.json", EXAMPLES)
    assert runtime["torch"].startswith("2.14.1")
    settings = Settings()
    ours, our_runtime = asyncio.run(check([str(EXAMPLES / "item_scale.py")], settings, benchmark=False,
                                          root=str(EXAMPLES)))
    diff = compare(ours, {**our_runtime, "python_path": sys.executable}, recorded, runtime, str(EXAMPLES))
    assert diff["verdict"].startswith(f"torch {our_runtime['torch'].split('+')[0]} → 2.14.1: ")
    [target] = diff["targets"]
    theirs = recorded[0].targets[0]
    mine = ours[0].targets[0]
    assert target["graph_breaks"]["base"] == len(mine.graph_breaks)
    assert target["graph_breaks"]["other"] == len(theirs.graph_breaks)
    theirs_at = {(b.line, b.gb_id or b.gb_type) for b in theirs.graph_breaks}
    mine_at = {(b.line, b.gb_id or b.gb_type) for b in mine.graph_breaks}
    assert theirs_at and theirs_at == mine_at  # the same break (GB0124 at the .item() line) on both sides
    assert target["graph_breaks"]["added"] == [] and target["graph_breaks"]["removed"] == []
    assert target["recompiles"]["base"] == len(mine.recompiles) == target["recompiles"]["other"] == len(theirs.recompiles)
    assert target["recompiles"]["added"] == [] and target["recompiles"]["removed"] == []
    assert not [c for c in target["changes"] if "graph break" in c or "recompile" in c], target["changes"]
    page = compare_section(diff)
    assert "2.14.1" in page and html.escape(diff["verdict"]) in page


def test_a_break_one_torch_adds_is_named_at_its_line_in_the_verdict():
    """The recorded 2.14.1 result against itself less its break: the pure diff names it."""
    other, runtime = load_recorded(RECORDED / "item_scale.json", EXAMPLES)
    base, _ = load_recorded(RECORDED / "item_scale.json", EXAMPLES)
    for side in (base, other):
        side[0].targets[0].benchmark = None  # breaks and recompiles only: figures have their own test
    [gb] = base[0].targets[0].graph_breaks
    base[0].targets[0].graph_breaks = []
    base[0].targets[0].recompiles = base[0].targets[0].recompiles[1:]
    diff = compare(base, {"torch": "2.13.0+cpu"}, other, runtime, str(EXAMPLES))
    moved = other[0].targets[0].recompiles[0].variation
    assert diff["verdict"] == (f"torch 2.13.0 → 2.14.1: +1 graph break at item_scale.py:{gb.line} (ScaledNorm), "
                               f"recompiles {len(base[0].targets[0].recompiles)} → {len(other[0].targets[0].recompiles)}"
                               f" (+{moved}) (ScaledNorm)")
    [added] = diff["targets"][0]["graph_breaks"]["added"]
    assert (added["path"], added["line"], added["id"]) == ("item_scale.py", gb.line, gb.gb_id)
    assert f"+ item_scale.py:{gb.line}: {gb.gb_id}" in render_torch_diff_text(diff)


def test_a_cold_compile_is_named_only_when_neither_side_was_measured_on_a_busy_machine():
    other, runtime = load_recorded(RECORDED / "item_scale.json", EXAMPLES)
    base, _ = load_recorded(RECORDED / "item_scale.json", EXAMPLES)
    measured = other[0].targets[0].benchmark
    assert measured is not None and measured.contention.other_cpu_percent > 100  # recorded on a busy machine
    cold = measured.compile_s.cold
    base[0].targets[0].benchmark.compile_s.cold = cold / 2
    busy = compare(base, {"torch": "2.13.0"}, other, runtime, str(EXAMPLES))
    assert busy["targets"][0]["changes"] == [] and busy["targets"][0]["busy"] == {"base": True, "other": True}
    assert busy["verdict"].endswith("(1 measured while other processes used the machine: re-measure when idle to "
                                    "compare speed)")
    assert f"{cold / 2:.1f} s? → {cold:.1f} s?" in render_torch_diff_text(busy)
    for side in (base, other):
        side[0].targets[0].benchmark.contention = ContentionReport(cpus=2, threads=2, other_cpu_percent=12.0)
    idle = compare(base, {"torch": "2.13.0"}, other, runtime, str(EXAMPLES))
    assert idle["targets"][0]["changes"] == [f"cold compile {cold / 2:.1f} → {cold:.1f} s"]
