"""Wall times of a CI run of `compile-lens check` over examples/ (BENCHMARKS.md, "A CI run"): with the
recompile sweep, breaks only, and each re-run from the warm result cache (the `ci_run` unit).

    PYTHONPATH=server .venv/bin/python -m benchmarks.cache.ci_run [--before OLD_CHECKOUT/server]

`--before` adds the same first command run by that code. Prints one line per command and the
figures as a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def timed(label: str, args: list[str], cache: str, **env: str) -> tuple[float, int]:
    started = time.perf_counter()
    rc = subprocess.run(args, cwd=REPO, env={**os.environ, "COMPILE_LENS_CACHE_DIR": cache, **env},
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    took = time.perf_counter() - started
    print(f"{label:<58} rc={rc} {took:6.1f} s", flush=True)
    return took, rc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="an older checkout's server/ folder, run the same way")
    args = parser.parse_args()
    check = [sys.executable, "-m", "compile_lens.cli", "check", "examples/", "--no-benchmark", "-q"]
    figures: dict[str, float] = {}
    if args.before:
        code = "import sys; from compile_lens.cli.main import main; sys.exit(main(['check', 'examples/', '--no-benchmark', '-q']))"
        figures["before_s"], _ = timed("before: check examples/ --no-benchmark", [sys.executable, "-c", code],
                                       tempfile.mkdtemp(), PYTHONSAFEPATH="1", PYTHONPATH=args.before)
    for key, label, extra in (("breaks_and_sweep", "check examples/ --no-benchmark", []),
                              ("breaks_only", "--no-benchmark --no-recompiles", ["--no-recompiles"])):
        with tempfile.TemporaryDirectory(prefix="bench-ci-cache-") as cache:
            figures[f"{key}_s"], rc = timed(f"{label} (empty cache)", check + extra, cache)
            figures[f"{key}_cached_s"], _ = timed(f"{label} (cached re-run)", check + extra, cache)
            figures[f"{key}_rc"] = rc
    print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in figures.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
