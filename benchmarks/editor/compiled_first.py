"""Start → each target's forward figure, and → all figures (issue 52, item 1: the model the user compiles
comes first): `compile-lens check FILE --stream --no-cache` in a subprocess, the arrival time of each
`"part": "forward"` line on its stdout. `--server DIR`: another checkout's `server/` (the order before).

    PYTHONPATH=server:. python -m benchmarks.editor.compiled_first benchmarks/models/order/gpt2_classifier.py
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from ..common import timed_stream

REPO = Path(__file__).resolve().parents[2]


def first_figures(path: Path, server: Path) -> tuple[list[tuple[str, float, str]], float, int]:
    """([(target, seconds to its forward figure, its words)], seconds to the end, exit code)."""
    lines, total, code = timed_stream(path, server, "--no-cache")
    found = []
    for at, part in lines:
        if part.get("part") == "forward":
            forward = (part.get("data") or {}).get("benchmark", {}).get("forward") or {}
            words = f"{forward.get('speedup', float('nan')):.2f}×" if forward else part.get("status", "")
            found.append((part["target"], at, words))
    return found, total, code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--server", type=Path, default=REPO / "server", help="the server/ folder to run")
    args = parser.parse_args()
    found, total, code = first_figures(args.file.resolve(), args.server.resolve())
    load = os.getloadavg()[0]
    print(f"{args.file.name} with {args.server}: exit {code}, all figures at {total:.1f} s (load {load:.1f} at the end)")
    for target, at, words in found:
        print(f"  {target:<24} forward figure at {at:7.1f} s  ({words})")
    # the harness's figures (benchmarks/editor: the `compiled_first` unit), its last line
    print(json.dumps({"file": args.file.name, "exit": code, "all_s": round(total, 1), "load": load,
                      "order": [target for target, _, _ in found],
                      "forward_s": {target: round(at, 1) for target, at, _ in found}}))
    if not found:
        raise SystemExit(f"no forward figure arrived (check exited {code}): run the same check by hand to see why")


if __name__ == "__main__":
    main()
