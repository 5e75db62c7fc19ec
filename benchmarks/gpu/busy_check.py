"""On a real NVIDIA GPU: does the busy-GPU wait see what NVML sees? (this repository's CI machine
has no GPU, so `tests/test_gpu_busy.py` plays NVML with a readings file; this checks the real one).

Starts a process that keeps GPU 0 busy with matmuls, as a training run would, then reads NVML
through `compile_lens.gpu.readers.NvmlReader` and prints the readings and the decision twice: with
the load counted as another process (expected: busy, named `python busy_check.py --load`),
and as our own tree (expected: free). Exit 0 when both come out as expected, 1 otherwise, 0 with a
note when there is no NVML (`pip install nvidia-ml-py`) or no GPU.

    .venv/bin/python -m benchmarks.gpu.busy_check          # run by scripts/gpu-check
"""

from __future__ import annotations

import subprocess
import sys
import time


def load(seconds: float) -> None:
    import torch

    x = torch.randn(8192, 8192, device="cuda")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        x = (x @ x).tanh()
        torch.cuda.synchronize()


def main() -> int:
    from compile_lens.gpu.busy import decide, measured_device
    from compile_lens.gpu.readers import NvmlReader, open_reader, own_pids

    reader = open_reader()
    if not isinstance(reader, NvmlReader):
        print("gpu-busy-check: no NVML here (install nvidia-ml-py, and an NVIDIA driver); nothing to check")
        return 0
    device = measured_device(None)
    idle = reader.read()
    print(f"gpu-busy-check: idle readings: {idle}")
    child = subprocess.Popen([sys.executable, __file__, "--load"])
    try:
        deadline, readings = time.monotonic() + 60, []
        while time.monotonic() < deadline:  # until the load holds a context and NVML's sample saw it
            time.sleep(1.0)
            readings = reader.read()
            gpu = next((g for g in readings if g.index == device), None)
            if gpu and any(p.pid == child.pid for p in gpu.processes) and gpu.utilization > 50:
                break
        print(f"gpu-busy-check: loaded readings: {readings}")
        as_other = decide(readings, threshold=50, device=device, own_pids={0})
        as_ours = decide(readings, threshold=50, device=device, own_pids=own_pids())
        print(f"gpu-busy-check: the load as another process: {as_other.text if as_other else 'free'}")
        print(f"gpu-busy-check: the load as our own worker: {as_ours.text if as_ours else 'free'}")
        ok = (as_other is not None and any(p.pid == child.pid and "busy_check.py" in p.label
                                           for p in as_other.others) and as_ours is None)
        print(f"gpu-busy-check: {'ok' if ok else 'UNEXPECTED'}")
        return 0 if ok else 1
    finally:
        child.kill()
        child.wait()


if __name__ == "__main__":
    if sys.argv[1:] == ["--load"]:
        load(90)
    else:
        sys.exit(main())
