"""Issue 24.3/24.4: `--shard I/N` splits a tree across a CI matrix (disjoint, every file once, the
same split on every run), and `--fail-on KINDS` gates on kinds instead of levels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compile_lens.cli import gate
from compile_lens.cli.shard import Shard
from compile_lens.config import python_files
from paths import REPO

ROOT = REPO
EXAMPLES = ROOT / "examples"


def run_cli(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONSAFEPATH": "1", "COMPILE_LENS_CACHE_DIR": str(cache)})


def targets(doc: dict) -> set[tuple[str, str]]:
    return {(os.path.basename(f["path"]), t["name"]) for f in doc["files"] for t in f["targets"]}


@pytest.fixture(scope="module")
def whole(examples_traced):
    """examples/ checked whole once (traces only; conftest, shared with the SARIF tests); the shards
    then come from the cache."""
    return examples_traced


def test_two_shards_are_disjoint_and_together_the_whole_run(whole):
    doc, cache = whole
    shards = []
    for i in (1, 2):
        done = run_cli("check", "examples", "--no-benchmark", "--no-recompiles", "--format", "json",
                       "--shard", f"{i}/2", cwd=ROOT, cache=cache)
        assert f"shard {i}/2:" in done.stderr and "tracing" not in done.stderr, done.stderr  # from the cache
        shards.append(json.loads(done.stdout))
    one, two = (targets(s) for s in shards)
    assert one and two and not one & two
    assert one | two == targets(doc)
    files = [{f["path"] for f in s["files"]} for s in shards]
    assert not files[0] & files[1] and files[0] | files[1] == {f["path"] for f in doc["files"]}


def test_the_split_is_by_the_root_relative_path(tmp_path):
    """The same files under another checkout folder fall in the same shards."""
    files = python_files([str(EXAMPLES)])
    moved = tmp_path / "elsewhere" / "examples"
    moved.mkdir(parents=True)
    for f in files:
        (moved / os.path.basename(f)).write_text("")
    for n in (2, 3, 5):
        here = [[os.path.basename(f) for f in Shard(i, n).files(files, str(EXAMPLES))] for i in range(1, n + 1)]
        there = [[os.path.basename(f) for f in Shard(i, n).files(python_files([str(moved)]), str(moved))]
                 for i in range(1, n + 1)]
        assert here == there
        assert sorted(sum(here, [])) == sorted(os.path.basename(f) for f in files)


def test_sharded_sarif_names_its_category_and_bad_shards_are_usage_errors(whole, tmp_path):
    _, cache = whole
    done = run_cli("check", "examples", "--no-benchmark", "--no-recompiles", "--format", "sarif", "-q",
                   "--shard", "2/2", cwd=ROOT, cache=cache)
    assert json.loads(done.stdout)["runs"][0]["automationDetails"] == {"id": "compile-lens/2-of-2/"}
    for bad in ("3/2", "0/2", "two", "1/0"):
        wrong = run_cli("check", "examples", "--shard", bad, cwd=ROOT, cache=cache)
        assert wrong.returncode == 2 and "--shard" in wrong.stderr, (bad, wrong.stderr)
    assert run_cli("report", "examples", "--shard", "5/4", "-o", str(tmp_path / "r.html"), cwd=ROOT,
                   cache=cache).returncode == 2
    # a target picked by name may live in another shard: not this job's error
    mine = {os.path.basename(f) for f in Shard(1, 2).files(python_files([str(EXAMPLES)]), str(EXAMPLES))}
    other = "item_scale.py" if "item_scale.py" not in mine else "mlp.py"
    name = {"item_scale.py": "ScaledNorm", "mlp.py": "MLP"}[other]
    elsewhere = run_cli("check", "examples", "--no-benchmark", "--no-recompiles", "--shard", "1/2",
                        "--target", name, cwd=ROOT, cache=cache)
    assert elsewhere.returncode == 0 and f"no target {name} in shard 1/2" in elsewhere.stderr, elsewhere.stderr


def test_fail_on_gates_on_kinds_not_levels(whole):
    _, cache = whole
    args = ("check", "examples/item_scale.py", "--no-benchmark", "--no-recompiles", "-q")
    assert run_cli(*args, cwd=ROOT, cache=cache).returncode == 1  # the level rule: a GB0124 warning
    calm = run_cli(*args, "--fail-on", "recompile-limit,accuracy", cwd=ROOT, cache=cache)
    assert calm.returncode == 0, calm.stderr
    # the kinds whose check did not run cannot fail: said, with the flag that skipped them
    assert "--fail-on recompile-limit, accuracy: not checked in this run (--no-benchmark, --no-recompiles)" \
        in calm.stderr
    broke = run_cli(*args, "--fail-on", "graph-break", cwd=ROOT, cache=cache)
    assert broke.returncode == 1 and "fails on graph-break: " in broke.stderr and "GB0124" in broke.stderr
    unknown = run_cli(*args, "--fail-on", "graph-break,slowness", cwd=ROOT, cache=cache)
    assert unknown.returncode == 2 and "unknown --fail-on kind slowness" in unknown.stderr


def test_every_kind_is_mapped_and_parsed():
    assert gate.parse("graph-break, recompile-limit,graph-break") == ["graph-break", "recompile-limit"]
    assert {k.phase for k in gate.KINDS.values()} == {None, "recompiles", "benchmark"}
    # the kinds that are no findings read the target's results
    assert gate.KINDS["slower"].target is not None and gate.KINDS["export"].target is not None
    with pytest.raises(ValueError):
        gate.parse(",")
