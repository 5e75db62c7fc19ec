"""`check --with PARTS` (the setting `benchmark.optIn`): the parts a user asks for run whatever the
budget leaves them; a part that does not exist is one line and exit 2 before anything runs."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

import pytest

from compile_lens.cli.common import settings_for
from compile_lens.jobs.cache import target_keys
from compile_lens.protocol import InputRecipe, TargetSpec
from paths import FIXTURES, SERVER


def _cli(cwd, *args, cache=None):
    env = {**os.environ, "PYTHONSAFEPATH": "1", "PYTHONPATH": str(SERVER),
           "COMPILE_LENS_CACHE_DIR": str(cache or cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=900, env=env)


@pytest.fixture
def workspace(tmp_path):
    shutil.copy(FIXTURES / "measure" / "tiny.py", tmp_path / "tiny.py")
    return tmp_path


@pytest.mark.parametrize("command", ["check", "report"])
def test_a_part_that_does_not_exist_is_one_line_and_exit_2_before_any_work(workspace, command):
    done = _cli(workspace, command, "tiny.py", "--with", "strict_export,batch")
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("compile-lens: --with strict_export,batch: `batch` is not a part that can be opted in "
                           "(parts: train_step, memory, lines, export, strict_export, fallback_ops, batch_sweep, "
                           "warm_remote)\n")
    assert not (workspace / "cache").exists()  # no worker, no cache: nothing ran


def test_the_flag_replaces_pyprojects_list(workspace):
    (workspace / "pyproject.toml").write_text('[tool.compile-lens]\nbenchmark.optIn = ["export"]\n')
    files, root = [str(workspace / "tiny.py")], str(workspace)
    assert settings_for(argparse.Namespace(opt_in=None), files, root).opt_in == ["export"]
    assert settings_for(argparse.Namespace(opt_in="batch-sweep, strict_export"), files, root).opt_in == \
        ["batch_sweep", "strict_export"]


def test_asking_for_parts_keys_the_figures_apart():
    """A cached measurement the budget cut short is not the one asked for; none asked: the keys as before."""
    spec = TargetSpec("Tiny", "module", 5, inputs=InputRecipe("directive", "(torch.randn(8, 16),)"))
    path = str(FIXTURES / "measure" / "tiny.py")

    def keys(*opt_in):
        return target_keys("2.13.0", path, "f", "d", spec, "cpu", "default", opt_in=opt_in)

    plain = target_keys("2.13.0", path, "f", "d", spec, "cpu", "default")
    assert keys() == plain
    asked = keys("batch_sweep", "strict_export")
    assert asked.bench != plain.bench and asked.trace == plain.trace and asked.sweep == plain.sweep
    assert keys("strict_export", "batch_sweep", "batch_sweep").bench == asked.bench  # a set: order and repeats do not matter


@pytest.mark.slow
def test_a_requested_part_runs_whatever_the_budget(workspace):
    """A 1 s budget: every part after the forward's headline would be skipped (torch.export is about a
    warm compile, the train step a fresh process's compile); the strict export asked for runs, with the
    non-strict one it follows, and the batch sweep, not asked for, is named not run (it runs only when
    asked for); the train step is named not run, the budget's."""
    done = _cli(workspace, "check", "tiny.py", "--no-recompiles", "--no-cache", "--max-seconds", "1",
                "--with", "strict_export", "--format", "json", "-q")
    assert done.returncode == 0, done.stderr
    [target] = json.loads(done.stdout)["files"][0]["targets"]
    assert target["parts"]["export"]["status"] == "done", target["parts"]
    assert target["export"]["ok"] and target["export"]["strict"], target["export"]
    assert target["parts"]["batch_sweep"] == {"status": "not-run", "why": "an opt-in part, not asked for", "seconds": None}
    assert target["unmeasured"].pop("batch sweep") == "not run: an opt-in part, not asked for"
    # what else was left out says the budget (the fallback ops: no warm compile's output code to read)
    assert all(why.endswith(": 1 s budget") for why in target["unmeasured"].values()), target["unmeasured"]
    assert target["parts"]["train_step"]["why"] == "1 s budget", target["parts"]
