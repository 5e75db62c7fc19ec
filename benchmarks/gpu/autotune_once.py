"""The max-autotune lever measured once (`levers/autotune.measure`: each side's cold compile in a fresh
process, then the steady forward in paired rounds), on the smallest module (tests/fixtures/measure/tiny.py):
on a GPU Inductor benchmarks its GEMM templates; on the CPU (the rehearsal) it compiles the default's code.

    python -m benchmarks.gpu.autotune_once [--device cuda] [--dry]   # ends with the figures line (`figures.emit`)
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .. import REPO
from ..figures import Figure, Result, emit

if TYPE_CHECKING:
    from compile_lens.measured import Lever

# the steady forward's figures (`levers_text.timing_json`), with their units: before/after ms per call
FORWARD = {"before": "ms", "after": "ms", "speedup": "x", "rounds": "count"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dry", action="store_true")
    args = parser.parse_args()
    from compile_lens.protocol import InputRecipe, TargetSpec
    from compile_lens.render.levers_text import lever_line
    from compile_lens.worker.levers import autotune
    from compile_lens.worker.loader import build_target, import_file

    path = REPO / "tests" / "fixtures" / "measure" / "tiny.py"
    line = next(i for i, row in enumerate(path.read_text().splitlines(), 1) if row.startswith("class Tiny"))
    spec = TargetSpec("Tiny", "module", line, inputs=InputRecipe("directive", "(torch.randn(8, 16),)"))
    target = build_target(import_file(str(path), str(path.parent)), spec, str(path))
    lever = autotune.measure(target, path=str(path), root=str(path.parent), device=args.device, mode="default",
                             max_seconds=15.0 if args.dry else 20.0, steady_s=1.0 if args.dry else 4.0,
                             progress=lambda *a, **k: print(*a, file=sys.stderr, flush=True))
    print(lever_line(lever), file=sys.stderr)
    emit(result(lever))
    return 0


def result(lever: Lever) -> Result:
    """The lever as figures: each side's cold compile (s), the steady forward (ms per call, the speedup
    default/lever), the payback; its verdict and why in the notes. A lever not measured failed."""
    from compile_lens.render.levers_text import timing_json

    figures = {f"compile_s.{k}": Figure(v, "s") for k, v in lever.compile_s.items() if isinstance(v, (int, float))}
    forward = timing_json(lever.forward)
    figures |= {f"forward.{k}": Figure(forward[k], unit) for k, unit in FORWARD.items()
                if isinstance(forward.get(k), (int, float)) and not isinstance(forward.get(k), bool)}
    if isinstance(lever.data.get("payback_calls"), (int, float)):
        figures["payback_calls"] = Figure(lever.data["payback_calls"], "count")
    notes = {"verdict": lever.verdict, "why": lever.why, "conclusive": forward.get("conclusive"),
             "ci": forward.get("ci"), "busy": forward.get("busy")}
    return Result(figures, ok=bool(lever.verdict) and lever.verdict != "not measured", notes={
        k: v for k, v in notes.items() if v is not None})


if __name__ == "__main__":
    sys.exit(main())
