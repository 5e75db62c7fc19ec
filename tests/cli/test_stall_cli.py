"""`check` on a compile that stalls: while it is quiet, the progress on stderr says the compile stage, the
compile id and the user line Dynamo is tracing (from the worker's own stack), and the timeout's
finding says the same. A real stall (tests/fixtures/faults/compile_stall.py), ended by `--timeout`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from paths import FIXTURES

STALL = FIXTURES / "faults" / "compile_stall.py"


@pytest.mark.slow
def test_a_stalled_compile_is_named_on_stderr_and_in_the_timeout(tmp_path):
    shutil.copy(STALL, tmp_path / "compile_stall.py")
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "check", "compile_stall.py", "--no-benchmark",
                           "--no-recompiles", "--no-cache", "--timeout", "6"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONSAFEPATH": "1"})
    line = next(i for i, t in enumerate(STALL.read_text().splitlines(), 1) if "return stall(y)" in t)
    where = f"compile 0/0, at compile_stall.py:{line} in forward"
    quiet = [t for t in done.stderr.splitlines() if "tracing StallsInCompile: quiet" in t]
    assert quiet and "in Dynamo" in quiet[0] and where in quiet[0], done.stderr
    assert "running compile_stall.py:" in quiet[0]  # the user function Dynamo runs (the op's fake), too
    [finding] = [t for t in done.stdout.splitlines() if " CL003 " in t]
    assert "longer than 6 s without progress" in finding and where in finding, finding
    assert done.returncode == 1 and "Traceback" not in done.stderr
