"""Results are keyed by the file's path relative to its project root and the root's identity
(`jobs.project`), not by where the root lies: a project copied to another folder with the cache
folder (a CI runner restoring its cache, a second clone, a moved checkout) reads the results the
first folder measured, at the new folder's paths; another project, or changed code, does not."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from compile_lens.jobs.project import ROOT_MARK, anchored, placed, project_identity

MODEL = '''import torch
from torch import nn

from helper import scale


class Scale(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        y = self.proj(x)
        if y.sum().item() > 0:  # a graph break, with its path in the result
            y = y * 2
        return scale(y)
'''


def _check(project, cache, *args):
    env = {k: v for k, v in os.environ.items() if k not in ("COMPILE_LENS_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")}
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", "check", "model.py", "--no-benchmark",
                           "--no-recompiles", "--format", "json", *args], cwd=project, capture_output=True, text=True,
                          timeout=300, env={**env, "COMPILE_LENS_CACHE_DIR": str(cache), "PYTHONSAFEPATH": "1"})


def _project(folder, name="demo"):
    folder.mkdir()
    (folder / "pyproject.toml").write_text(f'[project]\nname = "{name}"\n')
    (folder / "model.py").write_text(MODEL)
    (folder / "helper.py").write_text("def scale(y):\n    return y + 1\n")
    return folder


def test_a_project_copied_elsewhere_with_its_cache_is_not_measured_again(tmp_path):
    first = _project(tmp_path / "first")
    cache = tmp_path / "cache"
    measured = _check(first, cache)
    assert measured.returncode == 1, measured.stderr  # the break is a finding
    assert "tracing model.py" in measured.stderr
    # the CI runner: the checkout lands in another folder, the cache folder is restored beside it
    second, restored = tmp_path / "ci" / "work" / "second", tmp_path / "ci" / "cache"
    second.parent.mkdir(parents=True)
    shutil.copytree(first, second)
    shutil.copytree(cache, restored)
    shutil.rmtree(first)
    again = _check(second, restored)
    assert again.returncode == 1, again.stderr
    assert "model.py: from the cache" in again.stderr and "tracing" not in again.stderr
    # the same findings, at the new folder's paths (never the first folder's)
    assert again.stdout.replace(str(second), "<root>") == measured.stdout.replace(str(first), "<root>")
    assert str(second) in again.stdout and str(first) not in again.stdout and ROOT_MARK not in again.stdout
    # another project with the same code in the same cache, and a changed import, are measured
    other = _project(tmp_path / "other", name="another")
    assert "tracing model.py" in _check(other, restored).stderr
    (second / "helper.py").write_text("def scale(y):\n    return y - 1\n")
    assert "tracing model.py" in _check(second, restored).stderr


def test_the_identity_survives_a_clone_and_tells_projects_apart(tmp_path):
    ssh, https = tmp_path / "ssh", tmp_path / "https"
    for folder, url in ((ssh, "git@github.com:owner/repo.git"), (https, "https://github.com/Owner/repo")):
        (folder / ".git").mkdir(parents=True)
        (folder / ".git" / "config").write_text(f'[core]\n\tbare = false\n[remote "origin"]\n\turl = {url}\n'
                                                '\tfetch = +refs/heads/*:refs/remotes/origin/*\n')
    assert project_identity(str(ssh)) == project_identity(str(https)) == "name=;remote=github.com/owner/repo"
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (ssh / ".git" / "worktrees" / "wt").mkdir(parents=True)
    (ssh / ".git" / "worktrees" / "wt" / "commondir").write_text("../..\n")
    (worktree / ".git").write_text(f"gitdir: {ssh / '.git' / 'worktrees' / 'wt'}\n")
    assert project_identity(str(worktree)) == project_identity(str(ssh))
    assert project_identity(str(_project(tmp_path / "p", name="p"))) == "name=p;remote="


def test_paths_under_the_root_are_stored_relative_and_read_back_where_it_lies(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    value = {"path": str(old / "model.py"), "message": f"at {old / 'm.py'}:3", "cwd": str(old),
             "frames": [{"path": "/usr/lib/python3/x.py"}], "line": 3}
    stored = anchored(value, str(old))
    assert str(old) not in repr(stored) and stored["frames"] == value["frames"]
    assert placed(stored, str(new)) == {"path": str(new / "model.py"), "message": f"at {new / 'm.py'}:3",
                                        "cwd": str(new), "frames": [{"path": "/usr/lib/python3/x.py"}], "line": 3}
