"""Starting the user's program as the shell would, with the recorder's boot folder at hand.

Shared by `compile-lens record` and `compile-lens trial`: same argv, folder, stdin/stdout/stderr;
a terminal's Ctrl-C reaches the program, a SIGTERM sent to us is passed on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

BOOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_boot")
LIB = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # folder holding compile_lens


def run_program(program: list[str], env: dict[str, str], who: str = "compile-lens record") -> int:
    try:
        child = subprocess.Popen(program, env=env)
    except FileNotFoundError:
        print(f"{who}: command not found: {program[0]}", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"{who}: permission denied: {program[0]}", file=sys.stderr)
        return 126
    # A terminal's Ctrl-C reaches the child too (same process group): let it decide; pass on
    # a SIGTERM sent to us alone.
    previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    previous_term = signal.signal(signal.SIGTERM, lambda signum, frame: child.send_signal(signum))
    try:
        return child.wait()
    finally:
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous_term)
