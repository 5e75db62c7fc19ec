"""The codes registry (compile_lens.codes): every code has a title and a page that documents it,
the server's diagnostics link to it, and no module matches a CL code as a bare string."""

from __future__ import annotations

import ast
import json
import os
import re
import textwrap
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import torch._dynamo.exc

from compile_lens import codes, lints
from lsp_support import open_file, start_server, stop_server, wait_for

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "server" / "compile_lens"
DOCS = ROOT / "docs" / "codes.md"


def _anchors(text: str) -> set[str]:
    return set(re.findall(r'<a id="([^"]+)"></a>', text))


def test_docs_have_one_entry_per_code_and_nothing_else():
    text = DOCS.read_text()
    headings = re.findall(r"^### (\S+) — (.+)$", text, re.M)
    assert {code for code, _ in headings} == set(codes.CODES) | {"GBxxxx"}
    for code, heading in headings:
        if code in codes.CODES:
            assert heading.lower() == codes.CODES[code].title.lower(), code  # the page and the registry agree
    assert _anchors(text) == {codes.anchor(c) for c in codes.CODES} | {"gbxxxx"}
    # the table of contents points at anchors that exist
    assert set(re.findall(r"\]\(#([^)]+)\)", text)) == _anchors(text)


def test_the_codes_pages_table_names_only_registered_codes():
    page = DOCS.read_text()
    table = page.split("## At a glance", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"^\| `([^`]+)`", table, re.M))
    for row in named:
        first = row.split("`")[0]
        assert first == "GBxxxx" or first in codes.CODES, row
    # and every registered code is in the page's table (CL101–CL107 as one row)
    listed = {c for c in codes.CODES if f"`{c}`" in table}
    assert set(codes.CODES) - listed <= {"CL102", "CL103", "CL104", "CL105", "CL106"}


def test_every_code_literal_in_the_server_is_registered_and_cl_codes_live_only_in_codes_py():
    """Code matching goes through codes.py: a CL code written as a string anywhere else fails here."""
    stray = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.fullmatch(r"CL\d{3}", node.value) and path.name != "codes.py":
                stray.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.value}")
    assert stray == []
    source = (PACKAGE / "codes.py").read_text()
    literals = set(re.findall(r'"(CL\d{3}|GB\d{4})"', source))
    assert {c for c in literals if c.startswith("CL")} == {c for c in codes.CODES if c.startswith("CL")}


def test_lint_table_is_the_registry_rows_of_the_lints():
    assert lints.CODES == {c: (codes.CODES[c].severity, codes.CODES[c].title) for c in codes.LINTS}


def test_cl_links_point_at_this_checkouts_page_and_anchor():
    for code in codes.CODES:
        href = codes.href(code)
        assert href is not None, code
        if codes.is_gb_id(code):
            continue
        url = urlparse(href)
        assert url.scheme == "file" and Path(unquote(url.path)) == DOCS.resolve()
        assert url.fragment in _anchors(DOCS.read_text())
    assert codes.href("no-such-code") is None


def _gb_type_of(gb_id: str) -> str:
    registry = json.loads((Path(torch._dynamo.__file__).parent / "graph_break_registry.json").read_text())
    return registry[gb_id][0]["Gb_type"]


@pytest.mark.parametrize("gb_id", ["GB0124", "GB0059", "GB0291", "GB7000"])
def test_gb_links_are_the_ones_torch_gives(gb_id):
    """The server writes torch's URL pattern out (it never imports torch): it must match torch's own."""
    assert codes.href(gb_id) == torch._dynamo.exc.get_gbid_documentation_link(_gb_type_of(gb_id))


async def test_lint_diagnostics_link_to_their_entry(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent("""\
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self, width: int = 4):
                super().__init__()
                self.fc = nn.Linear(width, width)

            def forward(self, x, scale=None):
                print(x.shape)
                return self.fc(x).sum().item()
        """))
    client = await start_server(tmp_path, trusted=False)  # static lints only: no code runs
    try:
        uri = open_file(client, path)
        found = await wait_for(client, uri, lambda ds: {"CL101", "CL102"} <= {str(d.code) for d in ds})
    finally:
        await stop_server(client)
    for d in found:
        assert d.code_description is not None, d.code
        url = urlparse(d.code_description.href)
        assert url.scheme == "file" and os.path.samefile(unquote(url.path), DOCS)
        assert url.fragment == str(d.code).lower()
