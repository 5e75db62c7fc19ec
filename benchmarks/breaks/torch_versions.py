"""Graph breaks and recompiles that `compile-lens check` finds under another torch, beside today's.

    python3 -m venv /tmp/v24 && /tmp/v24/bin/pip install torch==2.4.0 numpy psutil
    .venv/bin/python -m benchmarks.breaks.torch_versions /tmp/v24/bin/python [PATHS...]

Runs the CLI (trace and recompile sweep, no measurement) once with each interpreter, the
project's code on PYTHONPATH, and prints per target what each torch found. Figures for
docs/torch-apis.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ["examples", "tests/fixtures/truth"]


def _check(python: str, paths: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        env = {**os.environ, "PYTHONPATH": str(ROOT / "server"), "COMPILE_LENS_CACHE_DIR": tmp}
        subprocess.run([python, "-m", "compile_lens.cli", "check", *paths, "--no-benchmark", "--no-cache", "-q",
                        "--format", "json", "-o", str(out)], cwd=ROOT, env=env, check=False)
        return json.loads(out.read_text())


def _summary(report: dict) -> dict[str, tuple]:
    found = {}
    for file in report["files"]:
        for t in file.get("targets", []):
            breaks = tuple(f"{b['line']} {b.get('gb_id') or '-'} {b.get('gb_type', '')[:40]}" for b in t.get("graph_breaks", []))
            kinds = {}
            for r in t.get("recompiles", []):
                kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
            found[f"{Path(file['path']).name}:{t['name']}"] = (breaks, t.get("graph_count"), kinds, t.get("error"))
    return found


def main(other: str, paths: list[str]) -> None:
    reports = {python: _check(python, paths) for python in (sys.executable, other)}
    (today, t_today), (old, t_old) = ((_summary(r), r.get("torch")) for r in reports.values())
    print(f"torch {t_today} (this venv) vs torch {t_old} ({other})\n")
    moved = []
    for key in sorted(set(today) | set(old)):
        a, b = today.get(key), old.get(key)
        same_places = a and b and [x.split()[0] for x in a[0]] == [x.split()[0] for x in b[0]]
        moved += [] if same_places else [key]
        print(f"{key}: breaks at the same lines: {'yes' if same_places else 'NO'}")
        for label, row in ((t_today, a), (t_old, b)):
            breaks, graphs, kinds, error = row or ((), None, {}, "not analysed")
            print(f"  {label:>8}: {', '.join(breaks) or 'no break'}; graphs {graphs}; recompiles {kinds}"
                  + (f"; error: {error}" if error else ""))
    from benchmarks.figures import Figure, Result, emit

    emit(Result({"targets": Figure(len(set(today) | set(old)), "count"),
                 "breaks_moved": Figure(len(moved), "count", "lower", 0)},
                notes={"torch": [t_today, t_old], "moved": moved}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or DEFAULT)
