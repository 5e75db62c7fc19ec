"""A workspace that vendors a compiled package (numpy under `vendor/`, on PYTHONPATH): the worker
forgets the workspace's own modules before each import, never a compiled one — numpy refuses to
be loaded twice in a process ("cannot load module more than once per process")."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy
import pytest

import paths
from lsp_support import change_file, locate, open_file, start_server, stop_server, wait_for

FIXTURES = paths.FIXTURES / "vendored"


def _vendor_numpy(vendor: Path) -> Path:
    """A real compiled numpy (its extension modules and bundled libraries) copied into `vendor`."""
    installed = Path(numpy.__file__).parent
    shutil.copytree(installed, vendor / "numpy", ignore=shutil.ignore_patterns("tests", "__pycache__"))
    libs = installed.parent / "numpy.libs"
    if libs.is_dir():
        shutil.copytree(libs, vendor / "numpy.libs")
    compiled = list((vendor / "numpy").rglob("*.so")) + list((vendor / "numpy").rglob("*.pyd"))
    assert compiled, "numpy without extension modules: not the case under test"
    return vendor


@pytest.mark.slow
@pytest.mark.asyncio
async def test_vendored_compiled_package_survives_every_reanalysis(tmp_path):
    root = tmp_path / "ws"
    shutil.copytree(FIXTURES, root)
    vendor = _vendor_numpy(root / "vendor")
    path = root / "features.py"
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(vendor), os.environ.get("PYTHONPATH")) if p)}
    client = await start_server(root, settings={"benchmark.onSave": False}, env=env)
    try:
        uri = open_file(client, path)
        item, _ = locate(path, "z.abs().max().item()")

        def traced(ds):
            return any(str(d.code) == "GB0124" and d.range.start.line == item for d in ds) \
                or any(str(d.code) in ("CL002", "CL001", "CL003") for d in ds)

        found = await wait_for(client, uri, traced, timeout=180)
        problems = [(d.code, d.message) for d in found if str(d.code) in ("CL001", "CL002", "CL003")]
        assert not problems, problems
        assert any(str(d.code) == "GB0124" for d in found)

        # re-save twice (a code change each time): each analysis imports the file again, numpy stays
        text = path.read_text()
        for version, extra in ((2, "\nTAG = 1\n"), (3, "\nTAG = 2\n\n\ndef helper():\n    return np.zeros(2)\n")):
            since = len(client.published)
            change_file(client, path, text + extra, version, save=True)

            def reanalysed(ds, since=since, version=version):
                later = [p for p in client.published[since:] if p.uri == uri and p.version == version]
                return any(traced(p.diagnostics) for p in later)

            await wait_for(client, uri, reanalysed, timeout=180)
            latest = [p for p in client.published[since:] if p.uri == uri and p.version == version][-1]
            problems = [(d.code, d.message) for d in latest.diagnostics if str(d.code) in ("CL001", "CL002", "CL003")]
            assert not problems, problems
            assert any(str(d.code) == "GB0124" for d in latest.diagnostics)
    finally:
        await stop_server(client)
