"""The torchrun trial's compiled run against a plain torchrun of the same program, per rank.

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.trial.torchrun [STEPS]

Runs benchmarks/models/trial_example/train_ddp.py (2 ranks, gloo, CPU) twice for STEPS steps (default 8):
plain, compiling its own model (`--compile inductor`: Module.compile, as the trial compiles it),
each rank timing its steps on its own clock; and under `compile-lens trial` (default backend,
inductor). Prints, per rank: the run's wall time (its steps summed) and the steady median (steps
0 and 5, which compile, left out), plain vs the trial's compiled run; and each whole command's wall time.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "models" / "trial_example" / "train_ddp.py"
BIN = os.path.dirname(sys.executable)
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": BIN + os.pathsep + os.environ["PATH"],
       "PYTHONPATH": str(HERE.parents[1] / "server")}
TORCHRUN = ["torchrun", "--standalone", "--nproc-per-node", "2"]


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    with tempfile.TemporaryDirectory() as root:
        shutil.copy(EXAMPLE, Path(root) / "train_ddp.py")
        start = time.perf_counter()
        plain = subprocess.run([*TORCHRUN, "train_ddp.py", "--steps", str(steps), "--compile", "inductor"], cwd=root,
                               env=ENV, capture_output=True, text=True, check=True)
        plain_s = time.perf_counter() - start
        own = {int(m[1]): (float(m[2]), float(m[3])) for m in re.finditer(
            r"rank (\d+): \d+ steps in ([\d.]+) s; steady median ([\d.]+) ms", plain.stdout)}
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "compile_lens.cli", "trial", "--steps", str(steps), "--json", "t.json",
                        "--", *TORCHRUN, "train_ddp.py"], cwd=root, env=ENV, capture_output=True, text=True)
        trial_s = time.perf_counter() - start
        figures = json.loads((Path(root) / "t.json").read_text())
    print(f"load average before/after: {os.getloadavg()[0]:.1f}; plain torchrun {plain_s:.1f} s, "
          f"whole trial (eager + compiled run) {trial_s:.1f} s")
    print("| rank | plain torchrun: steps' wall | trial's compiled run: steps' wall | plain steady median "
          "| trial compiled steady median | trial compile time |")
    print("|---|---|---|---|---|---|")
    from benchmarks.figures import Figure, Result, emit

    out = {"plain_torchrun_s": Figure(plain_s, "s"), "whole_trial_s": Figure(trial_s, "s")}
    for rank in figures["ranks"]:
        compiled = rank["compiled"]
        total = sum(s["wall_s"] for s in compiled["steps"])
        walls = sorted(s["wall_s"] for s in compiled["steps"] if s["index"] not in (0, 5))
        median = walls[len(walls) // 2] if walls else None
        p_total, p_median = own.get(rank["rank"], (None, None))
        print(f"| {rank['rank']} | {p_total:.2f} s | {total:.2f} s | {p_median:.1f} ms | "
              f"{median * 1000:.1f} ms | {(rank['compile_time'] or {}).get('total_s', 0):.1f} s |")
        r = f"rank{rank['rank']}"
        # the trial's compiled run against the plain torchrun's steady median, per rank: measured, no limit
        out |= {f"{r}.plain_steady_median_ms": Figure(p_median, "ms"),
                f"{r}.trial_steady_median_ms": Figure(None if median is None else median * 1000, "ms", "lower"),
                f"{r}.trial_over_plain": Figure(None if median is None or not p_median else median * 1000 / p_median, "x",
                                                "lower"),
                f"{r}.trial_compile_s": Figure((rank["compile_time"] or {}).get("total_s"), "s", "lower")}
    emit(Result(out))


if __name__ == "__main__":
    main()
