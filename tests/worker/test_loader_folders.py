"""One warm worker importing files from several folders that each hold a module of the same name
(`helper.py`, a `utils/` package): each file gets its own folder's module, in either order and
again after the other, whether the folders share a workspace root or are roots of their own.

A real worker process runs real jobs (no targets: the job is the import). Each file asserts at
import time that `helper`/`utils` is its neighbour, so a wrong module is the job's import error."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from compile_lens.jobs.lanes import Limits, Worker
from compile_lens.protocol import AnalyzeJob

_MODEL = """\
import helper
from utils import NAME
from utils.inner import INNER
assert helper.WHO == {who!r}, f"got the helper of {{helper.WHO}} ({{helper.__file__}})"
assert NAME == {who!r} and INNER == {who!r}, f"got the utils of {{NAME}}/{{INNER}}"
"""


def _folder(base: Path, who: str) -> Path:
    folder = base / who
    (folder / "utils").mkdir(parents=True)
    (folder / "helper.py").write_text(f"WHO = {who!r}\n")
    (folder / "utils" / "__init__.py").write_text(f"NAME = {who!r}\n")
    (folder / "utils" / "inner.py").write_text(f"INNER = {who!r}\n")
    (folder / "model.py").write_text(_MODEL.format(who=who))
    return folder


async def _import_errors(jobs: list[tuple[Path, Path]]) -> list[str | None]:
    """Each (file, root) imported in turn by one worker: the file-level error of each, or None."""
    worker = Worker(sys.executable, ".", dict(os.environ))
    await worker.start(120)
    errors: list[str | None] = []
    try:
        for i, (path, root) in enumerate(jobs):
            job = AnalyzeJob(i + 1, str(path), str(root), [], trace=False, recompiles=False)
            problem = await worker.run(job, lambda event: None, Limits(timeout_s=120))
            errors.append(problem.message if problem else None)
    finally:
        await worker.stop()
    return errors


@pytest.mark.parametrize("shared_root", [True, False], ids=["one-root", "root-per-folder"])
def test_each_folder_gets_its_own_helper_and_package(tmp_path, shared_root):
    a, b = _folder(tmp_path, "a"), _folder(tmp_path, "b")
    root = (lambda folder: tmp_path) if shared_root else (lambda folder: folder)
    order = [a, b, a, b]
    errors = asyncio.run(_import_errors([(f / "model.py", root(f)) for f in order]))
    assert errors == [None] * len(order)
