"""The status the client shows: "idle" only when no lane works.

The trace lane and the deep lane (sweeps, measurements) run at once; each says "idle" when its own
job ends. Before, that went straight to the client, so the status bar (and anything waiting for
"idle") read "idle" while the other lane was still tracing. The real server object; the
notification it would send is recorded instead of written to a pipe.
"""

from __future__ import annotations

from compile_lens.lsp.state import STATUS, CompileLensServer


def shown(monkeypatch) -> tuple[CompileLensServer, list[tuple[str, str]]]:
    server, sent = CompileLensServer(), []

    def notify(method, params):
        assert method == STATUS
        sent.append((params["state"], params["detail"]))

    monkeypatch.setattr(server.protocol, "notify", notify)
    return server, sent


def test_a_lane_that_ends_shows_what_the_other_still_runs(monkeypatch):
    server, sent = shown(monkeypatch)
    server.status("tracing", "checking recompiles in a.py", lane="deep")
    server.status("tracing", "b.py", lane="trace")
    server.status("idle", lane="trace")  # b.py traced; a.py's sweep goes on
    assert sent[-1] == ("tracing", "checking recompiles in a.py")
    server.status("benchmarking", "compiling Net", lane="deep")
    server.status("idle", lane="deep")
    assert sent[-1] == ("idle", "") and server.busy == {}


def test_the_newest_work_is_shown_and_an_error_is_never_hidden(monkeypatch):
    server, sent = shown(monkeypatch)
    server.status("tracing", "a.py", lane="trace")
    server.status("benchmarking", "timing Net", lane="deep")
    server.status("tracing", "importing", lane="trace")  # the trace's progress: now the newest
    server.status("idle", lane="deep")
    assert sent[-1] == ("tracing", "importing")
    server.status("error", "analysis of a.py failed; see the log", lane="trace")
    assert sent[-1] == ("error", "analysis of a.py failed; see the log") and server.busy == {}


def test_a_status_without_a_lane_is_sent_as_it_is(monkeypatch):
    server, sent = shown(monkeypatch)
    server.status("tracing", "a.py", lane="trace")
    server.status("restricted", "untrusted workspace")
    assert sent[-1] == ("restricted", "untrusted workspace")
