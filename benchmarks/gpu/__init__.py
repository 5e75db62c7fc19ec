"""The units of the GPU check (`scripts/gpu-check`, `python -m benchmarks --gpu`), what only a device
can answer first, each under its own limit; the limits (with the wheels' install) sum to 300 s, so
the check fits a 15-minute lent device slot with room to run it again. Each also rehearses on the
CPU (`--device cpu --dry`, every unit tiny).

1. `gpu_capture`: Kineto traces, TORCH_TRACE logs with provenance, an independent timing, the CLI's
   JSON (benchmarks/gpu/capture.py; committed as tests/data/cuda/ for the CPU replay);
2. `gpu_tests`: the device's tests (COMPILE_LENS_TEST_DEVICE), every outcome reported;
3. `gpu_busy`: the busy rule's verdict on this box, idle (and NVML's view of a load, where NVML is);
4. `gpu_autotune`: the max-autotune lever, once.

Each returns typed figures (`figures.Result`); the three that run a module of this folder read back
the one figures line it ends with (`common.child_result`); `gpu_tests` reads pytest's own JUnit XML.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from .. import REPO, Context, unit
from ..common import env, py, result_of, run, tail
from ..figures import Figure, Result

INSTALL_S = 15  # scripts/gpu-check's install of the wheels, before the harness starts
LIMITS = {"gpu_capture": 115, "gpu_tests": 90, "gpu_busy": 25, "gpu_autotune": 55}  # + INSTALL_S = 300
INTERRUPT_S = 10  # pytest's time, once interrupted, to finish its report (the JUnit XML) before it is killed


def _finished(ctx: Context, args: list[str]) -> Result:
    """A module of this folder run as its own process: its figures line; an exit other than 0 is a
    missed verdict (the child's own rule), its output's tail kept."""
    proc = run(ctx, args)
    got = result_of(proc)
    if proc.returncode != 0:
        got.ok = False
        got.notes.setdefault("error", tail(proc))
    return got


@unit("gpu_capture", "Kineto traces (MLPStack, GPT; forward, train step; fp32, bf16 autocast), TORCH_TRACE logs with "
      "provenance, CUDA-event timing and the CLI's JSON written to OUT/cuda with a manifest",
      "torch.profiler's own Kineto export", gpu=1, timeout_s=LIMITS["gpu_capture"])
def gpu_capture(ctx: Context) -> Result:
    # the child splits its own budget (captures, then the CLI); the margin is its start and the manifest
    args = py("gpu.capture", str(ctx.out / "cuda"), "--device", ctx.device, "--budget", str(max(10, int(ctx.timeout_s) - 8)))
    return _finished(ctx, args + (["--dry"] if ctx.dry else []))


# the device's tests, the GPU-only ones first (a run stopped at its limit has reported those)
GPU_TESTS = ("tests/worker/test_levers_cudagraphs.py", "tests/worker/test_line_costs.py",
             "tests/worker/test_benchmark_parts.py", "tests/worker/test_benchmark.py")
OUTCOMES = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL")


def outcomes(xml: Path) -> dict[str, str]:
    """Each test's outcome from pytest's JUnit XML (`--junitxml`), by its node id: FAILED or ERROR where
    the case holds a failure or an error (a teardown's error too), XFAIL or SKIPPED where skipped, else
    PASSED. An interrupted run's report holds the tests that ended, and a nameless case: left out."""
    found: dict[str, str] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        if not case.get("classname"):
            continue
        kinds = {child.tag: child for child in case}
        skipped = kinds.get("skipped")
        found[_node_id(case.get("classname") or "", case.get("name") or "")] = (
            "FAILED" if "failure" in kinds else "ERROR" if "error" in kinds else
            ("XFAIL" if skipped.get("type") == "pytest.xfail" else "SKIPPED") if skipped is not None else "PASSED")
    return found


def _node_id(classname: str, name: str) -> str:
    """pytest's node id (tests/x/test_y.py::Class::test) of JUnit's classname ("tests.x.test_y.Class") and name."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (REPO / path).exists():
            return "::".join([path, *parts[end:], name])
    return f"{classname}::{name}"


def _pytest(ctx: Context, args: list[str], xml: Path) -> tuple[int, str, bool]:
    """pytest under the unit's limit, interrupted (SIGINT) short of it so it still writes its JUnit XML
    of the tests that ended; its exit status, its output, whether it was stopped."""
    # SIGINT back to its default in the child: a harness started in the background (`cmd &`, nohup, a
    # CI runner) passes SIGINT on ignored, and a Python started so never installs its handler
    child = subprocess.Popen([*args, f"--junitxml={xml}"], cwd=REPO, env=env(ctx, COMPILE_LENS_TEST_DEVICE=ctx.device),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        text, _ = child.communicate(timeout=max(5.0, ctx.timeout_s - INTERRUPT_S - 2))
        return child.returncode, text, False
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGINT)
    try:
        text, _ = child.communicate(timeout=INTERRUPT_S)
    except subprocess.TimeoutExpired:  # a test deaf to the interrupt (inside a kernel): its report is lost
        child.kill()
        text, _ = child.communicate()
    return 124, text or "", True


@unit("gpu_tests", "the device's tests (CUDA-graphs lever, line costs, the benchmark) pass with "
      "COMPILE_LENS_TEST_DEVICE set to the device, each outcome reported", "the tests' own independent checks",
      gpu=2, timeout_s=LIMITS["gpu_tests"])
def gpu_tests(ctx: Context) -> Result:
    # the rehearsal: two tests that need no shared measurement (test_benchmark*.py are `alone`: slow)
    chosen = (["tests/worker/test_benchmark_parts.py", "-k", "test_resolve_device or test_oom_detection"] if ctx.dry
              else list(GPU_TESTS))
    xml = ctx.out / "tests.xml"
    xml.unlink(missing_ok=True)  # a report left by an earlier run is not this one's
    rc, text, stopped = _pytest(ctx, [sys.executable, "-m", "pytest", "-v", "-rA", "-p", "no:cacheprovider", *chosen], xml)
    (ctx.out / "tests.log").write_text(text, encoding="utf-8")  # for people: the outcomes are read from the XML
    each = outcomes(xml) if xml.exists() else {}
    (ctx.out / "tests.json").write_text(json.dumps({"rc": rc, "tests": each}, indent=1), encoding="utf-8")
    count = {k: sum(v == k for v in each.values()) for k in OUTCOMES}
    figures = {"tests": Figure(len(each), "count", "higher", 1), "failed": Figure(count["FAILED"], "count", "lower", 0),
               "error": Figure(count["ERROR"], "count", "lower", 0), "passed": Figure(count["PASSED"], "count"),
               "skipped": Figure(count["SKIPPED"], "count"), "xfail": Figure(count["XFAIL"], "count")}
    notes: dict[str, Any] = {"rc": rc, "failed_tests": [k for k, v in each.items() if v in ("FAILED", "ERROR")][:10]}
    if stopped:
        notes["stopped"] = (f"at the unit's limit ({ctx.timeout_s:.0f} s) after {len(each)} tests"
                            + ("" if xml.exists() else ": no JUnit report (pytest did not stop when interrupted)")
                            + "; tests.log has the rest")
    elif rc not in (0, 1):
        notes["error"] = text[-600:]
    # pytest's exit status holds what no count can: an interrupted or broken run (2-5) is not a pass
    return Result(figures, ok=False if rc != 0 else None, notes=notes)


@unit("gpu_busy", "the busy rule reads this idle box as not busy (without schedstat too: gVisor); NVML sees a "
      "matmul load as another process's and our own tree's as ours", "nvidia-smi's utilisation",
      gpu=3, timeout_s=LIMITS["gpu_busy"])
def gpu_busy(ctx: Context) -> Result:
    return _finished(ctx, py("gpu.busy_check", "--device", ctx.device, "--limit", str(max(5, int(ctx.timeout_s) - 8))))


@unit("gpu_autotune", "the max-autotune lever measured once (each side's cold compile, the steady forward)",
      "the default compile", gpu=4, timeout_s=LIMITS["gpu_autotune"])
def gpu_autotune(ctx: Context) -> Result:
    return _finished(ctx, py("gpu.autotune_once", "--device", ctx.device, *(["--dry"] if ctx.dry else [])))
