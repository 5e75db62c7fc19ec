"""Code actions through the real server: each edit applied to the file, saved and re-analysed, and
every offered action on every fixture and example applied, compiled and imported (the pure
functions are `tests/actions/test_code_actions.py`)."""

from __future__ import annotations

import itertools
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp

import paths
from compile_lens.discovery import discover
from edits import apply_edits, edited, line_changes
from lsp_support import (
    change_file,
    locate,
    open_file,
    start_server,
    stop_server,
    wait_analyzed,
    wait_for,
)
from paths import REPO

FIXTURES = paths.FIXTURES / "actions"
in_server_loop = pytest.mark.asyncio(loop_scope="module")  # the loop the module's server runs in
VERSIONS = itertools.count(100)  # document versions: increasing, whichever test edits
CAPABILITIES = lsp.ClientCapabilities(text_document=lsp.TextDocumentClientCapabilities(
    code_action=lsp.CodeActionClientCapabilities(
        resolve_support=lsp.ClientCodeActionResolveOptions(properties=["edit"]),
        code_action_literal_support=lsp.ClientCodeActionLiteralOptions(
            code_action_kind=lsp.ClientCodeActionKindOptions(value_set=["quickfix", "refactor.rewrite"])))))


async def _start(root: Path):
    return await start_server(root, settings={"benchmark.onSave": False}, capabilities=CAPABILITIES)


def _workspace(factory, name: str, source: Path) -> Path:
    root = factory.mktemp(name) / "ws"
    shutil.copytree(source, root)
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ws(tmp_path_factory):
    root = _workspace(tmp_path_factory, "actions", FIXTURES)
    client = await _start(root)
    yield root, client
    await stop_server(client)


# --- helpers ------------------------------------------------------------------------------------

def signature(diagnostics, text: str) -> Counter:
    """What was found, independent of line numbers: (code, the text of its line)."""
    rows = text.splitlines()
    return Counter((str(d.code), rows[d.range.start.line].strip()) for d in diagnostics)


async def analysed(client, uri: str, since: int, timeout: float = 150.0) -> None:
    """Until the trace and the recompile sweep of `uri` announced after `compileLens/analyzed`
    number `since` are done (the sweep follows the trace)."""
    await wait_analyzed(client, uri, "swept", since=since, timeout=timeout)


async def open_and_settle(client, path: Path):
    since = len(client.analyzed)
    uri = open_file(client, path)
    await analysed(client, uri, since)
    return uri, client.diagnostics.get(uri, [])


async def save_and_settle(client, path: Path, text: str, version: int, *, reruns: bool = True):
    since = len(client.analyzed)
    change_file(client, path, text, version, save=True)
    if reruns:
        await analysed(client, path.as_uri(), since)
    return since


def the(diagnostics, code: str, needle: str, text: str):
    rows = text.splitlines()
    found = [d for d in diagnostics if d.code == code and needle in rows[d.range.start.line]]
    assert len(found) == 1, [(d.code, d.range.start.line) for d in diagnostics]
    return found[0]


async def request(client, uri: str, rng: lsp.Range, diagnostics=()):
    result = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=rng,
        context=lsp.CodeActionContext(diagnostics=list(diagnostics))))
    return [a for a in result or [] if isinstance(a, lsp.CodeAction)]


async def action_for(client, uri: str, diagnostic, title_start: str) -> lsp.CodeAction:
    offered = await request(client, uri, diagnostic.range, [diagnostic])
    chosen = [a for a in offered if a.title.startswith(title_start)]
    assert len(chosen) == 1, [a.title for a in offered]
    assert chosen[0].edit is None and chosen[0].data, "edits are computed on resolve"
    assert chosen[0].diagnostics and chosen[0].diagnostics[0].code == diagnostic.code
    resolved = await client.code_action_resolve_async(chosen[0])
    assert resolved.edit and resolved.edit.changes
    return resolved


def cursor(path: Path, needle: str) -> lsp.Range:
    line, col = locate(path, needle)
    return lsp.Range(lsp.Position(line, col), lsp.Position(line, col))


# --- through the server: apply, save, re-analyse ------------------------------------------------

@in_server_loop
async def test_wrap_construction_and_function_in_torch_compile(ws):
    root, client = ws
    path = root / "wrap.py"
    uri, before = await open_and_settle(client, path)
    text = path.read_text()
    assert not [d for d in before if str(d.code).startswith(("GB", "CL1", "CL0"))]

    offered = await request(client, uri, cursor(path, "model = Net()"))
    [wrap] = [a for a in offered if a.title.startswith("Wrap in torch.compile")]
    assert wrap.kind == lsp.CodeActionKind.RefactorRewrite
    wrap = await client.code_action_resolve_async(wrap)
    text2 = edited(wrap, uri, text)
    assert line_changes(text, text2) == ([("    model = Net()", "    model = torch.compile(Net())")], [])
    change_file(client, path, text2, next(VERSIONS), save=False)  # applied in the editor, not saved yet

    offered = await request(client, uri, cursor(path, "def scale"))
    [wrap_def] = [a for a in offered if a.title == "Wrap in torch.compile"]
    wrap_def = await client.code_action_resolve_async(wrap_def)
    text3 = edited(wrap_def, uri, text2)
    assert line_changes(text2, text3) == ([], ["@torch.compile"])
    assert "# compile-lens: inputs=(torch.randn(4, 8),)\n@torch.compile\ndef scale(x):" in text3

    await save_and_settle(client, path, text3, next(VERSIONS))
    after = client.diagnostics[uri]
    # the same findings as before; `scale` is a target now (its directive above the decorator):
    # traced without breaks, at most recompile information from its sweep
    new = signature(after, text3) - signature(before, text)
    assert all(code.startswith("CL21") for code, _ in new), new
    assert not signature(before, text) - signature(after, text3)
    for needle in ("model = torch.compile(Net())", "def scale"):  # already compiled: not offered
        assert not [a for a in await request(client, uri, cursor(path, needle)) if "torch.compile" in a.title]


@in_server_loop
async def test_dynamic_true_stops_the_recompile_warning(ws):
    root, client = ws
    path = root / "recompiles.py"
    uri, before = await open_and_settle(client, path)
    text = path.read_text()
    warning = next(d for d in before if d.code == "CL210")
    assert warning.data["changed"] == "x"
    fix = await action_for(client, uri, warning, "Compile `double` with dynamic=True")
    offered = await request(client, uri, warning.range, [warning])
    assert not [a for a in offered if "mark_dynamic" in a.title]  # no call of it in this file
    text2 = edited(fix, uri, text)
    assert line_changes(text, text2) == ([("@torch.compile", "@torch.compile(dynamic=True)")], [])
    await save_and_settle(client, path, text2, next(VERSIONS))
    after = client.diagnostics[uri]
    assert not [d for d in after if d.code == "CL210"]  # the size recompiles are gone
    kept = Counter({k: v for k, v in signature(before, text).items() if k[0] != "CL210"})
    assert signature(after, text2) == kept  # train/eval, requires_grad, autocast (CL213) stay


@in_server_loop
async def test_disable_a_helper_in_another_file(ws):
    root, client = ws
    model, helper = root / "uses_util.py", root / "pkg" / "util.py"
    helper_uri = open_file(client, helper)
    uri, before = await open_and_settle(client, model)
    text, helper_text = model.read_text(), helper.read_text()
    await wait_for(client, helper_uri, lambda ds: any(d.code == "GB0059" for d in ds))
    call_site = the(before, "GB0059", "h = debug(h)", text)
    fix = await action_for(client, uri, call_site, "Run `debug` outside the graph")
    assert list(fix.edit.changes) == [helper_uri]  # the edit goes to the helper's file
    helper2 = edited(fix, helper_uri, helper_text)
    assert helper2 == "import torch\n\n\n@torch.compiler.disable\n" + helper_text
    since = len(client.analyzed)
    change_file(client, helper, helper2, next(VERSIONS), save=True)  # re-traces the file that imports it
    await analysed(client, uri, since)
    assert not [d for d in client.diagnostics[helper_uri] if str(d.code).startswith("GB")]
    after = client.diagnostics[uri]
    # honest: the break inside `debug` is gone, the graph still breaks once where it is called
    assert [d.code for d in after if str(d.code).startswith("GB")] == ["GB0098"]
    assert the(after, "GB0098", "h = debug(h)", text)
    assert signature(after, text) - Counter({("GB0098", "h = debug(h)"): 1}) == \
        signature(before, text) - Counter({("GB0059", "h = debug(h)"): 1})


@in_server_loop
async def test_ignore_comment_silences_only_that_finding(ws):
    root, client = ws
    path = root / "breaks.py"
    uri, before = await open_and_settle(client, path)
    text = path.read_text()
    item = the(before, "GB0124", "y.sum().item()", text)
    fix = await action_for(client, uri, item, "Ignore GB0124 on this line")
    text2 = edited(fix, uri, text)
    assert line_changes(text, text2) == (
        [("        s = y.sum().item()", "        s = y.sum().item()  # compile-lens: ignore[GB0124]")], [])
    change_file(client, path, text2, next(VERSIONS), save=True)  # a comment: nothing re-runs
    after = await wait_for(client, uri, lambda ds: not [d for d in ds if d.code == "GB0124"])
    assert signature(after, text2) == signature(before, text) - Counter({("GB0124", "s = y.sum().item()"): 1})
    change_file(client, path, text, next(VERSIONS), save=True)
    await wait_for(client, uri, lambda ds: signature(ds, text) == signature(before, text))


@in_server_loop
async def test_write_inferred_inputs_as_a_directive(ws):
    root, client = ws
    path = root / "breaks.py"
    uri = open_file(client, path)
    text = path.read_text()
    before = await wait_for(client, uri, lambda ds: any(d.code == "GB0124" for d in ds))
    at = cursor(path, "ItemNet(nn.Module)")
    [write] = [a for a in await request(client, uri, at) if a.title.startswith("Write these inputs as a directive")]
    write = await client.code_action_resolve_async(write)
    text2 = edited(write, uri, text)
    assert line_changes(text, text2) == ([], ["# compile-lens: inputs=(torch.randn(8, 8),)"])
    assert "\n\n\n# compile-lens: inputs=(torch.randn(8, 8),)\nclass ItemNet" in text2
    change_file(client, path, text2, next(VERSIONS), save=True)  # a comment: nothing re-runs
    after = await wait_for(client, uri, lambda ds: signature(ds, text2) == signature(before, text))
    moved = lsp.Position(at.start.line + 1, at.start.character)
    [spec] = [t for t in discover(text2).targets if t.name == "ItemNet"]
    assert (spec.inputs.source, spec.inputs.text) == ("directive", "(torch.randn(8, 8),)")
    assert not [a for a in await request(client, uri, lsp.Range(moved, moved)) if a.title.startswith("Write")]
    assert signature(after, text2) == signature(before, text)
    change_file(client, path, text, next(VERSIONS), save=True)
    await wait_for(client, uri, lambda ds: signature(ds, text) == signature(before, text))


@in_server_loop
@pytest.mark.parametrize("code, needle, title, config", [
    ("GB0124", "y.sum().item()", "Capture .item() in the graph",
     "torch._dynamo.config.capture_scalar_outputs = True"),
    ("GB0059", 'print("shape", y.shape)', "Skip print() in compiled code",
     "torch._dynamo.config.ignore_logging_functions.add(print)"),
    ("GB0291", 'log.warning("halfway")', "Skip `log.warning()` in compiled code",
     "torch._dynamo.config.ignore_logging_functions.add(logging.Logger.warning)"),
])
async def test_config_fix_removes_its_break_and_nothing_else(ws, code, needle, title, config):
    # The fixes accumulate in breaks.py (as a user applying them one after another would).
    root, client = ws
    path = root / "breaks.py"
    uri = open_file(client, path)
    text = path.read_text()
    # settled: the trace and the recompile sweep (its findings arrive a moment after the trace)
    await wait_for(client, uri, lambda ds: any(d.code == code for d in ds))
    await analysed(client, uri, 0)
    before = client.diagnostics[uri]
    found = the(before, code, needle, text)
    fix = await action_for(client, uri, found, title)
    assert fix.is_preferred or code == "GB0059"
    text2 = edited(fix, uri, text)
    replaced, inserted = line_changes(text, text2)
    assert not replaced and config in inserted and set(inserted) <= {config, ""}
    assert text2.index(config) > text2.index("from torch import nn") and text2.index(config) < text2.index("log =")
    await save_and_settle(client, path, text2, next(VERSIONS))
    after = client.diagnostics[uri]
    assert not [d for d in after if d.code == code]
    assert signature(after, text2) == signature(before, text) - signature([found], text)


# --- a server of its own: what this fix sets must not leak into the files above ----------------

@in_server_loop
async def test_reorderable_print_fix(tmp_path_factory):
    root = _workspace(tmp_path_factory, "reorder", FIXTURES / "reorder")
    client = await _start(root)
    try:
        path = root / "reorder.py"
        uri, before = await open_and_settle(client, path)
        text = path.read_text()
        fix = await action_for(client, uri, the(before, "GB0059", 'print("hidden", h)', text),
                               "Print after the graph runs")
        text2 = edited(fix, uri, text)
        assert line_changes(text, text2) == (
            [], ["", "torch._dynamo.config.reorderable_logging_functions.add(print)"
                     "  # torch._dynamo.config: applies to the whole process, every compiled print"])
        await save_and_settle(client, path, text2, next(VERSIONS))
        after = client.diagnostics[uri]
        assert not [d for d in after if str(d.code).startswith("GB")]
        assert signature(after, text2) == signature(before, text) - Counter({("GB0059", 'print("hidden", h)'): 1})
    finally:
        await stop_server(client)


# --- every offered action, on every fixture and example: applied, compiled and imported -----------

IMPORTABLE_S = 3.0  # an original file that imports within this is checked after each edit
VARIANT_LIMIT_S = 10.0  # an edited file's import


def _import_check(originals: list[dict], variants: list[dict], tmp: Path) -> tuple[dict, dict]:
    """Import each original file, then each variant whose original imported within IMPORTABLE_S,
    with the worker's own loader: each original in a forked child of one process (that imports
    torch once), its variants one after another in the same child, as the worker re-imports a file
    after each edit (a fork apiece cost five times the import):
    ({id: ("ok" | "failed" | "timeout", seconds)} of the originals, the same of the variants)."""
    import json
    import subprocess
    import sys

    script = Path(__file__).parent.parent / "import_check.py"
    plan = {"originals": originals, "variants": variants, "importable_s": IMPORTABLE_S, "limit_s": VARIANT_LIMIT_S}
    out = subprocess.run([sys.executable, str(script)], input=json.dumps(plan), capture_output=True, text=True,
                         timeout=120 + (IMPORTABLE_S + 5) * len(originals) + (VARIANT_LIMIT_S + 5) * len(variants),
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    done = json.loads(out.stdout.strip().splitlines()[-1])
    return done["originals"], done["variants"]


async def _offered_everywhere(client, files: list[Path]) -> list[tuple[Path, lsp.CodeAction, lsp.CodeAction]]:
    """Every action the server offers on every line of each (open) file, with the diagnostics on
    that line, each resolved through the server: (file, offered, resolved)."""
    import json

    seen, found = set(), []
    for path in files:
        uri = path.as_uri()
        rows = path.read_text().split("\n")
        diagnostics = client.diagnostics.get(uri, [])
        for i, row in enumerate(rows):
            rng = lsp.Range(lsp.Position(i, 0), lsp.Position(i, len(row)))
            here = [d for d in diagnostics if d.range.start.line <= i <= d.range.end.line]
            for action in await request(client, uri, rng, here):
                key = (action.title, json.dumps(action.data, sort_keys=True))
                if key in seen:
                    continue
                seen.add(key)
                resolved = await client.code_action_resolve_async(action)
                assert resolved.edit and resolved.edit.changes and all(resolved.edit.changes.values()), \
                    f"{path.name}:{i + 1}: offered '{action.title}' resolves to no edit"
                found.append((path, action, resolved))
    return found


def _apply_everywhere(root: Path, found, tmp: Path) -> None:
    """Apply each action to a copy of the workspace; every edited file must compile, and every file
    it touched (and the file it was offered in) must import whenever the original does."""
    from pygls.uris import to_fs_path

    tmp.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in root.rglob("*.py") if ".compile-lens" not in p.parts)
    jobs, variants = [], {}
    for n, (path, action, resolved) in enumerate(found):
        copy = tmp / f"v{n}"
        # hard links: the copy costs no file's bytes; an edited file is a new file, never the link's
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".compile-lens", "*.import-error"),
                        copy_function=os.link)
        touched = {path}
        for uri, edits in resolved.edit.changes.items():
            target = Path(to_fs_path(uri))
            new = apply_edits(target.read_text(), edits)
            assert new != target.read_text(), f"'{action.title}' changes nothing"
            compile(new, str(target), "exec", dont_inherit=True)  # raises SyntaxError: the test fails
            (copy / target.relative_to(root)).unlink()
            (copy / target.relative_to(root)).write_text(new)
            touched.add(target)
        for target in sorted(touched):
            job = str(len(jobs))
            jobs.append({"id": job, "file": str(copy / target.relative_to(root)), "root": str(copy),
                         "original": str(target)})
            variants[job] = (path, action.title, target)
    # files that import (fault fixtures that loop, sleep or hog memory on purpose are compiled only):
    # one that takes longer than IMPORTABLE_S is not one, so its import is stopped there, and its
    # variants are not imported
    originals, statuses = _import_check([{"id": str(p), "file": str(p), "root": str(root)} for p in files], jobs, tmp)
    importable = {p for p, (status, seconds) in originals.items() if status == "ok" and seconds < IMPORTABLE_S}
    assert len(importable) > len(files) // 2, originals  # most fixtures import: the check is real
    assert statuses and set(statuses) == {job["id"] for job in jobs if job["original"] in importable}  # all of those
    broken = []
    for job, (status, _seconds) in statuses.items():
        if status != "ok":
            path, title, target = variants[job]
            error = Path(jobs[int(job)]["file"] + ".import-error")
            why = error.read_text().strip().splitlines()[-1] if error.exists() else status
            broken.append(f"{path.name}: '{title}' breaks {target.name}: {why}")
    assert not broken, "\n".join(broken)


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="function")
async def test_every_static_action_on_every_fixture_and_example_compiles_and_imports(tmp_path):
    """Static lints and targets (no code run: an untrusted workspace) on every file of
    tests/fixtures and examples/: each offered action applied."""
    root = tmp_path / "ws"
    shutil.copytree(REPO / "tests" / "fixtures", root / "fixtures")
    shutil.copytree(REPO / "examples", root / "examples")
    files = sorted(root.rglob("*.py"))
    client = await start_server(root, trusted=False, capabilities=CAPABILITIES)
    try:
        for path in files:
            uri = open_file(client, path)
            await wait_for(client, uri, lambda ds: True, timeout=30)
        found = await _offered_everywhere(client, files)
    finally:
        await stop_server(client)
    kinds = Counter(a.data["fix"] for _, a, _ in found)
    assert {"ignore", "wrap", "directive", "config"} <= set(kinds), kinds
    _apply_everywhere(root, found, tmp_path / "variants")


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="function")
@pytest.mark.parametrize("folder", ["examples", "tests/fixtures/actions"])
async def test_every_action_after_a_trace_compiles_and_imports(tmp_path, folder):
    """The same with the trace's and the sweep's findings (graph breaks at call sites, in helpers,
    recompiles): the GPT-2-shaped `lm_head.py` breaks inside a library-style `@property` that logs."""
    root = tmp_path / "ws"
    shutil.copytree(REPO / folder, root)
    files = sorted(p for p in root.rglob("*.py") if p.name != "pyproject.toml")
    client = await _start(root)
    try:
        with_targets = [p for p in files if (found := discover(p.read_text())) and any(t.inputs for t in found.targets)]
        for path in with_targets:
            await open_and_settle(client, path)
        for path in files:
            if path not in with_targets:
                uri = open_file(client, path)
                await wait_for(client, uri, lambda ds: True, timeout=30)
        assert any(str(d.code).startswith("GB") for ds in client.diagnostics.values() for d in ds)
        found = await _offered_everywhere(client, files)
    finally:
        await stop_server(client)
    if folder.endswith("actions"):
        lm = root / "lm_head.py"
        offered = [a.title for path, a, _ in found if path == lm]
        assert not [t for t in offered if "ignore_logging_functions" in t], offered  # no logger call on that line
        assert any("Run `loss_function` outside the graph" in t for t in offered), offered
    _apply_everywhere(root, found, tmp_path / "variants")
