"""What the `aot_artifact` lever (the restart paths) costs and finds, per target:
`python -m benchmarks.measure.restart FILE:Target ... [--max-seconds S]` (the `restart_paths` unit).
Runs that lever alone (the rest of the levers phase is `benchmarks/measure/levers.py`), prints its line, every restart path, the GPU bill's
restart line, the lever's wall time and the load average. A target that breaks the graph prints
"not an aot candidate" (the phase does not show the lever). Its figures go back as one JSON line."""

from __future__ import annotations

import argparse
import os
import sys
import time

from benchmarks.common import load_targets
from benchmarks.figures import Figure, Result, emit
from compile_lens.cost import CostInputs, restart_lines
from compile_lens.protocol import TargetResult
from compile_lens.render.levers_text import lever_line


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("targets", nargs="+")
    parser.add_argument("--max-seconds", type=float, default=20.0)
    args = parser.parse_args()
    from compile_lens.worker.levers import aot_artifact
    from compile_lens.worker.levers.isolated import isolated

    figures: dict[str, Figure] = {}
    notes: dict[str, str] = {}
    for path, root, spec, target in load_targets(args.targets):
        if isinstance(target, Exception):
            raise target
        result = TargetResult(spec.name, spec.kind, spec.line)
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        lever = isolated("aot_artifact", aot_artifact.CHANGE,
                         lambda r=result, t=target, p=path, top=root: aot_artifact.measure(
                             r, t, path=p, root=top, device="cpu", mode="default", max_seconds=args.max_seconds,
                             progress=lambda stage, **kw: None))
        took = time.perf_counter() - t0
        head = f"{os.path.basename(path)}:{spec.name}"
        if aot_artifact.dropped(lever):
            print(f"{head}: not an aot candidate ({lever.data['graph_breaks'][:120]}); {took:.1f} s")
            notes[head] = f"not an aot candidate: {lever.data['graph_breaks'][:120]}"
        else:
            error = lever.data.get("max_abs_error")
            figures |= {f"{head}.restart_{k}_s": Figure(v, "s", "lower") for k, v in (lever.data.get("paths") or {}).items()
                        if isinstance(v, (int, float))}
            figures |= {f"{head}.max_abs_error": Figure(error, "abs", "lower", aot_artifact.ERROR_SAID),
                        f"{head}.artifact_bytes": Figure(lever.data.get("artifact_bytes"), "B"),
                        f"{head}.mega_cache_bytes": Figure(lever.data.get("mega_bytes"), "B"),
                        f"{head}.lever_s": Figure(took, "s", "lower")}
            print(f"  {lever_line(lever)}")
            print(f"  paths {lever.data.get('paths')}; cpu {lever.compile_s.get('cpu_before')} → "
                  f"{lever.compile_s.get('cpu_after')} s; artifact {lever.data.get('artifact_bytes')} B, "
                  f"Mega-Cache {lever.data.get('mega_bytes')} B, max abs error {lever.data.get('max_abs_error')}")
            for line in restart_lines(lever.data.get("paths") or {}, CostInputs(price_per_gpu_hour=2.0, gpus=8)):
                print(f"  {line}")
            print(f"{head}: aot_artifact lever {took:.1f} s")
        print(f"  load {load0:.1f} → {os.getloadavg()[0]:.1f}")
        sys.stdout.flush()
    emit(Result(figures, notes=notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
