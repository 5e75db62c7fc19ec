"""The hover card's length on a measured target (issue 52, item 2: a hover card read in five seconds):
one measurement of FILE (`compile_lens.engine.check.check`, the results kept whole: the `--format json`
document leaves out what the card reads), then the card each `--server DIR` (a checkout's `server/`)
renders from that same result, as its `textDocument/hover` composes it for VS Code (the report link
shown, no trial), and its counts: lines, non-blank lines, bullets, words, and the non-blank lines
above the first bullet (what is read before the list).

    PYTHONPATH=server python benchmarks/editor/hover_lines.py examples/tiny_measure.py \\
        --server /tmp/hover-before/server --server server [--result /tmp/tiny.json] [--cards]

`--result FILE`: where the measurement is kept (reused when it exists: a rerun measures nothing). It is
made with `--measure-with` (this checkout's `server/` unless given); each server reads it with its own
`protocol.from_dict`, which drops the fields it does not know.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def measure(path: Path, out: Path) -> None:
    """In this process (its `compile_lens`): check FILE with the measurement, every target's whole
    `TargetResult` written to `out`."""
    import asyncio

    from compile_lens.cli.check import analysis_inputs
    from compile_lens.cli.main import build_parser
    from compile_lens.engine.check import check
    from compile_lens.engine.project import open_cache

    args = build_parser().parse_args(["check", str(path)])
    inputs = analysis_inputs(args)
    assert not isinstance(inputs, int), f"compile-lens check {path}: usage error {inputs}"
    cache = open_cache(False)
    try:
        reports, _ = asyncio.run(check(inputs.files, inputs.settings, benchmark=True, root=inputs.root,
                                       cache=cache))
    finally:
        if cache is not None:
            cache.close()
    targets = [dataclasses.asdict(t) for r in reports for t in r.targets]
    out.write_text(json.dumps({"path": str(path.resolve()), "targets": targets}))


def render(result_file: Path) -> dict[str, str]:
    """In this process (its `compile_lens`): each measured target's card, composed as `lsp.features.hover`
    composes it (the old hover: the report link and the lever lines; the new: the Details link)."""
    from compile_lens.lsp.features.levers import hover_lines
    from compile_lens.protocol import TargetResult, from_dict
    from compile_lens.render import cards, progress_rows

    kept = json.loads(result_file.read_text())
    relpath, uri = os.path.basename(kept["path"]), Path(kept["path"]).as_uri()
    out = {}
    for data in kept["targets"]:
        result = from_dict(TargetResult, data)
        bench = result.benchmark
        if bench is None:
            continue
        details = getattr(cards, "details_line", None)  # the Details link: after 8d377ca
        report = details(True, relpath, uri, result.name) if details else cards.report_line(True, relpath)
        guessed = bool(result.inputs and result.inputs.source == "inferred")
        card = cards.hover_card(result, bench, guessed_inputs=guessed, report=report,
                                rows=progress_rows.states(result, in_flight=False))
        tried = hover_lines(result)
        if tried and not details:  # before: the lever lines under every card; after: in a measured one's details
            card += "\n\n" + "\n".join(tried)
        out[result.name] = card
    return out


def counts(card: str) -> dict[str, int]:
    lines = card.splitlines()
    text = [ln for ln in lines if ln.strip()]
    bullets = [ln for ln in text if ln.lstrip().startswith("- ")]
    first = next((i for i, ln in enumerate(text) if ln.lstrip().startswith(("- ", "---"))), len(text))
    return {"lines": len(lines), "non_blank": len(text), "bullets": len(bullets), "words": len(card.split()),
            "above_first_bullet": first}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, nargs="?")
    parser.add_argument("--server", type=Path, action="append", default=[], help="a checkout's server/ (repeatable)")
    parser.add_argument("--measure-with", type=Path, default=REPO / "server")
    parser.add_argument("--result", type=Path, help="the measurement kept here (reused when it exists)")
    parser.add_argument("--cards", action="store_true", help="print each card too")
    parser.add_argument("--render", type=Path, help=argparse.SUPPRESS)  # the child: print the cards as JSON
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the child: measure into this file
    args = parser.parse_args()
    if args.render:
        print(json.dumps(render(args.render)))
        return
    if args.measure:
        measure(args.file, args.measure)
        return
    result = args.result or Path(tempfile.mkdtemp()) / "result.json"
    me = [sys.executable, str(Path(__file__).resolve())]
    if not result.exists():
        env = dict(os.environ, PYTHONPATH=str(args.measure_with.resolve()))
        subprocess.run([*me, str(args.file.resolve()), "--measure", str(result.resolve())], check=True, env=env,
                       cwd=args.file.resolve().parent)
    print(f"{'server':<40} {'target':<12} lines non-blank bullets words above-first-bullet")
    for server in args.server or [REPO / "server"]:
        env = dict(os.environ, PYTHONPATH=str(server.resolve()))
        done = subprocess.run([*me, "--render", str(result.resolve())], check=True, env=env, capture_output=True,
                              text=True)
        for name, card in json.loads(done.stdout).items():
            c = counts(card)
            print(f"{str(server):<40} {name:<12} {c['lines']:>5} {c['non_blank']:>9} {c['bullets']:>7} "
                  f"{c['words']:>5} {c['above_first_bullet']:>18}")
            if args.cards:
                print("\n" + card + "\n" + "-" * 60)


if __name__ == "__main__":
    main()
