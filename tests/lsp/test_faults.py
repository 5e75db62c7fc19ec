"""The fault table: whatever user code does, the editor keeps working and no stale result is shown.

Each row drives the real server over stdio and ends by checking that the server is alive and that
a fresh good file (new code, so nothing comes from the cache) is traced correctly afterwards.
These rows share one server; the rows that need a server of their own are in test_faults_own_server.py.
Rows wait on what the server says (`compileLens/analyzed` for a file's phase and version, a
status) or on what the system shows (a worker's pid, a process exit, a log line), never on a fixed
sleep or a server-wide counter; the only sleeps left give something time to happen in a row that
proves it does not, and say so.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sqlite3
import time
from pathlib import Path

import pytest
import pytest_asyncio
from faults_support import (
    FAULTS,
    SETTINGS,
    Env,
    capture_log,
    coded,
    command,
    configure,
    gb,
    gone,
    good_file,
    line_of,
    reap,
    still_works,
    trace_started,
    traced,
    wait_gone,
    worker_pids,
)
from lsprotocol import types as lsp

from lsp_support import (
    analyzed,
    change_file,
    locate,
    open_file,
    start_server,
    stop_server,
    wait_analyzed,
    wait_for,
    wait_status,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory):
    base = tmp_path_factory.mktemp("faults")
    root = base / "ws"
    shutil.copytree(FAULTS, root)
    cache = base / "cache"
    cache.mkdir()
    (cache / "results.sqlite").write_bytes(b"this is not a database\x00\xff" * 512)  # the corrupt-cache row
    client = await start_server(root, settings=SETTINGS, cache_dir=cache)
    state = Env(root, client, cache)
    capture_log(client, state.log)
    await worker_pids(client, at_least=2)  # both up: from now on the first pid is the current worker
    yield state
    if state.killed:
        await client.stop()
    else:
        await stop_server(client)


# --- the fault table ----------------------------------------------------------------------------

async def test_segfault_in_forward_is_reported_on_the_target_and_the_worker_replaced(env):
    client, path = env.client, env.root / "segfault.py"
    before = await worker_pids(client, at_least=2)  # [current, spare]: before[0] runs the next job
    uri, found = await traced(client, path)
    target = line_of(path, "class Segfaults")
    after_line = line_of(path, "y.sum().item()")
    [crash] = coded(found, "CL003")
    assert crash.range.start.line == target
    assert "the analysis process crashed (signal 11" in crash.message and "Segfaults" in crash.message
    assert crash.severity == lsp.DiagnosticSeverity.Error and "Traceback" not in crash.message
    # the next target ran in the replacement worker: its break is there
    assert [(d.code, d.range.start.line) for d in gb(found)] == [("GB0124", after_line)]
    assert not analyzed(client, uri, "traced")[-1].ok, "a worker died: the trace is not all there"
    assert gone(before[0]), "the crashed worker is not left behind"
    now = await worker_pids(client)
    assert before[0] not in now
    await still_works(env, "segfault")


@pytest.mark.parametrize("name, needle, says", [
    ("missing_package.py", "import compile_lens_no_such_package", "install `compile_lens_no_such_package`"),
    ("missing_name.py", "from torch import no_such_name_in_torch", "no_such_name_in_torch"),
])
async def test_import_error_is_on_the_import_line(env, name, needle, says):
    client, path = env.client, env.root / name
    uri, found = await traced(client, path)
    [failed] = coded(found, "CL002")
    assert failed.range.start.line == line_of(path, needle)
    assert says in failed.message and "Traceback" not in failed.message
    await still_works(env, f"import-{name[:-3]}")


async def test_inferred_inputs_work_in_a_file_that_never_names_torch(env):
    """`from torch import nn` only: the inputs Compile Lens infers (`torch.randn(...)`) still evaluate."""
    client, path = env.client, env.root / "no_torch_name.py"
    uri, found = await traced(client, path)
    line = line_of(path, "y.sum().item()")
    assert not coded(found, "CL001"), coded(found, "CL001")[0].message
    assert [(d.code, d.range.start.line) for d in gb(found)] == [("GB0124", line)]
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))


async def test_infinite_loop_at_import_is_killed_at_the_timeout_setting(env):
    client, path = env.client, env.root / "import_loop.py"
    before = await worker_pids(client, at_least=2)  # [current, spare]: before[0] runs the next job
    configure(client, **{"worker.timeoutSeconds": 3})
    try:
        started = time.monotonic()
        _, found = await traced(client, path, timeout=60)
        elapsed = time.monotonic() - started
    finally:
        configure(client)
    [stopped] = coded(found, "CL003")
    assert "longer than 3 s" in stopped.message and "compileLens.worker.timeoutSeconds" in stopped.message
    assert 3 <= elapsed < 30, elapsed  # stopped at the setting, not at the 60 s default
    assert await wait_gone([before[0]], 5) == [], "the looping worker was killed"
    assert before[0] not in await worker_pids(client)
    await still_works(env, "loop")


async def test_syntax_error_mid_typing_hides_trace_results_until_the_code_matches_again(env):
    client = env.client
    path = good_file(env.root, "typing")
    text = path.read_text()
    line = line_of(path, "y.sum().item()")
    uri, found = await traced(client, path)
    assert [(d.code, d.range.start.line) for d in gb(found)] == [("GB0124", line)]
    mark, status_mark = len(client.analyzed), len(client.statuses)

    # typing: a half-written line that does not parse, then saved like that
    broken = text.replace("        y = self.fc(x)\n", "        y = self.fc(x\n")
    change_file(client, path, broken, version=2, save=False)
    shown = await wait_for(client, uri, lambda ds: not gb(ds))
    assert not gb(shown)
    change_file(client, path, broken, version=3, save=True)
    refused = await wait_analyzed(client, uri, "traced", version=3, since=mark)
    assert not refused.ok, "a saved file that does not parse is not analysed"
    # different code that parses (a line inserted above the break): the old break line is stale
    moved = text.replace("        y = self.fc(x)\n", "        y = self.fc(x)\n        y = y + 1\n")
    change_file(client, path, moved, version=4, save=False)
    await wait_for(client, uri, lambda ds: any(p.uri == uri and p.version == 4 for p in client.published))

    # back to the traced code: its results are current again, at their lines, and nothing ran
    change_file(client, path, text, version=5, save=True)
    back = await wait_analyzed(client, uri, "traced", version=5, since=mark)
    assert back.ok
    assert [(a.version, a.ok) for a in analyzed(client, uri, "traced", mark)] == [(3, False), (5, True)]
    assert not [s for s in client.statuses[status_mark:] if s.state == "tracing" and s.detail == path.name], \
        "a file that does not parse is never run, and the same code again is not traced again"
    for params in [p for p in client.published if p.uri == uri and p.version and 2 <= p.version <= 4]:
        assert not gb(params.diagnostics), f"stale trace result shown for version {params.version}"
    found = client.diagnostics[uri]
    assert [(d.code, d.range.start.line) for d in gb(found)] == [("GB0124", line)]
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    await still_works(env, "typing-after")


async def test_memory_growth_is_killed_at_the_memory_setting(env):
    client, path = env.client, env.root / "memory_hog.py"
    before = await worker_pids(client, at_least=2)  # [current, spare]: before[0] runs the next job
    configure(client, **{"worker.memoryLimitMB": 1500})
    try:
        _, found = await traced(client, path, timeout=60)
    finally:
        configure(client)
    [stopped] = coded(found, "CL003")
    assert "more than 1500 MB" in stopped.message and "compileLens.worker.memoryLimitMB" in stopped.message
    assert await wait_gone([before[0]], 5) == []
    await still_works(env, "memory")


async def test_hundred_edits_then_save_traces_only_the_final_version(env):
    client = env.client
    path = good_file(env.root, "edits")
    template = path.read_text()
    uri, found = await traced(client, path)
    assert gb(found)
    mark = len(client.analyzed)

    def version_text(k: int) -> str:
        extra = "".join("        y = y + 0\n" for _ in range(k % 7))
        return template.replace('TAG = "edits"', f'TAG = "edit-{k}"').replace(
            "        return y * y.sum().item()\n", extra + "        return y * y.sum().item()\n")

    texts = {1: template}
    first = len(client.published)
    started = time.monotonic()
    for k in range(2, 102):
        texts[k] = version_text(k)
        change_file(client, path, texts[k], version=k, save=(k == 101))
    assert time.monotonic() - started < 1.0
    final_line = line_of(path, "y.sum().item()")
    done = await wait_analyzed(client, uri, "traced", version=101, since=mark)
    assert done.ok
    found = client.diagnostics[uri]
    assert [(d.code, d.range.start.line) for d in gb(found)] == [("GB0124", final_line)]
    # the trace loop runs one trace of a file at a time, in order: any other would have ended first
    assert [a.version for a in analyzed(client, uri, "traced", mark)] == [101], \
        "only the saved (final) version is traced"

    history = [p for p in client.published[first:] if p.uri == uri]
    versions = [p.version for p in history]
    assert None not in versions and versions == sorted(versions), versions
    for params in history:
        lines = texts[params.version].splitlines()
        for d in gb(params.diagnostics):
            # version 1 is the traced one: its results may still go out (the trace's last publish, the
            # sweep's) until the server reads the first edit; `sorted` above keeps them before any later
            # version. No version the server never traced (2-100) may carry them.
            assert params.version in (1, 101), f"a trace result was published for version {params.version}"
            assert ".item()" in lines[d.range.start.line]
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    await still_works(env, "edits-after")


async def test_huge_output_and_raw_bytes_on_fd1_keep_the_stream_intact_and_the_log_short(env):
    client, path = env.client, env.root / "loud.py"
    log_start = len(env.log)
    uri, found = await traced(client, path)
    line = line_of(path, "y.sum().item()")
    assert [d.code for d in gb(found) if d.range.start.line == line] == ["GB0124"]
    assert [d.code for d in gb(found) if d.range.start.line == line_of(path, "raw bytes from forward")] == [
        "GB0007"]  # os.write: a C function Dynamo skips
    assert not coded(found, "CL002") and not coded(found, "CL003")
    # logged (stderr) when the trace job ends, before the notification (stdout): the two pipes are
    # read apart, so the log may come a moment later
    deadline = time.monotonic() + 30
    while "more characters of output not kept" not in "".join(env.log[log_start:]):
        assert time.monotonic() < deadline, "no user output in the log"
        await asyncio.sleep(0.1)
    logged = "".join(env.log[log_start:])
    assert "user code output (trace)" in logged and "yyyyyyyy" in logged
    kept = [int(n) for n in re.findall(r"\((\d+) more characters of output not kept\)", logged)]
    assert kept and max(kept) > 9_000_000, kept  # 10 MB printed, almost all of it left out
    assert len(logged) < 1_000_000, len(logged)
    await still_works(env, "loud")


async def test_sys_exit_and_os_exit_are_reported_and_the_worker_replaced(env):
    client, path = env.client, env.root / "exits.py"
    before = await worker_pids(client, at_least=2)  # [current, spare]: before[0] runs the next job
    uri, found = await traced(client, path)
    after_line = line_of(path, "y.sum().item()")
    assert [(d.code, d.range.start.line) for d in gb(found)] == [("GB0124", after_line)]
    on = {d.range.start.line: d for d in coded(found, "CL003")}
    sys_exit = on[line_of(path, "class CallsSysExit")]
    assert "sys.exit(3)" in sys_exit.message
    os_exit = on[line_of(path, "class CallsOsExit")]
    assert "exited (code 7)" in os_exit.message and "os._exit()" in os_exit.message
    assert "Traceback" not in sys_exit.message + os_exit.message
    assert gone(before[0]) and before[0] not in await worker_pids(client)
    await still_works(env, "exits")


async def test_each_phase_of_each_saved_version_is_announced_once(env):
    """`compileLens/analyzed`: the trace, then the recompile check, of the opened version; a
    comment-only save is announced as traced at its own version without running anything."""
    client = env.client
    path = good_file(env.root, "announced")
    mark, status_mark = len(client.analyzed), len(client.statuses)
    uri, _ = await traced(client, path)
    swept = await wait_analyzed(client, uri, "swept", version=1, since=mark)
    assert swept.ok
    assert [(a.phase, a.version, a.ok) for a in client.analyzed[mark:] if a.uri == uri] == [
        ("traced", 1, True), ("swept", 1, True)]
    line = line_of(path, "y.sum().item()")
    ran = len([s for s in client.statuses[status_mark:] if s.state == "tracing" and s.detail == path.name])

    change_file(client, path, "# a comment moves every line down\n" + path.read_text(), version=2, save=True)
    moved = await wait_analyzed(client, uri, "traced", version=2, since=mark)
    assert moved.ok
    assert [(d.code, d.range.start.line) for d in gb(client.diagnostics[uri])] == [("GB0124", line + 1)]
    assert len([s for s in client.statuses[status_mark:] if s.state == "tracing" and s.detail == path.name]) == ran, \
        "the same code is not traced again"
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))


async def test_corrupt_cache_is_discarded_and_rebuilt(env):
    await still_works(env, "cache")
    with sqlite3.connect(env.cache / "results.sqlite") as db:
        assert db.execute("SELECT count(*) FROM results").fetchone()[0] > 0
    lines = [line for line in env.log_text().splitlines() if "discarded and rebuilt" in line]
    assert len(lines) == 1, lines


async def test_file_closed_during_analysis_is_cleared_and_never_published_again(env):
    client, path = env.client, env.root / "slow_import.py"
    first_status = len(client.statuses)
    uri = open_file(client, path)
    await wait_for(client, uri, lambda ds: bool(coded(ds, "CL101")))  # the static lint on `print`
    await trace_started(client, first_status)
    closed_at, analyzed_at = len(client.published), len(client.analyzed)
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    # the lane runs one job at a time: once the next file is traced, the slow one is over
    await still_works(env, "closed")
    # proves nothing comes later: a moment for a late publish of the closed file to arrive
    await asyncio.sleep(0.5)
    assert not [a for a in client.analyzed[analyzed_at:] if a.uri == uri], "a closed file is never announced"
    after = [p for p in client.published[closed_at:] if p.uri == uri]
    assert after and all(not p.diagnostics for p in after), [
        [(d.code, d.range.start.line) for d in p.diagnostics] for p in after]
    assert not client.diagnostics[uri]


async def _oom_reported(client, uri: str, path: Path, timeout: float = 120.0) -> lsp.Diagnostic:
    target = line_of(path, "class OutOfMemory")

    def reported(ds):
        return any(d.range.start.line == target and "out of memory" in d.message for d in ds)

    found = await wait_for(client, uri, reported, timeout=timeout)
    [oom] = [d for d in found if d.range.start.line == target and "out of memory" in d.message]
    return oom


async def test_out_of_memory_during_a_benchmark_is_reported_on_the_target(env):
    """On CPU the target raises the error CUDA raises; `test_cuda_oom...` checks real GPU memory."""
    client, path = env.client, env.root / "bench_oom.py"
    uri, found = await traced(client, path)
    assert not coded(found, "CL001"), "it traces fine"
    mark = len(client.analyzed)
    reply = await command(client, "compileLens.measure", uri, "OutOfMemory")
    assert reply["started"] and not reply.get("queued"), reply
    await wait_analyzed(client, uri, "measured", version=1, since=mark, timeout=120)
    oom = await _oom_reported(client, uri, path, timeout=0)
    assert oom.code == "CL001" and "measuring failed" in oom.message and "smaller" in oom.message
    assert "Traceback" not in oom.message
    await still_works(env, "oom")


async def test_measure_clicked_before_the_trace_ends_still_reports(env):
    """The measurement waits for the trace; its outcome is shown even though the trace loop read
    the (unchanged) file again meanwhile."""
    client = env.client
    path = env.root / "bench_oom_early.py"
    path.write_text((env.root / "bench_oom.py").read_text() + '\nTAG = "early"\n')
    mark = len(client.analyzed)
    uri = open_file(client, path)
    reply = await command(client, "compileLens.measure", uri, "OutOfMemory")  # before its trace
    assert reply["started"], reply
    try:
        await wait_analyzed(client, uri, "measured", version=1, since=mark, timeout=60)
        await _oom_reported(client, uri, path, timeout=0)
    finally:
        env.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))


async def test_copy_of_a_traced_file_shows_the_breaks_in_itself(env):
    client = env.client
    await still_works(env, "original")
    original = env.root / "good_original.py"
    copy = env.root / "good_original_copy.py"
    shutil.copy(original, copy)
    uri, found = await traced(client, copy, timeout=30)
    line = line_of(copy, "y.sum().item()")
    try:
        assert [(d.code, d.range.start.line) for d in gb(found)] == [("GB0124", line)]
    finally:
        env.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))


async def test_a_stalled_compile_is_named_while_it_runs_and_in_the_timeout(env):
    """Quiet for a third of the limit: the status and the hover say the phase, the compile id and
    the user line Dynamo is tracing (from the worker's own stack); the timeout says the same."""
    client, path = env.client, env.root / "compile_stall.py"
    configure(client, **{"worker.timeoutSeconds": 6})
    try:
        mark = len(client.analyzed)
        since = len(client.statuses)
        uri = open_file(client, path)
        quiet = await wait_status(client, lambda s: "quiet" in (s.detail or ""), since=since, timeout=60)
        line = line_of(path, "return stall(y)") + 1  # 1-based in the words
        expected = f"compile 0/0, at compile_stall.py:{line} in forward"
        assert "Dynamo" in quiet.detail and expected in quiet.detail, quiet.detail
        target_line, col = locate(path, "class StallsInCompile")
        hover = await client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(uri), lsp.Position(target_line, col + len("class S"))))
        assert hover and "no progress now:" in hover.contents.value and expected in hover.contents.value, hover
        await wait_analyzed(client, uri, "traced", version=1, since=mark, timeout=60)
    finally:
        configure(client)
    [stopped] = coded(client.diagnostics[uri], "CL003")
    assert "longer than 6 s" in stopped.message and expected in stopped.message, stopped.message
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))



async def test_server_killed_mid_analysis_leaves_no_worker_behind(env):
    """Last of the shared-server rows: it kills that server. A worker stuck in user code exits too."""
    client = env.client
    pids = await command(client, "compileLens.workerPids")  # trace lane and benchmark lane
    first_status = len(client.statuses)
    open_file(client, env.root / "import_loop.py")  # keeps the current worker busy for good
    await trace_started(client, first_status)
    server = client._server
    os.kill(server.pid, signal.SIGKILL)
    env.killed = True
    await server.wait()
    try:
        assert await wait_gone(pids, 5) == [], "orphan workers after the server was killed"
    finally:
        reap(pids)
