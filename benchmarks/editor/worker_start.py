"""Worker starts, forked from the worker template against started on their own: N workers one after
another (a server's trace and deep lanes, then replacements), the seconds to each one's hello and the
CPU seconds they and the template took (`jobs/template.py`; COMPILE_LENS_WORKER_TEMPLATE=0: each its own).

    PYTHONPATH=server python -m benchmarks.editor.worker_start --workers 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import tempfile
import time

from compile_lens.jobs.lanes import WorkerSlot, default_python, worker_env
from compile_lens.jobs.template import Templates


def _children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


async def starts(count: int, forked: bool) -> tuple[list[float], float]:
    """(seconds to each worker's hello, CPU seconds of every process started, template included)."""
    os.environ["COMPILE_LENS_WORKER_TEMPLATE"] = "1" if forked else "0"
    templates, seconds = Templates(), []
    cpu0 = _children_cpu_s()
    with tempfile.TemporaryDirectory() as folder:
        for n in range(count):
            slot = WorkerSlot(f"w{n}", default_python(), folder, worker_env(None), spare=False, templates=templates)
            started = time.perf_counter()
            await slot.info(120)
            seconds.append(time.perf_counter() - started)
            await slot.stop()  # each worker reaped before the next: its CPU is counted
        await templates.stop()
    return seconds, _children_cpu_s() - cpu0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    found = {}
    for forked in (False, True):
        seconds, cpu = asyncio.run(starts(args.workers, forked))
        name = "forked" if forked else "own"
        found[name] = {"hello_s": [round(s, 3) for s in seconds], "cpu_s": round(cpu, 2)}
        print(f"{name:>6}: hello after {', '.join(f'{s:.3f}' for s in seconds)} s; CPU of all processes {cpu:.1f} s")
    print(json.dumps({"workers": args.workers, "load": os.getloadavg()[0], **found}))


if __name__ == "__main__":
    main()
