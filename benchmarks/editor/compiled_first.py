"""Start → each target's forward figure, and → all figures (issue 52, item 1: the model the user compiles
comes first): `compile-lens check FILE --stream --no-cache` in a subprocess, the arrival time of each
`"part": "forward"` line on its stdout. `--server DIR`: another checkout's `server/` (the order before).

    PYTHONPATH=server:. python -m benchmarks.editor.compiled_first benchmarks/models/order/gpt2_classifier.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def first_figures(path: Path, server: Path) -> tuple[list[tuple[str, float, str]], float, int]:
    """([(target, seconds to its forward figure, its words)], seconds to the end, exit code)."""
    env = dict(os.environ, PYTHONPATH=str(server))
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-m", "compile_lens.cli", "check", str(path), "--stream", "--no-cache"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=path.parent)
    found = []
    assert child.stdout is not None
    for line in child.stdout:
        part = json.loads(line)
        if part.get("part") == "forward":
            forward = (part.get("data") or {}).get("benchmark", {}).get("forward") or {}
            words = f"{forward.get('speedup', float('nan')):.2f}×" if forward else part.get("status", "")
            found.append((part["target"], time.monotonic() - started, words))
    return found, time.monotonic() - started, child.wait()


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
