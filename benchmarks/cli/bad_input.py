"""Bad input, per entry point: how many inputs were tried, of which kinds, how many crashed (an
exception that escaped, or an internal error), and the exit codes seen — for BENCHMARKS.md.

    .venv/bin/python -m benchmarks.cli.bad_input [--trace LOG] [--cases 500] [--seed 0]

- `compile-lens import` (main(), in-process): a real trace (`--trace`, else one made as
  benchmarks/cli/import_log.py makes it) mutated as the fuzz test mutates it — a field of the wrong type
  (null, bool, list, dict, text, huge/negative number, NaN/inf), cut lines, binary junk, duplicated
  and swapped records — in each of the three formats.
- the editor's import (`trace_import.report.import_trace` and the answer the server builds from it):
  the same mutated logs.
- every subcommand's file arguments (main(), in-process, nothing replaced): outputs under a file, a
  folder as an output, a missing `--root`, bad `--map`, baselines that are missing, not JSON, of
  another version or with a bad entry; and usage errors.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PREFIX_RE = re.compile(r"^(?:\[rank\d+\]:)?[VIWEC]\d{4} [\d:.]+\s+\d+ [^\]]*\] ")
WEIRD = [None, True, False, -1, 0, 2**63, -(2**70), 1.5, float("nan"), float("inf"), "", "x", [1], {"a": 1}, [], {}]
HUGE = "9" * 5000


def _places(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _places(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _places(v, path + (i,))


def _replace(value, path, new):
    if not path:
        return new
    value[path[0]] = _replace(value[path[0]], path[1:], new)
    return value


def mutate(lines: list[str], rng: random.Random, kinds: Counter) -> str:
    lines = list(lines)
    records = [i for i, t in enumerate(lines) if PREFIX_RE.match(t)]
    for _ in range(rng.randint(1, 6)):
        what = rng.choice(("field", "field", "field", "cut", "junk", "duplicate", "swap"))
        kinds[what] += 1
        i = rng.choice(records)
        if what == "field":
            head = PREFIX_RE.match(lines[i])
            try:
                data = json.loads(lines[i][head.end():]) if head else None
            except ValueError:
                continue
            places = list(_places(data))[1:] if data is not None else []
            if places:
                new = rng.choice(WEIRD + ["<huge>"])
                data = _replace(data, rng.choice(places), new)
                lines[i] = head.group(0) + json.dumps(data).replace('"<huge>"', HUGE)
        elif what == "cut":
            lines[i] = lines[i][: rng.randint(0, len(lines[i]))]
        elif what == "junk":
            lines.insert(i, bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))).decode("latin-1")
                         .replace("\n", ""))
        elif what == "duplicate":
            lines.insert(i, lines[i])
        else:
            j = rng.choice(records)
            lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines) + ("\n" if rng.random() < 0.5 else "")


def call_main(argv: list[str]) -> tuple[int, str]:
    from compile_lens.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def crashed(err: str) -> bool:
    return "internal error" in err or "Traceback" in err


def editor_import(row: dict, log: Path, work: Path) -> None:
    """What the server's compileLens.importTrace runs on `log` (lsp/features/trace_import.py: the
    import, then its answer as JSON), counted into the editor's `row`: imported, said, or a crash."""
    from compile_lens.trace_import.report import (
        NotATrace,
        divergence_text,
        import_trace,
        ranks_json,
    )

    try:
        imported = import_trace(str(log), str(work))
        json.dumps({"ranks": ranks_json(imported), "divergence": [divergence_text(e) for e in imported.rank_divergence],
                    "notes": imported.notes}, allow_nan=False)
        row["codes"]["imported"] += 1
    except NotATrace:
        row["codes"]["not a trace (said)"] += 1
    except Exception as exc:  # noqa: BLE001 - counted: a crash
        row["crashes"] += 1
        print(f"editor import crashed: {type(exc).__name__}: {exc}", file=sys.stderr)


def bench_import(trace: Path, cases: int, seed: int, work: Path) -> list[dict]:
    lines = trace.read_text().splitlines()
    rng = random.Random(seed)
    log = work / "dedicated_log_torch_trace_bad.log"
    rows = {"cli": {"codes": Counter(), "crashes": 0, "kinds": Counter()},
            "editor": {"codes": Counter(), "crashes": 0, "kinds": Counter()}}
    for n in range(cases):
        log.write_text(mutate(lines, rng, rows["cli"]["kinds"]), encoding="utf-8", errors="surrogateescape")
        code, err = call_main(["import", str(log), "--root", str(work), "--format", ("text", "json", "sarif")[n % 3]])
        rows["cli"]["codes"][code] += 1
        rows["cli"]["crashes"] += crashed(err)
        editor_import(rows["editor"], log, work)
    # whole files that are no trace at all: said, exit 2
    wholly_bad = {"empty file": "", "binary junk": bytes(range(256)).decode("latin-1") * 20,
                  "JSON, not a log": json.dumps({"a": [1, 2]}), "only cut records": "\n".join(t[:20] for t in lines[:50]),
                  "a log's payload lines only": "\n".join("\t" + t for t in lines[:50])}
    for kind, text in wholly_bad.items():
        log.write_text(text, encoding="utf-8", errors="surrogateescape")
        code, err = call_main(["import", str(log), "--root", str(work)])
        rows["cli"]["codes"][code] += 1
        rows["cli"]["crashes"] += crashed(err)
        rows["cli"]["kinds"][kind] += 1
        editor_import(rows["editor"], log, work)
    code, err = call_main(["import", str(work / "cache"), "--root", str(work)])  # a folder without logs
    rows["cli"]["codes"][code] += 1
    rows["cli"]["crashes"] += crashed(err)
    rows["cli"]["kinds"]["folder without logs"] += 1
    cases += len(wholly_bad) + 1
    rows["editor"]["kinds"] = rows["cli"]["kinds"]
    return [{"entry": "compile-lens import (text/json/sarif)", "tried": cases, **rows["cli"]},
            {"entry": "editor import (compileLens.importTrace's reading)", "tried": cases - 1, **rows["editor"]}]


def bench_arguments(work: Path) -> dict:
    os.chdir(work)
    (work / "model.py").write_text("import torch\n")
    (work / "a-file").write_text("")
    (work / "trace.log").write_text("")
    (work / "wrong.json").write_text(json.dumps({"version": 9}))
    (work / "entry.json").write_text(json.dumps({"version": 2, "findings": [{"key": 3}]}))
    (work / "notjson.json").write_text("{not json")
    under = "a-file/x/out"
    cases = {
        "output under a file": [["check", "model.py", "-o", under], ["report", "model.py", "-o", under],
                                ["import", "trace.log", "-o", under], ["record", "-o", under, "--", "python", "t.py"],
                                ["trial", "--json", under, "--", "python", "t.py"]],
        "output is a folder": [["check", "model.py", "-o", "."], ["report", "model.py", "-o", "."],
                               ["import", "trace.log", "-o", "."]],
        "missing --root": [[c, *a, "--root", "nowhere", *b] for c, a, b in (
            ("check", ["model.py"], []), ("report", ["model.py"], []), ("import", ["trace.log"], []),
            ("record", [], ["--", "python", "t.py"]), ("trial", [], ["--", "python", "t.py"]))],
        "bad --map": [["import", "trace.log", "--map", "/mnt"], ["import", "trace.log", "--map", "=x"],
                      ["import", "trace.log", "--map", "/mnt=nowhere"]],
        "bad baseline": [["check", "model.py", "--baseline", b] for b in
                         ("missing.json", "notjson.json", "wrong.json", "entry.json", "model.py")],
        "--trace-dir under a file": [["check", "model.py", "--trace-dir", "a-file/t"]],
        "usage errors": [[c, "--no-such-flag"] for c in ("check", "report", "import", "record", "trial")]
                        + [["check"], ["import"], ["nonsense"], ["trial", "--steps", "0", "--", "python", "t.py"],
                           ["record"], ["trial"], ["check", "model.py", "--fail-on", "nothing"],
                           ["check", "model.py", "--write-baseline"]],
    }
    codes, crashes, tried = Counter(), 0, Counter()
    for kind, argvs in cases.items():
        for argv in argvs:
            code, err = call_main(argv)
            codes[code] += 1
            crashes += crashed(err)
            tried[kind] += 1
    return {"entry": "every subcommand's arguments", "tried": sum(tried.values()), "codes": codes, "crashes": crashes,
            "kinds": tried}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path)
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-bad-input-") as tmp:
        work = Path(tmp)
        os.environ["COMPILE_LENS_CACHE_DIR"] = str(work / "cache")
        (work / "cache").mkdir()
        trace = args.trace
        if trace is None:
            from benchmarks.cli.import_log import make_trace

            trace = make_trace(work)
        rows = bench_import(trace, args.cases, args.seed, work) + [bench_arguments(work)]
    print(f"load average: {os.getloadavg()}")
    print("| entry point | inputs tried | kinds | crashes | exit codes seen |")
    print("|---|---|---|---|---|")
    for row in rows:
        kinds = ", ".join(f"{k} ×{n}" for k, n in sorted(row["kinds"].items()))
        codes = ", ".join(f"{k}: {n}" for k, n in sorted(row["codes"].items(), key=lambda kv: str(kv[0])))
        print(f"| {row['entry']} | {row['tried']} | {kinds} | {row['crashes']} | {codes} |")
    print(json.dumps({"crashes": sum(r["crashes"] for r in rows), "entries": {
        r["entry"]: {"tried": r["tried"], "crashes": r["crashes"],
                     "codes": {str(k): n for k, n in sorted(r["codes"].items(), key=lambda kv: str(kv[0]))}}
        for r in rows}}))


if __name__ == "__main__":
    main()
