"""A program that compiles its own DDP model under the torchrun trial, against torch's own logs, per rank.

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.trial.ddp_own_compile [BACKEND] [STEPS]

Runs benchmarks/models/trial_example/train_ddp.py --own-compile (`torch.compile(DDP(model), backend=BACKEND)`,
default inductor; 2 ranks, gloo, CPU) for STEPS steps (default 3) twice: plain torchrun with
TORCH_LOGS=dynamo,graph_breaks, and under `compile-lens trial`. Prints per rank: the frames torch's
log says it compiled (`[N/M] ... start tracing FUNCTION FILE:LINE`) against the trial's
`frames_compiled`, how often the model's `forward` was compiled in each, torch's break locations
against where the trial shows them, and each command's wall time; then its figures as one JSON line.
(The regexes below read torch's own log, the floor compared against: they are the measurement.)
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

from benchmarks.figures import Figure, Result, emit
from benchmarks.trial.torchrun import ENV, EXAMPLE, TORCHRUN  # the same program and launcher


def main() -> None:
    backend = sys.argv[1] if len(sys.argv) > 1 else "inductor"
    steps = sys.argv[2] if len(sys.argv) > 2 else "3"
    args = ["train_ddp.py", "--steps", steps, "--own-compile", "--compile", backend]
    forward = f"train_ddp.py:{EXAMPLE.read_text().splitlines().index('    def forward(self, idx, targets):') + 1}"
    with tempfile.TemporaryDirectory() as root:
        shutil.copy(EXAMPLE, Path(root) / "train_ddp.py")
        start = time.perf_counter()
        subprocess.run([*TORCHRUN, "--log-dir", "logs", "--redirects", "2", *args], cwd=root,
                       env={**ENV, "TORCH_LOGS": "dynamo,graph_breaks"}, capture_output=True, text=True, check=True)
        plain_s = time.perf_counter() - start
        torchs = {}
        for path in Path(root, "logs").rglob("stderr.log"):
            text = path.read_text()
            torchs[int(path.parent.name)] = (
                [(c, n, f"{os.path.basename(f)}:{line}") for c, n, f, line in
                 re.findall(r"\[(\d+/\d+)\] Step 1: torchdynamo start tracing (\S+) (\S+):(\d+)", text)],
                sorted({f"{os.path.basename(f)}:{line}" for f, line in re.findall(
                    r"Graph break (?:\(user stack suppressed due to duplicate graph break\) )?in user code at (\S+):(\d+)",
                    text)}))
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "compile_lens.cli", "trial", "--steps", steps, "--json", "t.json", "--",
                        *TORCHRUN, *args], cwd=root, env=ENV, capture_output=True, text=True)
        trial_s = time.perf_counter() - start
        figures = json.loads((Path(root) / "t.json").read_text())
    print(f"backend {backend}, {steps} steps; plain torchrun {plain_s:.1f} s, whole trial (eager + compiled) "
          f"{trial_s:.1f} s; load average now {os.getloadavg()[0]:.1f}")
    print("| rank | frames torch compiled (TORCH_LOGS=dynamo) | the trial's frames_compiled | same list | "
          f"`forward` ({forward}) compiles: torch / trial | torch's break locations | where the trial shows them |")
    print("|---|---|---|---|---|---|---|")
    out = {"plain_torchrun_s": Figure(plain_s, "s", "lower"), "whole_trial_s": Figure(trial_s, "s", "lower")}
    differing = 0
    for rank in figures["ranks"]:
        frames, breaks = torchs[rank["rank"]]
        ours = [(f["compile_id"], f["function"], os.path.basename(f["where"])) for f in rank["frames_compiled"]]
        shown = sorted({f"{os.path.basename(b['where'])} (inside `{(b.get('inside') or {}).get('function')}`, "
                        f"torch: {os.path.basename((b.get('inside') or {}).get('reported') or b['where'])})"
                        for b in rank["graph_breaks"]})
        print(f"| {rank['rank']} | {len(frames)}: {', '.join(f'{c} {n}' for c, n, _ in frames)} | {len(ours)} | "
              f"{'yes' if ours == frames else 'NO'} | {sum(f[1:] == ('forward', forward) for f in frames)} / "
              f"{sum(f[1:] == ('forward', forward) for f in ours)} | {', '.join(breaks)} | {'; '.join(shown)} |")
        differing += ours != frames
        out |= {f"rank{rank['rank']}.frames_torch": Figure(len(frames), "count"),
                f"rank{rank['rank']}.frames_trial": Figure(len(ours), "count")}
    # the goal: every rank's compiled frames are the ones torch's log lists; no rank read is no verdict
    out["ranks"] = Figure(len(figures["ranks"]), "count")
    out["ranks_differing"] = Figure(differing if figures["ranks"] else None, "count", "lower", 0)
    emit(Result(out, notes={"backend": backend, "steps": steps}))


if __name__ == "__main__":
    main()
