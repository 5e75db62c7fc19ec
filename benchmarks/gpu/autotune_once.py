"""The max-autotune lever measured once (`levers/autotune.measure`: each side's cold compile in a fresh
process, then the steady forward in paired rounds), on the smallest module (tests/fixtures/measure/tiny.py):
on a GPU Inductor benchmarks its GEMM templates; on the CPU (the rehearsal) it compiles the default's code.

    python -m benchmarks.gpu.autotune_once [--device cuda] [--dry]   # one JSON line: the lever
"""

from __future__ import annotations

import argparse
import json
import sys

from .. import REPO


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dry", action="store_true")
    args = parser.parse_args()
    from compile_lens.protocol import InputRecipe, TargetSpec
    from compile_lens.render.levers_text import lever_line, timing_json
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
    print(json.dumps({"verdict": lever.verdict, "why": lever.why, "compile_s": lever.compile_s,
                      "payback_calls": lever.data.get("payback_calls"),
                      "forward": {k: v for k, v in timing_json(lever.forward).items() if isinstance(v, (int, float, str, bool))}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
