"""Issue 24.5: the CI recipes are tested — the GitHub Actions workflow in docs/ci/ is linted against
the GitHub-workflow schema (check-jsonschema's built-in copy: no network), and the pre-commit hook
runs through the real `pre-commit try-repo` on a git repository with a model in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paths import REPO

ROOT = REPO
BIN = Path(sys.executable).parent
WORKFLOW = ROOT / "docs" / "ci" / "github-actions.yml"

BREAKS = '''\
import torch
from torch import nn


class Logged(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        print("step")
        return self.fc(x)
'''


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: run `make setup` (requirements-dev.txt)")
    return found


def test_the_workflow_is_a_valid_github_workflow(tmp_path):
    lint = [_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows"]
    done = subprocess.run([*lint, str(WORKFLOW)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    # the linter does catch a broken one
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("runs-on:", "runs_on:", 1))
    assert subprocess.run([*lint, str(broken)], capture_output=True, text=True, timeout=120).returncode == 1
    text = WORKFLOW.read_text()
    assert "--shard ${{ matrix.shard }}/4" in text and "upload-sarif" in text and "security-events: write" in text


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def test_the_pre_commit_hook_runs_through_pre_commit(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text("[project]\nname = 'models'\n")
    (repo / "model.py").write_text(BREAKS)
    (repo / "util.py").write_text("def scale(x, k=2):\n    return x * k\n")
    _git("init", "-q", cwd=repo)
    _git("add", ".", cwd=repo)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "COMPILE_LENS_CACHE_DIR": str(tmp_path / "cache"),
           "GIT_CONFIG_GLOBAL": os.devnull, "PYTHONSAFEPATH": "1"}

    def try_repo(*files: str) -> subprocess.CompletedProcess:
        return subprocess.run([_tool("pre-commit"), "try-repo", str(ROOT), "compile-lens", "--files", *files],
                              cwd=repo, capture_output=True, text=True, timeout=300, env=env)

    broken = try_repo("model.py")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "compile-lens check" in broken.stdout and "Failed" in broken.stdout
    assert "model.py:11:" in broken.stdout and "GB0059" in broken.stdout, broken.stdout
    clean = try_repo("util.py")
    assert clean.returncode == 0 and "Passed" in clean.stdout, clean.stdout + clean.stderr
