"""One cache-folder rule for the editor and the CLI (`jobs.cache.cache_dir`): both find, and warm,
the same result cache and the same Inductor caches, whatever XDG_CACHE_HOME and cwd are."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from lsprotocol import types as lsp

from compile_lens.jobs.cache import cache_dir
from compile_lens.jobs.lanes import worker_env
from lsp_support import start_server, stop_server

MODEL = '''import torch
from torch import nn


class Scale(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return self.proj(x) * 2
'''


def test_the_rule(tmp_path, monkeypatch):
    home = os.path.expanduser("~")
    assert cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == str(tmp_path / "compile-lens")
    # relative XDG_CACHE_HOME: invalid by the XDG spec, and it would mean another folder per cwd
    assert cache_dir({"XDG_CACHE_HOME": "rel"}) == os.path.join(home, ".cache", "compile-lens")
    assert cache_dir({}) == os.path.join(home, ".cache", "compile-lens")
    monkeypatch.chdir(tmp_path)
    assert cache_dir({"COMPILE_LENS_CACHE_DIR": "here", "XDG_CACHE_HOME": "/x"}) == str(tmp_path / "here")
    # the worker runs in the file's root, not our cwd: its Inductor folder must be absolute too
    monkeypatch.setenv("COMPILE_LENS_CACHE_DIR", "here")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    assert worker_env(cache_dir())["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "here" / "inductor")


async def test_cli_and_editor_share_the_xdg_cache(tmp_path):
    """`compile-lens check` with only XDG_CACHE_HOME set writes results where the editor reads them."""
    project, xdg = tmp_path / "proj", tmp_path / "xdg"
    project.mkdir()
    (project / "model.py").write_text(MODEL)
    env = {k: v for k, v in os.environ.items() if k != "COMPILE_LENS_CACHE_DIR"}
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "check", "model.py", "--no-benchmark",
                           "--no-recompiles", "-q"], cwd=project, capture_output=True, text=True, timeout=300,
                          env={**env, "XDG_CACHE_HOME": str(xdg), "PYTHONSAFEPATH": "1"})
    assert done.returncode == 0, done.stderr
    assert (xdg / "compile-lens" / "results.sqlite").is_file()
    # the editor: same environment, no code run (restricted); its cache holds the CLI's trace
    client = await start_server(project, trusted=False, env={"COMPILE_LENS_CACHE_DIR": "", "XDG_CACHE_HOME": str(xdg)})
    try:
        cleared = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="compileLens.clearCache"))
    finally:
        await stop_server(client)
    assert cleared["removed"] >= 1


@pytest.fixture(autouse=True)
def _no_stray_cache(monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
