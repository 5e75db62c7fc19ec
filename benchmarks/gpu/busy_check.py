"""On a real GPU box: the busy rule's verdict, and does the busy-GPU wait see what NVML sees?

First the measurement's busy rule (`busy.contention.Contention`, the CUDA rule) over a couple of quiet
seconds on this box, as a timing would read it: an idle box must read not busy, also where
/proc/<pid>/schedstat is missing (gVisor: the lent H200). Then NVML (this repository's CI machine has
no GPU, so `tests/busy/test_gpu_busy.py` plays NVML with a readings file; this checks the real one):

Starts a process that keeps GPU 0 busy with matmuls, as a training run would, then reads NVML
through `compile_lens.busy.gpu.NvmlReader` and prints the readings and the decision (`busy.rule.gpu_busy`) twice: with
the load counted as another process (expected: busy, named `python busy_check.py --load`),
and as our own tree (expected: free). Exit 0 when all come out as expected, 1 otherwise; without NVML
(`pip install nvidia-ml-py`) or a GPU that part is said and skipped. The last line is the figures line
(`figures.emit`): the rule's readings as figures, its verdict and NVML's in the notes.

    .venv/bin/python -m benchmarks.gpu.busy_check [--device cuda] [--limit S]   # run by scripts/gpu-check
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # imported where used: the load child runs this file as a script, outside the package
    from ..figures import Result

# the rule's readings that are numbers, with their units (the rest of its report are words: notes)
READINGS = {"other_cpu_percent": "%", "own_cpu_percent": "%", "launch_wait_percent": "%", "load_average": "",
            "cpus": "count", "threads": "count"}


def load(seconds: float) -> None:
    import torch

    x = torch.randn(8192, 8192, device="cuda")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        x = (x @ x).tanh()
        torch.cuda.synchronize()


def verdict(device: str, seconds: float = 2.0) -> dict[str, Any]:
    """The busy rule's report of `seconds` on this box (the CUDA rule on a GPU box; on the CPU
    rehearsal too: what matters is the no-schedstat branch's words)."""
    from compile_lens.busy.contention import Contention
    from compile_lens.busy.cpu import thread_run_delay_s

    watch = Contention("cuda" if device.startswith("cuda") or device == "cpu" else device)
    time.sleep(seconds)
    report = watch.report().json()  # the JSON `contention`, as the CLI prints it
    report["schedstat"] = thread_run_delay_s() is not None
    return report


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds for the whole check")
    args = parser.parse_args()
    started = time.monotonic()
    rule = verdict(args.device)
    print(f"gpu-busy-check: the busy rule on this box, idle: {json.dumps(rule)}")
    # on the CPU rehearsal this shared box may well be busy: only the reading is checked there
    rule_ok = not rule["busy"] if args.device.startswith("cuda") else "busy" in rule
    nvml = nvml_check(args.limit - (time.monotonic() - started)) if args.device.startswith("cuda") else None
    ok = rule_ok and nvml in (None, "ok", "absent")
    from ..figures import emit

    emit(result(rule, nvml, ok))
    return 0 if ok else 1


def result(rule: dict[str, Any], nvml: Optional[str], ok: bool) -> Result:
    """The rule's readings as figures (none has a limit: the verdict is the rule's, read on an idle box),
    its words and NVML's answer as notes."""
    from ..figures import Figure, Result

    figures = {k: Figure(rule[k], unit) for k, unit in READINGS.items() if isinstance(rule.get(k), (int, float))}
    notes = {"busy": rule["busy"], "why": rule.get("why", []), "schedstat": rule["schedstat"], "rule": rule.get("rule"),
             "unknown": rule.get("unknown", []), "nvml": nvml}
    return Result(figures, ok=ok, notes=notes)


def nvml_check(limit: float) -> str:
    """"ok", "absent" (no NVML) or "UNEXPECTED": NVML's view of a matmul load, within `limit` seconds."""
    from compile_lens.busy.gpu import NvmlReader, measured_device, open_reader, own_pids
    from compile_lens.busy.rule import gpu_busy

    reader = open_reader()
    if not isinstance(reader, NvmlReader):
        print("gpu-busy-check: no NVML here (install nvidia-ml-py, and an NVIDIA driver); nothing to check")
        return "absent"
    device = measured_device(None)
    idle = reader.read()
    print(f"gpu-busy-check: idle readings: {idle}")
    child = subprocess.Popen([sys.executable, __file__, "--load"])
    try:
        deadline, readings = time.monotonic() + max(3.0, limit - 3.0), []
        while time.monotonic() < deadline:  # until the load holds a context and NVML's sample saw it
            time.sleep(1.0)
            readings = reader.read()
            gpu = next((g for g in readings if g.index == device), None)
            if gpu and any(p.pid == child.pid for p in gpu.processes) and gpu.utilization > 50:
                break
        print(f"gpu-busy-check: loaded readings: {readings}")
        as_other = gpu_busy(readings, threshold=50, device=device, own_pids={0})
        as_ours = gpu_busy(readings, threshold=50, device=device, own_pids=own_pids())
        print(f"gpu-busy-check: the load as another process: {as_other.text if as_other else 'free'}")
        print(f"gpu-busy-check: the load as our own worker: {as_ours.text if as_ours else 'free'}")
        ok = (as_other is not None and any(p.pid == child.pid and "busy_check.py" in p.label
                                           for p in as_other.others) and as_ours is None)
        print(f"gpu-busy-check: {'ok' if ok else 'UNEXPECTED'}")
        return "ok" if ok else "UNEXPECTED"
    finally:
        child.kill()
        child.wait()


if __name__ == "__main__":
    if sys.argv[1:] == ["--load"]:
        load(60)  # killed once read
    else:
        sys.exit(main())
