"""What torch itself says about code: the lines its own `TORCH_LOGS=graph_breaks` output names, for
a plain `torch.compile(backend="eager")` run in a fresh process (the truth a test compares with)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

# the loop fixtures (tests/fixtures/loops): file -> (the target, its inputs as torch's run takes them)
LOOP_TARGETS = {
    "layers.py": ("Stack", "(torch.randn(2, 4, 16),)"),
    "decode.py": ("GreedyDecoder", "(torch.randint(0, 32, (1, 4)),)"),
    "regulator.py": ("LengthRegulator", "(torch.randn(2, 3, 8), torch.ones(2, 3, dtype=torch.long))"),
}
_NAMED = re.compile(r"Graph break in user code at (?P<path>\S+):(?P<line>\d+)")


def lines_torch_names(folder: Path, targets: dict[str, tuple[str, str]]) -> dict[str, set[int]]:
    """file -> the lines of that file torch's graph_breaks log names, calling each file's class (built
    with no arguments) on its inputs (Python text): targets = {file: (class, inputs)}."""
    runs = "\n".join(f"torch._dynamo.reset()\ntorch.compile({file[:-3]}.{cls}(), backend='eager')(*{args})"
                     for file, (cls, args) in targets.items())
    script = textwrap.dedent(f"""\
        import sys, torch
        sys.path.insert(0, {str(folder)!r})
        import {", ".join(f[:-3] for f in targets)}
        """) + runs
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TORCH_LOGS": "graph_breaks"})
    assert done.returncode == 0, done.stderr[-2000:]
    named: dict[str, set[int]] = {file: set() for file in targets}
    for m in _NAMED.finditer(done.stderr):
        if os.path.dirname(os.path.realpath(m["path"])) == os.path.realpath(folder):
            named[os.path.basename(m["path"])].add(int(m["line"]))
    return named
