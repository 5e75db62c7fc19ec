"""The first squiggle comes first: a file's graph breaks are published before anything the
recompile sweep finds, and before the sweep is announced (`benchmarks/editor/first_break.py` times
the way there; this only checks the order)."""

from __future__ import annotations

import shutil

import pytest

from lsp_support import open_file, start_server, stop_server, wait_analyzed
from paths import REPO

pytestmark = pytest.mark.asyncio


def _is_break(code) -> bool:
    return str(code).startswith("GB")


def _is_recompile(code) -> bool:
    return str(code).startswith("CL21")


async def test_breaks_are_published_before_the_sweep(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    shutil.copy(REPO / "examples" / "item_scale.py", root / "item_scale.py")  # `.item()`: a break and a recompile
    client = await start_server(root, settings={"benchmark.onSave": False})
    try:
        uri = open_file(client, root / "item_scale.py")
        await wait_analyzed(client, uri, "swept")
        mine = [(i, p) for i, p in enumerate(client.published) if p.uri == uri]
        first_break = next(i for i, p in mine if any(_is_break(d.code) for d in p.diagnostics))
        first_recompile = next(i for i, p in mine if any(_is_recompile(d.code) for d in p.diagnostics))
        order = {a.phase: after for a, after in zip(client.analyzed, client.analyzed_after) if a.uri == uri}
        assert first_break < order["traced"] <= order["swept"]  # the breaks are out when "traced" is said
        assert first_break < first_recompile < order["swept"]
        # the publish with the breaks does not carry any sweep finding: the sweep had not begun
        assert not any(_is_recompile(d.code) for d in client.published[first_break].diagnostics)
    finally:
        await stop_server(client)
