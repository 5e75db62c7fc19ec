"""Running a `torchrun` program under the trial: every rank observed, none lost.

Each rank (a process torchrun starts, with RANK in its environment) writes its own record,
`<out>.rank<R>.json` at exit, and appends a line per step to `<out>.rank<R>.jsonl` as it goes, so a
rank that is killed keeps its steps. The launcher itself runs no steps and writes nothing. The run
is started as its own process group and ended as one, with each rank's (torchrun starts every
rank in a session of its own; a rank names its pid in its step log): a run where no rank finishes a step for
`hang_timeout` seconds is stopped (SIGTERM to the group, SIGKILL after a grace period), and the
ranks still running then are said to be stuck at the step they had reached.

Stdlib only: the hook in each rank imports the path helpers.
"""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import Optional

DEFAULT_HANG_TIMEOUT = 300.0
GRACE_S = 10.0  # after SIGTERM, before SIGKILL: a rank's handler writes its record
_LAUNCHERS = ("torch.distributed.run", "torch.distributed.launch")


def is_torchrun(program: list[str]) -> bool:
    """`torchrun ...`, or `python -m torch.distributed.run ...` (or the older `.launch`)."""
    if not program:
        return False
    if os.path.basename(program[0]) == "torchrun":
        return True
    for i, arg in enumerate(program[1:-1], start=1):
        if arg == "-m" and program[i + 1] in _LAUNCHERS:
            return True
    return False


def rank_out(out: str, rank: str) -> str:
    return f"{os.path.splitext(out)[0]}.rank{rank}.json"


def rank_log(out: str, rank: str) -> str:
    return f"{os.path.splitext(out)[0]}.rank{rank}.jsonl"


def run_ranks(program: list[str], env: dict[str, str], out: str, hang_timeout: float,
              who: str = "compile-lens trial") -> tuple[int, dict[int, dict], Optional[dict]]:
    """Run the launcher; its exit status, each rank's record, and what the hang watch did (None: nothing)."""
    env = {**env, "COMPILE_LENS_TRIAL_RANKED": "1"}
    try:
        child = subprocess.Popen(program, env=env, start_new_session=True)
    except FileNotFoundError:
        print(f"{who}: command not found: {program[0]}", file=sys.stderr)
        return 127, {}, None
    except PermissionError:
        print(f"{who}: permission denied: {program[0]}", file=sys.stderr)
        return 126, {}, None

    def to_group(signum: int, frame: object) -> None:  # our own group is not the run's: pass it on
        _signal_group(child.pid, signum)

    previous = {s: signal.signal(s, to_group) for s in (signal.SIGINT, signal.SIGTERM)}
    hung = None
    try:
        last_size, last_change = -1, time.monotonic()
        while True:
            try:
                code = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                pass
            size = sum(os.path.getsize(p) for p in glob.glob(rank_log(out, "*")))
            if size != last_size:
                last_size, last_change = size, time.monotonic()
            elif time.monotonic() - last_change > hang_timeout:
                hung = {"after_s": hang_timeout}
                print(f"{who}: no rank finished a step for {hang_timeout:g} s: ending the run (--hang-timeout)",
                      file=sys.stderr, flush=True)
                code = _end_group(child, out)
                break
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    for group in [child.pid, *_rank_pids(out)]:  # a rank the launcher left behind
        _signal_group(group, signal.SIGKILL)
    ranks = read_ranks(out)
    if hung is not None:
        hung["ranks"] = {r: len(rec.get("steps") or []) for r, rec in ranks.items() if not rec.get("finished")}
    return code, ranks, hung


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _end_group(child: subprocess.Popen, out: str) -> int:
    """SIGTERM to the launcher's group and each rank's (a rank's handler writes its record), SIGKILL after GRACE_S."""
    groups = [child.pid, *_rank_pids(out)]
    for group in groups:
        _signal_group(group, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(_alive(g) for g in groups):
        time.sleep(0.2)
    for group in groups:
        _signal_group(group, signal.SIGKILL)
    return child.wait()


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _rank_pids(out: str) -> list[int]:
    """The ranks' pids, as each named its own in the first line of its step log."""
    pids = []
    for path in glob.glob(rank_log(out, "*")):
        try:
            with open(path, encoding="utf-8") as f:
                pid = json.loads(f.readline()).get("head", {}).get("pid")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(pid, int) and pid > 1:
            pids.append(pid)
    return pids


def read_ranks(out: str) -> dict[int, dict]:
    """Each rank's record: the one it wrote at exit, else rebuilt from its step log (`finished` False)."""
    ranks: dict[int, dict] = {}
    pattern = re.compile(r"\.rank(\d+)\.jsonl?$")
    for path in sorted(glob.glob(rank_log(out, "*")) + glob.glob(rank_out(out, "*"))):
        found = pattern.search(path)
        if not found:
            continue
        rank = int(found[1])
        if path.endswith(".json"):
            try:
                with open(path, encoding="utf-8") as f:
                    record = json.load(f)
                ranks[rank] = {**record, "finished": not record.get("killed")}
            except (OSError, ValueError):
                pass
        elif rank not in ranks:
            ranks[rank] = _from_log(path)
    return dict(sorted(ranks.items()))


def _from_log(path: str) -> dict:
    """A rank that did not reach its exit: its steps, events and compiles as it logged them."""
    record: dict = {"steps": [], "events": [], "compiles": [], "failure": None, "finished": False,
                    "stopped_by_trial": False}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError:
        return record
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short by the kill
        if "head" in entry:
            record.update(entry["head"])
        if "step" in entry:
            record["steps"].append(entry["step"])
        record["events"] += entry.get("events") or []
        record["compiles"] += entry.get("compiles") or []
        if entry.get("failure"):
            record["failure"] = entry["failure"]
    return record
