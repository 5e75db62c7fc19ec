"""Running the user's program once under the trial hook: the environment, and the record it leaves.

The program runs as the shell would run it (its stdout, stderr, stdin and exit status are its
own), with the `record` hook's boot folder on PYTHONPATH and COMPILE_LENS_TRIAL_* telling the hook
what to do. The recorder writes to a scratch folder, not to the workspace's recorded.json.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import uuid
from typing import Optional

from ..busy.cpu import OthersCPU
from ..busy.rule import CpuUse
from ..record.launch import BOOT, LIB, run_program
from ..remote_cache import Remote, cold_env, remote_env
from . import torchrun


def run_once(program: list[str], *, mode: str, root: str, scratch: str, steps: int = 0, seconds: float = 0.0,
             step_on: str = "optimizer", options: Optional[dict] = None, cold_cache: bool = False,
             tag: str = "", save_artifact: str = "", load_artifact: str = "", remote: Optional[Remote] = None,
             fx_keys: bool = False,
             hang_timeout: float = torchrun.DEFAULT_HANG_TIMEOUT) -> tuple[int, Optional[dict]]:
    """Run the program in `mode` ("eager" | "compiled"); its exit status and the hook's record (None if none),
    with `other_cpu_percent`: what other processes used meanwhile (the program's own children count as its).
    `remote`: Inductor's remote caches on, served by that Redis (`--remote-cache`'s run); `fx_keys`: the
    record keeps each compile's FX-graph cache key (`fx_keys`), to say why a run meant to be served missed."""
    name = f"{mode}{tag}"
    out = os.path.join(scratch, f"{name}.json")
    # cold: no remote cache, no PGO profile, whatever the user's environment says — the same
    # `cold_env` the check's cold compile child runs in (`jobs.lanes.worker_env`)
    env = remote_env(os.environ, remote) if remote is not None else cold_env(os.environ) if cold_cache \
        else dict(os.environ)
    env.pop("COMPILE_LENS_TRIAL_OWNER", None)
    env["PYTHONPATH"] = BOOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update({
        "COMPILE_LENS_RECORD_ROOT": root,
        "COMPILE_LENS_RECORD_OUT": os.path.join(scratch, f"recorded-{name}.json"),
        "COMPILE_LENS_RECORD_LIB": LIB,
        "COMPILE_LENS_RECORD_RUN": uuid.uuid4().hex,
        "COMPILE_LENS_RECORD_COMMAND": shlex.join(program),
        "COMPILE_LENS_BOOT_HOOKS": "compile_lens.trial.hook",  # the boot hook installs it beside the recorder
        "COMPILE_LENS_TRIAL_MODE": mode,
        "COMPILE_LENS_TRIAL_STEPS": str(steps or ""),
        "COMPILE_LENS_TRIAL_SECONDS": str(seconds or ""),
        "COMPILE_LENS_TRIAL_STEP_ON": step_on,
        "COMPILE_LENS_TRIAL_OPTIONS": json.dumps(options or {}),
        "COMPILE_LENS_TRIAL_OUT": out,
    })
    if mode == "eager":
        env["TORCH_COMPILE_DISABLE"] = "1"  # the program's own torch.compile calls run eagerly too
    else:
        env.pop("TORCH_COMPILE_DISABLE", None)
    if save_artifact:
        env["COMPILE_LENS_TRIAL_SAVE_ARTIFACTS"] = save_artifact
    if load_artifact:
        env["COMPILE_LENS_TRIAL_LOAD_ARTIFACTS"] = load_artifact
    if fx_keys:
        env["COMPILE_LENS_TRIAL_FX_KEYS"] = "1"
    if cold_cache:
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, f"inductor-{name}")
    others = OthersCPU()
    if torchrun.is_torchrun(program):
        return _run_ranks(program, env, out, hang_timeout, others)
    code = run_program(program, env, who="compile-lens trial")
    busy = others.use()
    try:
        with open(out, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return code, None
    _busy_into(record, busy)
    return code, record


def _busy_into(record: dict, busy: Optional[CpuUse]) -> None:
    """`other_cpu_percent`: others' CPU and our own other processes' (the CPU rule's figure), and who
    (`busy_top`: the busiest, ours told apart from others)."""
    record["other_cpu_percent"] = None if busy is None else round(busy.others + busy.ours, 1)
    if busy is not None and busy.top:
        record["busy_top"] = [dataclasses.asdict(t) for t in busy.top]


def _run_ranks(program: list[str], env: dict, out: str, hang_timeout: float,
               others: OthersCPU) -> tuple[int, Optional[dict]]:
    """A torchrun run: one record for the run as a whole (see `ranks.merge`), each rank's inside it."""
    from .ranks import merge

    code, ranks, hung = torchrun.run_ranks(program, env, out, hang_timeout)
    if not ranks:
        return code, None
    record = merge(ranks, hung)
    _busy_into(record, others.use())
    return code, record
