"""`compile-lens import`: torch's structured trace of a run made elsewhere, on the workspace's lines.

The traces are real: the test programs (tests/data/trace_programs) run once per session with
`TORCH_TRACE` (and torch's own `TORCH_LOGS=graph_breaks,recompiles` as the reference) from a
"job" folder, and are imported onto a "workspace" copy at another path: the paths must be mapped.
The torchrun run has 2 ranks on gloo, rank 1 alone getting a shorter batch at step 3.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types as lsp

from compile_lens.ranks import RankEvent, parting_json, rank_divergence
from compile_lens.trace_import.fold import fold
from compile_lens.trace_import.paths import PathMap, parse_maps
from compile_lens.trace_import.report import import_trace
from lsp_support import open_file, start_server, stop_server, wait_for
from paths import DATA

PROGRAMS = DATA / "trace_programs"
BREAK_AT = re.compile(r"Graph break (?:\(user stack suppressed due to duplicate graph break\) )?in user code at (\S+):(\d+)")
TLPARSE = shutil.which("tlparse") or str(Path(sys.executable).parent / "tlparse")


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", "import", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONSAFEPATH": "1"})


def _env(trace: Path) -> dict[str, str]:
    return {**os.environ, "TORCH_TRACE": str(trace), "TORCH_LOGS": "graph_breaks,recompiles", "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> dict:
    """`TORCH_TRACE=dir python train_tiny_lm.py` in a job folder; the workspace is a copy elsewhere."""
    base = tmp_path_factory.mktemp("plain")
    job, ws, trace = base / "job" / "repo", base / "ws", base / "trace"
    for folder in (job, ws):
        folder.mkdir(parents=True)
        shutil.copy(PROGRAMS / "train_tiny_lm.py", folder / "train_tiny_lm.py")
    done = subprocess.run([sys.executable, "train_tiny_lm.py", "--backend", "aot_eager"], cwd=job,
                          capture_output=True, text=True, timeout=600, env=_env(trace))
    assert done.returncode == 0, done.stderr[-3000:]
    return {"ws": ws, "job": job, "trace": trace, "logs": done.stderr}


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> dict:
    """`TORCH_TRACE=dir torchrun --nproc-per-node 2 train_ddp_tiny.py` (gloo, CPU)."""
    base = tmp_path_factory.mktemp("ddp")
    job, ws, trace = base / "job", base / "ws", base / "trace"
    for folder in (job, ws):
        folder.mkdir()
        shutil.copy(PROGRAMS / "train_ddp_tiny.py", folder / "train_ddp_tiny.py")
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    done = subprocess.run([*torchrun, "train_ddp_tiny.py"], cwd=job, capture_output=True, text=True, timeout=600,
                          env=_env(trace))
    assert done.returncode == 0, done.stderr[-3000:]
    return {"ws": ws, "job": job, "trace": trace, "logs": done.stderr}


def _torch_breaks(logs: str, name: str) -> set[int]:
    return {int(m.group(2)) for m in BREAK_AT.finditer(logs) if m.group(1).endswith(name)}


@pytest.mark.slow
def test_import_gives_what_torch_logged_on_the_workspace_file(plain):
    done = run_cli(str(plain["trace"]), "--root", str(plain["ws"]), "--format", "json", cwd=plain["ws"])
    assert done.returncode == 1, done.stderr  # graph breaks are warnings, as in `check`
    doc = json.loads(done.stdout)
    entry = next(e for e in doc["files"] if e["path"] == str(plain["ws"] / "train_tiny_lm.py"))
    assert entry["mapped"] is True
    breaks = {g["line"] for t in entry["targets"] for g in t["graph_breaks"]}
    assert breaks == _torch_breaks(plain["logs"], "train_tiny_lm.py") and breaks
    recompiles = [r for t in entry["targets"] for r in t["recompiles"]]
    assert len(recompiles) == plain["logs"].count("Recompiling function") >= 2
    target = next(t for t in entry["targets"] if t["name"] == "forward")  # resume functions named as the user's
    assert target["rank"] is None and target["inputs"] is None and target["benchmark"] is None
    assert target["compile_s"] > 0 and set(target["cache"]) == {"hits", "misses"}
    gb = [d for d in entry["diagnostics"] if d["code"].startswith("GB")]
    assert {d["line"] for d in gb} == breaks
    assert all(d["source"] == "Compile Lens (imported trace)" for d in entry["diagnostics"])
    assert "compile 0/0" in gb[0]["message"]
    assert doc["ranks"][0]["torch"].startswith("2.") and doc["rank_divergence"] == []
    # a run at torch's defaults (aot_eager: no Inductor graph, the metrics' dynamo_config read): no setting claimed
    assert all(not s["values"] and s["read_from"] == "compilation_metrics" for t in entry["targets"] for s in t["settings"])
    assert target["call"] == {"site": None, "read_from": "settings", "backend": None} and target["explains"] == []
    assert "Settings off" not in json.dumps(entry["diagnostics"])


@pytest.mark.slow
def test_text_and_sarif(plain):
    text = run_cli(str(plain["trace"]), "--root", str(plain["ws"]), cwd=plain["ws"])
    assert "Imported torch trace: 1 log" in text.stdout
    assert re.search(r"train_tiny_lm\.py:\d+:\d+: GB0124 ", text.stdout), text.stdout
    sarif = json.loads(run_cli(str(plain["trace"]), "--root", str(plain["ws"]), "--format", "sarif",
                               cwd=plain["ws"]).stdout)
    results = sarif["runs"][0]["results"]
    assert any(r["ruleId"] == "GB0124" for r in results)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(TLPARSE), reason="tlparse is not installed (pip install tlparse)")
def test_tlparse_sees_the_same_compiles(plain, tmp_path):
    """tlparse's machine-readable index: the compiles it files recompile reasons and break reasons
    under are the compile ids `import` reports them at."""
    log = next(plain["trace"].glob("*.log"))
    out = tmp_path / "tl"
    done = subprocess.run([TLPARSE, str(log), "-o", str(out), "--no-browser"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    directory = json.loads((out / "compile_directory.json").read_text())

    def having(prefix: str) -> set[str]:
        return {k.strip("[]") for k, v in directory.items() if any(a["name"].startswith(prefix) for a in v["artifacts"])}

    with log.open() as stream:
        trace = fold(stream, str(log))
    assert having("recompile_reasons") == {r.compile_id for f in trace.functions for r in f.recompiles}
    assert having("dynamo_graph_break_reason") == {c for f in trace.functions for b in f.graph_breaks for c in b.compile_ids}


@pytest.mark.slow
def test_torchrun_ranks_and_where_they_part(ranks):
    done = run_cli(str(ranks["trace"]), "--root", str(ranks["ws"]), "--format", "json", cwd=ranks["ws"])
    doc = json.loads(done.stdout)
    assert done.returncode == 1
    per_rank = {r["rank"]: r["recompiles"] for r in doc["ranks"]}
    torch_says = {rank: len(re.findall(rf"^\[rank{rank}\]:.*Recompiling function", ranks["logs"], re.M)) for rank in (0, 1)}
    assert per_rank == torch_says and torch_says[1] > torch_says[0] == 0
    (parting,) = doc["rank_divergence"]
    assert parting["ranks"] == [1] and parting["other_ranks"] == [0] and "size mismatch" in parting["guard"]
    entry = next(e for e in doc["files"] if e["path"] == str(ranks["ws"] / "train_ddp_tiny.py"))
    assert sorted(t["rank"] for t in entry["targets"]) == [0, 1]
    # the recompile that parts them is shown where it happened: on rank 1 alone, at a compile rank 1 made
    rank1_ids = {c for t in entry["targets"] if t["rank"] == 1 for c in t["compile_ids"]}
    shown = [re.search(r"\(rank (\d+), compile (\S+)\)", d["message"]) for d in entry["diagnostics"]
             if d["message"].startswith("Recompiles")]
    assert shown and all(m and m.group(1) == "1" and m.group(2) in rank1_ids for m in shown), shown
    assert any(u["path"].endswith("contextlib.py") for u in doc["unmapped"])  # torch's own frames stay listed
    # a break inside DDP's code is also shown where the program called the model
    call = next(i for i, text in enumerate((ranks["ws"] / "train_ddp_tiny.py").read_text().splitlines(), 1)
                if "loss = model(" in text)
    assert any(d["line"] == call and d["data"].get("call_site") for d in entry["diagnostics"])
    text = run_cli(str(ranks["trace"]), "--root", str(ranks["ws"]), cwd=ranks["ws"]).stdout
    assert "error: ranks part at compile" in text


# --- bad input ----------------------------------------------------------------------------------

def test_not_a_trace(tmp_path):
    (tmp_path / "notes.log").write_text("hello\nworld\n")
    done = run_cli(str(tmp_path / "notes.log"), cwd=tmp_path)
    assert done.returncode == 2 and "not a torch structured trace" in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_cli(str(empty), cwd=tmp_path)
    assert done.returncode == 2 and "dedicated_log_torch_trace_" in done.stderr


def test_bad_map_is_refused(tmp_path):
    with pytest.raises(ValueError, match="REMOTE_PREFIX=LOCAL_PREFIX"):
        parse_maps(["/mnt/job"])


@pytest.mark.slow
def test_truncated_and_unknown_records(plain, tmp_path):
    log = next(plain["trace"].glob("*.log"))
    text = log.read_text()
    whole = import_trace(str(log), str(plain["ws"]))
    cut = tmp_path / "dedicated_log_torch_trace_cut.log"
    cut.write_text(text[: int(len(text) * 0.97)])  # mid-record: a run killed while writing
    half = import_trace(str(cut), str(plain["ws"]))
    assert any("ends mid-record" in n for n in half.notes) or half.traces[0].stats.truncated
    assert half.reports and half.reports[0].targets
    newer = tmp_path / "dedicated_log_torch_trace_newer.log"
    future = 'V1203 22:51:49.000000 1 torch/_dynamo/x.py:1] {"future_kind": {"x": 1}, "frame_id": 0, "frame_compile_id": 0, "has_payload": "0"}\n\t{\n\t"y": 2\n\t}\n'
    newer.write_text(future + text + future)
    read = import_trace(str(newer), str(plain["ws"]))
    assert read.traces[0].stats.unknown_kinds == {"future_kind": 2}
    assert read.traces[0].stats.not_records == 0  # its payload lines are skipped with it
    assert any("future_kind ×2" in n for n in read.notes)
    assert [len(t.graph_breaks) for r in read.reports for t in r.targets] == \
        [len(t.graph_breaks) for r in whole.reports for t in r.targets]


@pytest.mark.slow
def test_memory_does_not_grow_with_the_log(plain, tmp_path):
    text = next(plain["trace"].glob("*.log")).read_text()
    small, big = tmp_path / "small.log", tmp_path / "big.log"
    small.write_text(text * 2)
    copies = max(2, 20_000_000 // len(text))
    with big.open("w") as out:
        for _ in range(copies):
            out.write(text)
    assert big.stat().st_size >= 19_000_000

    def peak(path: Path) -> int:
        tracemalloc.start()
        with path.open() as stream:
            fold(stream, str(path))
        found = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return found

    small_peak, big_peak = peak(small), peak(big)
    assert big_peak < 2 * small_peak + 1_000_000, (small_peak, big_peak)  # the file is ≥ 10× larger


# --- paths and ranks (pure) ---------------------------------------------------------------------

def test_paths_by_unique_suffix_and_map(tmp_path):
    for rel in ("model/net.py", "a/utils.py", "b/utils.py", "train.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    paths = PathMap(str(tmp_path), parse_maps([f"/cluster/x={tmp_path}/a"]))
    assert paths.local("/mnt/job/repo/model/net.py") == str(tmp_path / "model" / "net.py")
    assert paths.local("/mnt/job/repo/utils.py") is None  # two files end so: a tie stays unmapped
    assert "2 workspace files" in paths.unmapped["/mnt/job/repo/utils.py"]
    assert paths.local("/cluster/x/utils.py") == str(tmp_path / "a" / "utils.py")
    assert paths.local("/usr/lib/python3.11/site-packages/train.py") is None  # a package's, not the workspace's
    assert paths.local("/mnt/job/other.py") is None
    assert paths.local("/opt/env/site-packages/x.py", listed=False) is None
    assert "/opt/env/site-packages/x.py" not in paths.unmapped  # a traceback's frame: looked for, not listed


def test_rank_divergence_shape():
    same = [RankEvent("recompile f 0/1", 2, "recompile of `f`", "x size")]
    assert rank_divergence({0: list(same), 1: list(same)}) == []
    odd = [RankEvent("recompile f 0/1", 5, "recompile of `f`", "tensor 'x' size mismatch"),
           RankEvent("recompile f 0/2", 7, "recompile of `f`", "B == 2")]
    assert [parting_json(p) for p in rank_divergence({0: [], 1: odd})] == [
        {"step": 5, "steps_apart": 3, "ranks": [1], "other_ranks": [0], "what": "recompile of `f`",
         "guard": "tensor 'x' size mismatch"}]


# --- the editor ---------------------------------------------------------------------------------

@pytest.mark.slow
async def test_editor_import_and_clear(plain):
    client = await start_server(plain["ws"], trusted=False)  # lints only: the live results stay cheap
    try:
        path = plain["ws"] / "train_tiny_lm.py"
        uri = open_file(client, path)
        await wait_for(client, uri, lambda _: True)  # the lints of the open
        live = [d for d in client.diagnostics.get(uri, []) if d.source == "Compile Lens"]
        answer = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            "compileLens.importTrace", [str(plain["trace"])]))
        assert answer["imported"] is True and answer["diagnostics"] > 0
        # what the CLI prints beside the findings, for the client to say (extension/src/importedTrace.ts)
        assert answer["divergence"] == [] and answer["unmapped_findings"] == 0 and isinstance(answer["notes"], list)
        assert isinstance(answer["unmapped"], list)
        # published before the command answers (one ordered stream): no wait
        shown = client.diagnostics[uri]
        imported = [d for d in shown if d.source == "Compile Lens (imported trace)"]
        assert {d.code for d in imported} >= {"GB0124"} and any("compile 0/0" in d.message for d in imported)
        assert [d for d in shown if d.source == "Compile Lens"] == live  # kept apart, nothing replaced
        answer = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            "compileLens.importTrace", [str(plain["ws"] / "train_tiny_lm.py")]))
        assert answer["imported"] is False and "not a torch structured trace" in answer["reason"]
        await client.workspace_execute_command_async(lsp.ExecuteCommandParams("compileLens.clearImportedTrace", []))
        assert [d for d in client.diagnostics[uri] if d.source != "Compile Lens"] == []
        assert [d for d in client.diagnostics[uri] if d.source == "Compile Lens"] == live
    finally:
        await stop_server(client)


# --- wrong shapes, fuzzed ------------------------------------------------------------------------

HUGE = "<a number of 5000 digits>"  # json.dumps cannot write one: put in the text after
WEIRD = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                  st.sampled_from([HUGE, -1, 0, 2**63]), st.floats(allow_nan=True, allow_infinity=True),
                  st.text(max_size=20), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3),
                                                                                              st.integers(), max_size=2))
PREFIX_RE = re.compile(r"^(?:\[rank\d+\]:)?[VIWEC]\d{4} [\d:.]+\s+\d+ [^\]]*\] ")


def _paths_in(value, path=()):
    """Every place inside a JSON value: (key or index, ...) paths."""
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths_in(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths_in(v, path + (i,))


def _replace(value, path, new):
    if not path:
        return new
    value[path[0]] = _replace(value[path[0]], path[1:], new)
    return value


@st.composite
def mutated_logs(draw, lines: list[str]) -> str:
    """A real log, mutated as a bad day mutates one: a field of a record of the wrong type (null, a
    list, a huge or negative number, NaN), a line cut short, binary junk, a record duplicated, two
    records swapped."""
    lines = list(lines)
    records = [i for i, t in enumerate(lines) if PREFIX_RE.match(t)]
    for _ in range(draw(st.integers(1, 6))):
        what = draw(st.sampled_from(("field", "field", "field", "cut", "junk", "duplicate", "swap")))
        i = draw(st.sampled_from(records))
        if what == "field":
            head = PREFIX_RE.match(lines[i])
            if head is None:
                continue
            try:
                data = json.loads(lines[i][head.end():])
            except ValueError:  # already cut, or holds a huge number
                continue
            places = list(_paths_in(data))[1:]
            if places:
                data = _replace(data, draw(st.sampled_from(places)), draw(WEIRD))
            lines[i] = head.group(0) + json.dumps(data).replace(json.dumps(HUGE), "9" * 5000)
        elif what == "cut":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif what == "junk":
            junk = draw(st.binary(min_size=1, max_size=40)).decode("latin-1")
            lines.insert(i, junk.replace("\n", ""))
        elif what == "duplicate":
            lines.insert(i, lines[i])
        else:
            j = draw(st.sampled_from(records))
            lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines) + ("\n" if draw(st.booleans()) else "")


@pytest.fixture(scope="module")
def log_lines(plain) -> list[str]:
    return next(plain["trace"].glob("*.log")).read_text().splitlines()


@pytest.mark.slow
def test_import_never_raises_on_content(plain, log_lines, tmp_path_factory):
    """`compile-lens import` (main(), in-process: the reader, the fold, the report and the three
    renderers) on mutated real traces: exit 0, 1 or 2, never an exception, an internal error or
    output that is not JSON."""
    from compile_lens.cli.main import main

    folder = tmp_path_factory.mktemp("fuzz")
    log = folder / "dedicated_log_torch_trace_fuzz.log"
    seen: dict[int, int] = {}

    @settings(max_examples=int(os.environ.get("COMPILE_LENS_FUZZ_EXAMPLES", "120")), deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(text=mutated_logs(log_lines), form=st.sampled_from(("text", "json", "sarif")))
    def run(text: str, form: str) -> None:
        log.write_text(text, encoding="utf-8", errors="surrogateescape")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["import", str(log), "--root", str(plain["ws"]), "--format", form])
        seen[code] = seen.get(code, 0) + 1
        assert code in (0, 1, 2), err.getvalue()
        assert "internal error" not in err.getvalue() and "Traceback" not in err.getvalue(), err.getvalue()
        if code != 2 and form != "text":
            json.loads(out.getvalue(), parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))

    run()
    assert seen.get(1), seen  # the mutations leave most of the trace readable: its breaks still warn


def test_wrong_shapes_are_counted_and_named(tmp_path):
    """The issue's cases: a file name that is a list, a frame id that is a list, a line that is no
    number: skipped and named by line, what else the log holds still read."""
    head = "V1203 22:51:49.123000 7406 torch/_dynamo/x.py:12] "
    good = [{"str": ["/job/m.py", 0]},
            {"dynamo_start": {"stack": [{"line": 3, "name": "forward", "filename": 0}]}, "frame_id": 0,
             "frame_compile_id": 0, "attempt": 0},
            {"compilation_metrics": {"compile_id": "0/0", "co_name": "forward", "co_filename": "/job/m.py",
                                     "co_firstlineno": 3, "entire_frame_compile_time_s": 0.5}, "frame_id": 0,
             "frame_compile_id": 0, "attempt": 0}]
    bad = [{"str": [[1], 1]},
           {"dynamo_start": {"stack": [{"line": "x", "name": "f", "filename": [1]}]}, "frame_id": 1,
            "frame_compile_id": 0},
           {"dynamo_start": {"stack": []}, "frame_id": [0], "frame_compile_id": 0},
           {"compilation_metrics": {"compile_id": "0/1", "co_name": "forward", "entire_frame_compile_time_s": -3},
            "frame_id": 0, "frame_compile_id": 1}]
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text("".join(head + json.dumps(r) + "\n" for r in good + bad))
    with log.open() as stream:
        trace = fold(stream, str(log))
    assert trace.stats.wrong_shape == 4 and trace.stats.wrong_shape_lines == [4, 5, 6, 7]
    (fn,) = trace.functions
    assert (fn.name, fn.line, fn.compile_ids, fn.compile_s) == ("forward", 3, ["0/0"], 0.5)
    imported = import_trace(str(log), str(tmp_path))
    assert any("4 records of a shape torch does not write were skipped (lines 4, 5, 6, 7)" in n for n in imported.notes)


@pytest.mark.slow
def test_logs_without_ranks_are_runs_apart(plain, tmp_path):
    """Two single-process runs in one folder (check --trace-dir written twice) do not part: they are
    reported apart, with a note, and exit as each would (no 'ranks part' error)."""
    log = next(plain["trace"].glob("*.log"))
    text = log.read_text()
    (tmp_path / "dedicated_log_torch_trace_a.log").write_text(text)
    first_recompile = text.index('"recompile_reasons"')
    (tmp_path / "dedicated_log_torch_trace_b.log").write_text(text[: text.rfind("\n", 0, first_recompile) + 1])
    done = run_cli(str(tmp_path), "--root", str(plain["ws"]), "--format", "json", cwd=plain["ws"])
    doc = json.loads(done.stdout)
    assert doc["rank_divergence"] == [] and [r["rank"] for r in doc["ranks"]] == [None, None]
    assert any("each is a run of its own" in n for n in doc["notes"])
    assert done.returncode == 1 and "ranks part" not in done.stderr + done.stdout  # the breaks, not a parting
    # the same logs named as ranks are compared, and part
    for name, rank in (("a", 0), ("b", 1)):
        (tmp_path / f"dedicated_log_torch_trace_{name}.log").rename(tmp_path / f"dedicated_log_torch_trace_rank_{rank}_{name}.log")
    doc = json.loads(run_cli(str(tmp_path), "--root", str(plain["ws"]), "--format", "json", cwd=plain["ws"]).stdout)
    assert doc["rank_divergence"] and doc["rank_divergence"][0]["ranks"] == [0]


@pytest.mark.slow
def test_import_sarif_has_its_own_category_and_limits(plain):
    sarif = json.loads(run_cli(str(plain["trace"]), "--root", str(plain["ws"]), "--format", "sarif",
                               cwd=plain["ws"]).stdout)
    (run,) = sarif["runs"]
    assert run["automationDetails"]["id"] == "compile-lens/import/"
