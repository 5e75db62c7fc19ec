"""`compile-lens record [-q] [--root DIR] [-o FILE] -- COMMAND ARGS...`

Runs COMMAND exactly as the shell would (same argv, folder, stdin/stdout/stderr, environment but
for PYTHONPATH and COMPILE_LENS_RECORD_*) with the recorder on PYTHONPATH; every Python process it
starts records. Exits with COMMAND's exit status (and dies of the same signal). Afterwards, unless
`-q`, one summary block on stderr says what was recorded and what cannot be replayed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import time
import uuid
from typing import Any

from ..record import store
from ..record.launch import BOOT, LIB, run_program
from .common import add_program
from .common import program as program_of


def add_record_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "record", help="run your program and record the inputs its models and compiled functions get",
        description="Run COMMAND unchanged and record, for nn.Module classes and torch.compile'd functions "
                    "defined under the workspace root, the constructor arguments, the first call's inputs "
                    "and the shapes of every call, into ROOT/.compile-lens/recorded.json. "
                    "The next analysis uses them (directives and pyproject.toml entries come first).",
        usage="compile-lens record [-q] [--root DIR] [-o FILE] -- COMMAND [ARGS...]")
    parser.add_argument("--root", help="workspace root: only code under it is recorded (default: this folder)")
    parser.add_argument("-o", "--output", help="file to write (default: ROOT/.compile-lens/recorded.json)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing of our own")
    add_program(parser, run_record)
    return parser


def run_record(args: argparse.Namespace) -> int:
    if (program := program_of(args, "compile-lens record -- python train.py")) is None:
        return 2
    root = os.path.abspath(args.root or os.getcwd())
    out = os.path.abspath(args.output) if args.output else store.default_path(root)
    run_id = uuid.uuid4().hex
    env = dict(os.environ)
    env["PYTHONPATH"] = BOOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update({
        "COMPILE_LENS_RECORD_ROOT": root,
        "COMPILE_LENS_RECORD_OUT": out,
        "COMPILE_LENS_RECORD_LIB": LIB,
        "COMPILE_LENS_RECORD_RUN": run_id,
        "COMPILE_LENS_RECORD_COMMAND": shlex.join(program),
    })
    started = time.time()
    code = run_program(program, env, "compile-lens record")
    if not args.quiet:
        _summary(out, root, run_id)
        trouble = os.path.join(os.path.dirname(out), "record.log")
        if os.path.exists(trouble) and os.path.getmtime(trouble) >= started - 1:
            print(f"compile-lens: the recorder noted problems in {os.path.relpath(trouble)}", file=sys.stderr)
    if code < 0 and hasattr(signal, "SIGKILL"):  # died of a signal: do the same
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


def _summary(out: str, root: str, run_id: str) -> None:
    mine = {k: v for k, v in store.read(out).items() if (v.get("run") or {}).get("id") == run_id}
    where = os.path.relpath(out)
    if not mine:
        print(f"compile-lens: recorded nothing: no nn.Module or torch.compile'd function defined under {root} "
              "was built or called (was it run with `python -E`/`-I`, which ignore PYTHONPATH?)", file=sys.stderr)
        return
    print(f"compile-lens: recorded {len(mine)} target{'s' if len(mine) != 1 else ''} in {where}:", file=sys.stderr)
    for key, entry in sorted(mine.items()):
        calls, shapes = entry.get("calls", 0), len(entry.get("shapes", []))
        detail = f"{calls} call{'s' if calls != 1 else ''}" + (f", {shapes} input shapes" if shapes > 1 else "")
        print(f"  {key}  ({detail})", file=sys.stderr)
        init = entry.get("init") or {}
        missing = init.get("cannot_replay") or []
        if missing:
            what = ", ".join(f"`{m.get('argument')}` ({m.get('type')})" for m in missing)
            fix = "add `init=...` in a directive or pyproject.toml" if init.get("call") is None else "left out"
            print(f"    constructor arguments that cannot be replayed: {what}: {fix}", file=sys.stderr)
        call = entry.get("call") or {}
        if call.get("cannot_replay"):
            print(f"    its calls cannot be replayed: {call['cannot_replay']}", file=sys.stderr)
