"""Run the benchmarks: `python -m benchmarks [NAME…] [--device cuda] [--gpu] [--quick|--dry] [--markdown] [--out DIR]`.

Each unit's figures go as one JSON line (machine, load, torch, commit, device, figures) to the
ledger (`--ledger`, default build/bench/ledger.jsonl; the GPU check: its --out folder), a table
is printed, and `--markdown` rewrites BENCHMARKS.md's generated blocks from the ledger: the summary
table and one block per unit. `--quick` runs each unit smaller (its rows are figures, marked
quick); `--dry` is the rehearsal (every unit at its smallest; its rows stay out of BENCHMARKS.md
unless the run is itself `--dry --markdown`, as the harness's test does on its own copy).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import REPO, Context, load_units
from .common import busy, commit, machine, rounded
from .figures import Result
from .ledger import table, write_markdown


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", help="units to run (default: all for the device)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--gpu", action="store_true", help="the GPU check's subset, most important first")
    p.add_argument("--dry", action="store_true", help="the rehearsal: every unit at its smallest")
    p.add_argument("--quick", action="store_true", help="every unit smaller, its figures kept (marked quick)")
    p.add_argument("--out", default=str(REPO / "build" / "bench"))
    p.add_argument("--ledger", default=None, help="default: OUT/ledger.jsonl")
    p.add_argument("--budget", type=float, default=None, help="stop starting units after this many seconds")
    p.add_argument("--markdown", action="store_true", help="rewrite BENCHMARKS.md's generated blocks from the ledger")
    p.add_argument("--md", default=str(REPO / "BENCHMARKS.md"), help=argparse.SUPPRESS)  # another file (tests)
    p.add_argument("--render", action="store_true", help="only rewrite BENCHMARKS.md from the ledger, running nothing")
    p.add_argument("--list", action="store_true")
    p.add_argument("--units", action="append", default=[], help=argparse.SUPPRESS)  # extra modules (tests)
    args = p.parse_args(argv)
    units = load_units(args.units)
    out = Path(args.out)
    ledger = Path(args.ledger) if args.ledger else out / "ledger.jsonl"
    if args.render:
        write_markdown(ledger, Path(args.md), dry=args.dry, goals={u.name: u.goal for u in units.values()})
        return 0
    unknown = [n for n in args.names if n not in units]
    if unknown or args.list:
        if unknown:
            print(f"benchmarks: no unit named {', '.join(unknown)}", file=sys.stderr)
        for u in units.values():
            print(f"{u.name}: {u.goal} (against {u.against})")
        return 2 if unknown else 0
    chosen = [units[n] for n in args.names] if args.names else \
        [u for u in units.values() if u.gpu] if args.gpu else \
        [u for u in units.values() if args.device in u.devices and not u.name.startswith("trivial_")]
    if args.gpu:  # the check's order whatever order they were named in: what only a GPU gives first
        chosen.sort(key=lambda u: u.gpu or 99)
        print("plan: " + ", ".join(f"{u.name} {u.timeout_s:.0f} s" for u in chosen)
              + f"; limits {sum(u.timeout_s for u in chosen):.0f} s"
              + (f", budget {args.budget:.0f} s" if args.budget else ""), file=sys.stderr, flush=True)
    out.mkdir(parents=True, exist_ok=True)
    base = {"machine": machine(args.device), "commit": commit(), "device": args.device, "dry": args.dry,
            "quick": args.quick and not args.dry}
    started, rows, failed = time.perf_counter(), [], 0
    for u in chosen:
        if args.device not in u.devices:
            rows.append({"unit": u.name, "skipped": f"not on {args.device}"})
            continue
        left = args.budget - (time.perf_counter() - started) if args.budget else u.timeout_s
        if left < 20:
            rows.append({"unit": u.name, "skipped": "the check's budget is spent"})
            continue
        print(f"== {u.name}: {u.goal}", file=sys.stderr, flush=True)
        load = busy()
        t0 = time.perf_counter()
        try:
            got = u.run(Context(args.device, out, args.dry, min(u.timeout_s, left), args.quick))
        except Exception as exc:  # noqa: BLE001 - one unit's failure is its figure, not the run's end
            got = Result.failed(f"{type(exc).__name__}: {exc}")
        row = {"unit": u.name, "goal": u.goal, "against": u.against, **base, "load": load.to_json(),
               "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "seconds": round(time.perf_counter() - t0, 1), **outcome(got)}
        failed += row["ok"] is False
        rows.append(row)
        with ledger.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
    print(table(rows))
    (out / "summary.md").write_text(table(rows) + "\n", encoding="utf-8")
    if args.markdown:
        write_markdown(ledger, Path(args.md), dry=args.dry, goals={u.name: u.goal for u in units.values()})
    return 1 if failed else 0


def outcome(got: Result | dict) -> dict:
    """A unit's answer as the ledger row holds it. Typed (`Result`): `typed`, its verdict, each figure
    with its unit and goal, its notes and, where a child took them, that child's load. Untyped (a
    dict, the units not converted yet): its `ok` and the rest as figures, as before."""
    if isinstance(got, Result):
        row = {"typed": True, "ok": got.verdict(), "figures": {k: f.to_json() for k, f in got.figures.items()}}
        if got.notes:
            row["notes"] = rounded(got.notes)
        if got.load is not None:
            row["load_at_figures"] = got.load.to_json()
        return row
    figures = dict(got)
    return {"ok": figures.pop("ok", None), "figures": rounded(figures)}


if __name__ == "__main__":
    sys.exit(main())
