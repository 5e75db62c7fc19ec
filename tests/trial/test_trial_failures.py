"""`compile-lens trial` on a bad day: an eager run that fails stops the trial with the program's
status (no compiled run), keeps the last good `.compile-lens/trial.json` and writes the failed run
beside it; `--cold` runs the program without the remote-cache and PGO variables of the user's
environment, as `check`'s cold compile child does (`remote_cache.cold_env`, one function for both).
Real trials of tiny programs (no compile happens in them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import paths
from compile_lens.remote_cache import PGO_SWITCHES, REMOTE_SWITCHES
from compile_lens.trial import store, summary

FAILS = """
import sys
import torch

model = torch.nn.Linear(2, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    opt.zero_grad()
print("eager steps done")
sys.exit(3)
"""

PRINTS_ENV = """
import json
import os

names = {names!r}
print("ENV", os.environ.get("COMPILE_LENS_TRIAL_MODE"), json.dumps({{n: os.environ.get(n) for n in names}}))
"""


def _trial(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", "trial", *args], cwd=root, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(paths.SERVER), **(env or {})})


@pytest.mark.slow
def test_a_failed_eager_run_stops_the_trial_and_keeps_the_last_good_one(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.compile-lens]\n")
    (tmp_path / "train.py").write_text(FAILS)
    one_step = {"steps": [{"index": 0, "wall_s": 1.0, "hook_s": 1.0}]}
    figures = summary.summarize(one_step, 0, one_step, 0, rtol=1e-3, atol=1e-5, command="python good.py")
    good = store.write(str(tmp_path), figures, command="python good.py")
    before = Path(good).read_text()
    done = _trial(tmp_path, "--steps", "10", "--json", "out.json", "--", sys.executable, "train.py")
    assert done.returncode == 3, done.stderr[-3000:]  # the program's own status
    assert "eager steps done" in done.stdout and done.stdout.count("eager steps done") == 1  # ran once: no compiled run
    assert "the eager run failed (exit status 3)" in done.stderr and "compiled run" not in done.stderr.split(
        "the eager run failed")[0]
    assert Path(good).read_text() == before  # the last good trial is what the report and the editor still show
    failed = json.loads(Path(store.failed_path(str(tmp_path))).read_text())
    assert failed["command"].endswith("train.py") and failed["figures"]["eager"]["exit_code"] == 3
    assert failed["figures"]["compiled"]["ran"] is False and "not run" in failed["figures"]["compiled"]["failure"]["message"]
    assert json.loads((tmp_path / "out.json").read_text())["eager"]["exit_code"] == 3


@pytest.mark.slow
def test_cold_strips_the_remote_cache_and_pgo_as_the_check_cold_child(tmp_path):
    names = list(REMOTE_SWITCHES + PGO_SWITCHES)
    (tmp_path / "show_env.py").write_text(PRINTS_ENV.format(names=names))
    users = {n: "1" for n in names}
    done = _trial(tmp_path, "--steps", "1", "--cold", "--", sys.executable, "show_env.py", env=users)
    seen = {line.split(" ", 2)[1]: json.loads(line.split(" ", 2)[2]) for line in done.stdout.splitlines()
            if line.startswith("ENV ")}
    assert seen["compiled"] == {n: None for n in names}, seen  # cold: none of them
    assert seen["eager"] == users  # the eager run compiles nothing: the user's environment as it is
    warm = _trial(tmp_path, "--steps", "1", "--", sys.executable, "show_env.py", env=users)
    assert f"ENV compiled {json.dumps(users)}" in warm.stdout  # without --cold the program's environment is its own
