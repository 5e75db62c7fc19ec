"""`make bench`: open → the first graph-break squiggle, against in-process `torch._dynamo.explain`.

Through the real server over stdio (a bare JSON client, `benchmarks.common.WireClient`: it times the server and the
pipe), with its trace worker already warm: didOpen of a small program that breaks the graph, then
the first publishDiagnostics that carries a GB code. The floor is `torch._dynamo.explain` of the
same model with the same inputs in one warm process (this script's helper), timed right before
each open, so the two share the machine's load; the figure is the median over the programs of
(median open → squiggle) / (median explain), the issue's goal ≤ 1.2.

Each open is of new code (a line `_bench_round = N` is added), so no cached trace answers it; the
file is closed once its trace is announced, before any recompile sweep starts. The server runs
with `COMPILE_LENS_LOG_LEVEL=DEBUG`, which makes it log a timeline of each first publish
(`compile_lens.timeline`): wall and CPU time per stage, in the server and in the worker.

Prints the ratio and the stage that moved most against the last run kept in
build/bench_first_break.json (then overwritten; `--keep` leaves it). Times nothing in `make test`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[2]
from benchmarks.common import WireClient  # noqa: E402
from benchmarks.models.first_break_small import SMALL_PROGRAMS  # noqa: E402
from compile_lens.timeline import PREFIX  # noqa: E402

RESULT = REPO / "build" / "bench_first_break.json"
GOAL = 1.2

# Small programs that break the graph, one way each, then the real-shaped and multi-target files
PROGRAMS: dict[str, str] = dict(SMALL_PROGRAMS)

# Real-shaped programs (module-level numpy/logging, helpers, dataclass configs, a nested package of
# the project's own): benchmarks/models/first_break_programs/, its `mylib/` copied beside them.
REAL_SHAPED = REPO / "benchmarks" / "models" / "first_break_programs"
PROGRAMS.update({p.name: p.read_text() for p in sorted(REAL_SHAPED.glob("rs_*.py"))})
# Files of 100–400 lines with several targets and helper imports (issue 52, item 4): the server traces
# their targets one after another (`discovery.measure_order`), so the floor explains them in that order
# up to the first one that breaks.
PROGRAMS.update({p.name: p.read_text() for p in sorted(REAL_SHAPED.glob("mt_*.py"))})


# The floor: one warm process that imports each program once and times explain on request.
FLOOR = r'''
import json, os, sys, time
answers = os.fdopen(os.dup(1), "w")  # the programs print: their output goes to stderr
os.dup2(2, 1)
sys.stdout = sys.stderr
import torch, torch._dynamo
from compile_lens.discovery import discover, measure_order
from compile_lens.worker.loader import import_file, build_target
root = sys.argv[1]
built = {}

def explain(target):
    try:
        return torch._dynamo.explain(target.make())(*target.args).graph_break_count
    except Exception:  # a target whose guessed inputs do not fit: the server says so, no squiggle
        return 0

print("ready", file=answers, flush=True)
for line in sys.stdin:
    path = line.strip()
    if path not in built:  # the targets in the order the server traces them
        module = import_file(path, root)
        found = discover(open(path).read())
        specs = {t.name: t for t in found.targets if t.inputs is not None}
        built[path] = []
        for name in (n for n in measure_order(found).names if n in specs):
            try:
                built[path].append(build_target(module, specs[name], path))
            except Exception:  # the server says why (a finding) and traces the next
                pass
        for target in built[path]:
            explain(target)  # warm-up
    wall = cpu = 0.0
    for n, target in enumerate(built[path], 1):  # up to the first target that breaks
        w, c = time.perf_counter(), time.process_time()
        breaks = explain(target)
        alone = {"wall": time.perf_counter() - w, "cpu": time.process_time() - c}
        wall, cpu = wall + alone["wall"], cpu + alone["cpu"]
        if breaks:
            break
    print(json.dumps({"wall": wall, "cpu": cpu, "breaks": breaks, "targets": n,
                      "last_alone": alone if n > 1 else None}), file=answers, flush=True)
'''


class Floor:
    def __init__(self, root: Path):
        self.root = root
        self.log = tempfile.TemporaryFile("w+")  # the programs' prints, and the reason if it fails
        self.process = subprocess.Popen([sys.executable, "-c", FLOOR, str(root)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)
        self._answer()

    def _answer(self) -> str:
        line = self.process.stdout.readline()
        if not line:
            self.log.seek(0)
            raise SystemExit(f"the explain process failed:\n{self.log.read()[-3000:]}")
        return line

    def explain(self, path: Path) -> dict:
        self.process.stdin.write(f"{path}\n")
        self.process.stdin.flush()
        return json.loads(self._answer())

    def stop(self) -> None:
        self.process.stdin.close()
        self.process.wait(30)


# --- the server's timeline -------------------------------------------------------------------

# Stages, each from the mark before it to its own (marks in `compile_lens.timeline`'s order; a
# mark that is not there is skipped: its time goes to the next stage).
STAGES = [
    ("open", "client → server (didOpen read)"),
    ("linted", "lint + buffer discovery + lint publish"),
    ("loop", "queued: the trace task starts"),
    ("read", "discovery of the saved file (+ deps)"),
    ("keys", "cache keys + cache lookups"),
    ("job sent", "job to the worker (lane wait, JSON)"),
    ("received", "pipe to the worker"),
    ("imported", "worker: import the file"),
    ("earlier", "worker: the targets traced before it"),
    ("built", "worker: build the target"),
    ("explained", "worker: dynamo trace (explain)"),
    ("collected", "worker: collect/merge breaks"),
    ("sending", "worker: result ready"),
    ("event", "pipe back (JSON both ends)"),
    ("accepted", "server: accept the result"),
    ("merged", "server: findings merged"),
    ("encoded", "server: diagnostics encoded"),
    ("published", "server: publish written"),
    ("client", "server → client (publish read)"),
]


PER_TARGET = {"built", "explained", "collected", "sending", "event"}


def stage_times(marks: list, sent: float, arrived: float) -> dict[str, dict[str, float]]:
    """{stage: {wall, cpu}} from one timeline, with the client's send and arrival times around it. A file
    with several targets: each result's event carries the worker's marks so far, so the marks repeat;
    a target's own stages are the breaking one's (the last), and those before it are one stage."""
    unique = list(dict.fromkeys(tuple(m) for m in marks))
    at = {"start": (sent, None, None)}
    for stage, when, cpu, process in unique:
        if stage in PER_TARGET:
            at[stage] = (when, cpu, process)
        else:
            at.setdefault(stage, (when, cpu, process))
    ends = [(when, cpu, process) for stage, when, cpu, process in unique if stage == "sending"]
    if len(ends) > 1:
        at["earlier"] = ends[-2]
    at["client"] = (arrived, None, None)
    out: dict[str, dict[str, float]] = {}
    prev = at["start"]
    for stage, _ in STAGES:
        if stage not in at:
            continue
        now = at[stage]
        cpu = (now[1] - prev[1]) if now[1] is not None and prev[1] is not None and now[2] == prev[2] else None
        out[stage] = {"wall": now[0] - prev[0], "cpu": cpu if cpu is not None else float("nan")}
        prev = now
    return out


def timeline_of(client: WireClient, uri: str, since: int) -> Optional[list]:
    for _, line in client.log_lines[since:]:
        at = line.find(PREFIX)
        if at >= 0:
            data = json.loads(line[at + len(PREFIX):])
            if data["uri"] == uri:
                return data["marks"]
    return None


# --- the runs ----------------------------------------------------------------------------------

async def open_once(client: WireClient, path: Path, source: str, close: bool = True) -> dict[str, Any]:
    """didOpen → the first publish with a GB code; then wait for the trace's end and close (unless
    not `close`: then its recompile sweep starts a second later, beside the next opens)."""
    uri = path.as_uri()
    path.write_text(source)
    published, notes, logs = len(client.published), len(client.notifications), len(client.log_lines)
    loop = asyncio.get_running_loop()
    sent = loop.time()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                             "text": source}})

    def first_break():
        return next((at for at, p in client.published[published:] if p["uri"] == uri and p["gb"]), None)

    def traced():
        return next((p for _, m, p in client.notifications[notes:]
                     if m == "compileLens/analyzed" and p["uri"] == uri and p["phase"] == "traced"), None)

    arrived = await asyncio.wait_for(client.wait_for(first_break), 120)
    note = await asyncio.wait_for(client.wait_for(traced), 120)
    try:  # logged before the publish is written; the log's pipe may lag the LSP's a little
        marks = await asyncio.wait_for(client.wait_for(lambda: timeline_of(client, uri, logs)), 2)
    except asyncio.TimeoutError:  # a server without timelines: the total only
        marks = []
    if close:
        count = len(client.published)
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        await client.wait_for(lambda: next((1 for _, p in client.published[count:] if p["uri"] == uri), None))
    stages = stage_times(marks, sent, arrived)
    return {"s": arrived - sent, "ok": note["ok"], "stages": stages, "server_cpu_meanwhile": _meanwhile(marks),
            # the CPU spent on the way, both processes: each stage's, and the server's beside the worker
            "cpu": sum(s["cpu"] for s in stages.values() if s["cpu"] == s["cpu"]) + _meanwhile(marks) if marks
            else float("nan")}


def _meanwhile(marks: list) -> float:
    """The server's CPU while the worker worked (between sending the job and reading its result)."""
    cpu = {stage: c for stage, _, c, process in marks if process == "server"}
    return cpu["event"] - cpu["job sent"] if "event" in cpu and "job sent" in cpu else float("nan")


async def workers_warm(client: WireClient) -> None:
    """The trace worker and its spare both started (the spare's torch import would share the CPU)."""
    while len(await client.request("workspace/executeCommand",
                                   {"command": "compileLens.workerPids", "arguments": []}) or []) < 2:
        await asyncio.sleep(0.5)  # nothing announces the spare; started once, outside the timings


async def run(rounds: int, names: list[str], keep_open: bool = False, measure: bool = False) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="compile-lens-first-break-"))
    root = work / "programs"
    root.mkdir()
    shutil.copytree(REAL_SHAPED / "mylib", root / "mylib")
    for name in names:
        (root / name).write_text(PROGRAMS[name])
    floor = Floor(root)
    client = await WireClient.start(root, trusted=True, settings={"benchmark": {"onSave": measure}},
                                    env={"COMPILE_LENS_LOG_LEVEL": "DEBUG"}, log=True)
    await workers_warm(client)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    floors: dict[str, list[dict]] = {name: [] for name in names}
    load = [os.getloadavg()[0]]
    for round_ in range(rounds + 1):  # round 0 warms both sides up, uncounted
        for name in names:
            path = root / name
            explained = floor.explain(path)
            if keep_open:  # a file per open: each stays open, its sweep runs
                path = root / f"{path.stem}_{round_}.py"
            opened = await open_once(client, path, PROGRAMS[name] + f"\n_bench_round = {round_}\n", close=not keep_open)
            if round_:
                floors[name].append(explained)
                runs[name].append(opened)
        load.append(os.getloadavg()[0])
    await client.stop()
    floor.stop()
    shutil.rmtree(work, ignore_errors=True)
    return {"runs": runs, "floors": floors, "load": load, "keep_open": keep_open, "measure": measure}


# --- figures ----------------------------------------------------------------------------------

def median(values: list[float]) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def _stages(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """{stage: {wall_ms, cpu_ms}}, the median over the opens that have it."""
    stages: dict[str, dict[str, float]] = {}
    for stage, _ in STAGES:
        walls = [r["stages"][stage]["wall"] for r in runs if stage in r["stages"]]
        cpus = [r["stages"][stage]["cpu"] for r in runs if stage in r["stages"]]
        if walls:
            stages[stage] = {"wall_ms": median(walls) * 1000, "cpu_ms": median(cpus) * 1000}
    return stages


def figures(raw: dict[str, Any]) -> dict[str, Any]:
    per_program = {}
    for name, runs in raw["runs"].items():
        server = median([r["s"] for r in runs])
        floor = median([f["wall"] for f in raw["floors"][name]])
        floor_cpu = median([f["cpu"] for f in raw["floors"][name]])
        server_cpu = median([r["cpu"] for r in runs])
        per_program[name] = {"open_to_break_s": server, "explain_s": floor, "ratio": server / floor,
                             "cpu_s": server_cpu, "explain_cpu_s": floor_cpu, "cpu_ratio": server_cpu / floor_cpu,
                             "traced_ok": all(r["ok"] for r in runs)}
        explained = raw["floors"][name]
        if explained and explained[0].get("targets", 1) > 1:  # explain's own order up to the breaking target
            per_program[name].update(targets=explained[0]["targets"],
                                      explain_breaking_s=median([f["last_alone"]["wall"] for f in explained]))
        per_program[name]["stages"] = _stages(runs)
    stages = _stages([r for runs in raw["runs"].values() for r in runs])
    return {
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "load": {"start": raw["load"][0], "end": raw["load"][-1], "max": max(raw["load"])},
        "rounds": len(next(iter(raw["runs"].values()))),
        "median_open_to_break_s": median([p["open_to_break_s"] for p in per_program.values()]),
        "median_explain_s": median([p["explain_s"] for p in per_program.values()]),
        "median_explain_cpu_s": median([p["explain_cpu_s"] for p in per_program.values()]),
        "median_ratio": median([p["ratio"] for p in per_program.values()]),
        "median_cpu_ratio": median([p["cpu_ratio"] for p in per_program.values()]),
        "programs": per_program,
        "stages": stages,
        "server_cpu_meanwhile_ms": median([r["server_cpu_meanwhile"] for runs in raw["runs"].values() for r in runs]) * 1000,
        "keep_open": raw.get("keep_open", False), "measure": raw.get("measure", False),
    }


def report(f: dict[str, Any], previous: Optional[dict[str, Any]]) -> str:
    rows = [f"open → first graph-break squiggle vs in-process torch._dynamo.explain, {f['rounds']} opens each "
            f"(load {f['load']['start']:.1f} → {f['load']['end']:.1f}, max {f['load']['max']:.1f})", ""]
    for name, p in f["programs"].items():
        rows.append(f"  {name:<16} {p['open_to_break_s'] * 1000:7.1f} ms   explain {p['explain_s'] * 1000:6.1f} ms"
                    f"   ×{p['ratio']:.2f}   CPU {p['cpu_s'] * 1000:6.1f} vs {p['explain_cpu_s'] * 1000:6.1f} ms ×{p['cpu_ratio']:.2f}"
                    f"{'' if p['traced_ok'] else '   (a trace did not end ok)'}")
        if "targets" in p:
            rows.append(f"  {'':<16} explain of the {p['targets']} targets up to the breaking one; the breaking one "
                        f"alone {p['explain_breaking_s'] * 1000:.1f} ms (×{p['open_to_break_s'] / p['explain_breaking_s']:.2f})")
    verdict = "within" if f["median_ratio"] <= GOAL else "OVER"
    rows += ["", f"median: {f['median_open_to_break_s'] * 1000:.1f} ms vs explain {f['median_explain_s'] * 1000:.1f} ms"
                 f" — median ratio ×{f['median_ratio']:.2f} ({verdict} the ×{GOAL} goal)",
             f"CPU on the way (server + worker) vs explain's: median ratio ×{f['median_cpu_ratio']:.2f} "
             "(the steadier figure on a shared machine)", "",
             "per stage, median over every open (wall / CPU of the process that ran it):"]
    labels = dict(STAGES)
    for stage, s in f["stages"].items():
        cpu = f"{s['cpu_ms']:6.1f}" if s["cpu_ms"] == s["cpu_ms"] else "     —"
        rows.append(f"  {labels[stage]:<42} {s['wall_ms']:7.1f} ms  cpu {cpu} ms")
    rows.append(f"  {'server CPU while the worker worked':<42} {'':>10}  cpu {f['server_cpu_meanwhile_ms']:6.1f} ms")
    if previous:
        moved = {stage: s["wall_ms"] - previous["stages"][stage]["wall_ms"]
                 for stage, s in f["stages"].items() if stage in previous.get("stages", {})}
        rows.append("")
        rows.append(f"vs the previous run ({previous.get('when', '?')}, load {previous['load']['start']:.1f}): "
                    f"ratio ×{previous['median_ratio']:.2f} → ×{f['median_ratio']:.2f}, CPU ratio "
                    f"×{previous.get('median_cpu_ratio', float('nan')):.2f} → ×{f['median_cpu_ratio']:.2f}")
        if moved:
            # by CPU where the stage has one (the wall of a shared machine moves with its load); the
            # trace itself is torch's work and moves with the machine too: it is compared with explain's
            cpu = {stage: s["cpu_ms"] - previous["stages"][stage]["cpu_ms"] for stage, s in f["stages"].items()
                   if stage in previous.get("stages", {}) and stage != "explained" and s["cpu_ms"] == s["cpu_ms"]
                   and previous["stages"][stage]["cpu_ms"] == previous["stages"][stage]["cpu_ms"]}
            if "explained" in f["stages"] and "explained" in previous["stages"] and "median_explain_cpu_s" in previous:
                rows.append(f"the worker's trace CPU over explain's: ×{_over(previous):.2f} → ×{_over(f):.2f}")
            if cpu:
                stage = max(cpu, key=lambda k: abs(cpu[k]))
                rows.append(f"the stage whose CPU moved most (the trace aside): {labels[stage]} {cpu[stage]:+.1f} ms "
                            f"({previous['stages'][stage]['cpu_ms']:.1f} → {f['stages'][stage]['cpu_ms']:.1f} ms CPU)")
            stage = max(moved, key=lambda k: abs(moved[k]))
            rows.append(f"the stage whose wall time moved most: {labels[stage]} {moved[stage]:+.1f} ms "
                        f"({previous['stages'][stage]['wall_ms']:.1f} → {f['stages'][stage]['wall_ms']:.1f} ms; "
                        f"explain's median {previous['median_explain_s'] * 1000:.0f} → {f['median_explain_s'] * 1000:.0f} ms)")
    return "\n".join(rows)


def _over(f: dict[str, Any]) -> float:
    return f["stages"]["explained"]["cpu_ms"] / (f["median_explain_cpu_s"] * 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="opens of each program (after one warm-up)")
    parser.add_argument("--programs", nargs="*", choices=sorted(PROGRAMS), help="a subset (default: all)")
    parser.add_argument("--real-shaped", action="store_true", help="the real-shaped programs only (rs_*.py)")
    parser.add_argument("--multi-target", action="store_true",
                        help="the 100–400-line files with several targets only (mt_*.py)")
    parser.add_argument("--json", type=Path, default=RESULT, help="the previous run to compare with; this run replaces it")
    parser.add_argument("--keep", action="store_true", help="compare, but leave the stored run as it is")
    parser.add_argument("--keep-open", action="store_true",
                        help="leave each file open (a new file per open): its recompile sweep runs beside the next opens")
    parser.add_argument("--measure", action="store_true",
                        help="with --keep-open: measurements on save on (the setting's default), beside the next opens too")
    args = parser.parse_args()
    previous = json.loads(args.json.read_text()) if args.json.exists() else None
    prefix = "mt_" if args.multi_target else "rs_" if args.real_shaped else ""
    names = args.programs or [n for n in PROGRAMS if n.startswith(prefix) and (prefix or not n.startswith("mt_"))]
    raw = asyncio.run(run(args.rounds, names, args.keep_open, args.measure))
    found = figures(raw)
    print(report(found, previous))
    if not args.keep:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**found, "raw": raw}, indent=1))


if __name__ == "__main__":
    main()
