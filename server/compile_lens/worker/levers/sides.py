"""The compile side of a lever: the default and the lever, each in its own fresh process with an
empty Inductor cache (`child`), one after the other, and whether other processes were busy meanwhile."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from typing import Any, Callable, Optional

from ...busy.cpu import OthersCPU
from ...busy.rule import CpuUse, Load, decide
from ..loader import BuiltTarget
from ..measure.compile.cold import CACHE_PREFIX, cold_limit, run_child

CHILD = "compile_lens.worker.levers.child"


def compile_side(target: BuiltTarget, variant: str, *, path: str, root: str, device: str, mode: str,
                 max_seconds: float, progress: Callable[..., None],
                 shapes: Optional[list[str]] = None, module: str = CHILD,
                 extra: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """{"cold_s", "cold_cpu_s", "warm_s", "compiles", "recompiles", "busy"} of one side (`module`:
    another child, e.g. the restart paths' `restart_child`, with `extra` in its job)."""
    import os

    cache_dir = tempfile.mkdtemp(prefix=CACHE_PREFIX)
    job = {"path": path, "root": root, "spec": dataclasses.asdict(target.spec), "device": device, "mode": mode,
           "variant": variant, "shapes": shapes or [], "what": f"compiling ({variant})", **(extra or {})}
    others = OthersCPU()
    others.start()
    started = time.perf_counter()
    try:
        found = run_child(job, cache_dir=cache_dir, timeout=cold_limit(max_seconds), progress=progress, module=module)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    use = others.use()
    if use is None:
        return found
    pct, top = use.others, use.top
    if found.get("descendants_cpu_s"):  # the child's compile workers, orphaned at its exit: ours, not others'
        pct = max(0.0, pct - 100.0 * found["descendants_cpu_s"] / max(1e-6, time.perf_counter() - started))
        top = [t for t in top if "compile_worker" not in t.cmdline]
    # a compile is CPU work on every device: the CPU rule, with the compile's single thread
    _, words = decide("cpu", Load(cpus=os.cpu_count() or 1, threads=1, cpu=CpuUse(pct, use.ours, top)),
                      during="during the compile")
    if words:
        found["busy"] = " and ".join(words)
    return found
