"""The busy rule with real processes (no stand-ins): a child of the measuring process is ours, a
process outside its tree is others' and named; a thread's run-queue wait grows when the cores are
oversubscribed; the CUDA rule decides from real readings (NVML is absent here: said, and the rule
falls back to what it can read). Each burn lasts about a second."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

pytest.importorskip("torch")

from compile_lens.busy import contention, rule  # noqa: E402
from compile_lens.busy import cpu as cpu_readers  # noqa: E402
from compile_lens.busy import gpu as gpu_readers  # noqa: E402
from compile_lens.busy.cpu import OthersCPU  # noqa: E402
from compile_lens.busy.rule import CpuUse, GpuProcess, Load, busy_threshold, decide, process_label  # noqa: E402
from compile_lens.processes import our_pids  # noqa: E402
from compile_lens.protocol import BusyProcess, ContentionReport, from_dict  # noqa: E402
from paths import SERVER  # noqa: E402

BURN_S = 1.0
CPUS = os.cpu_count() or 1


@pytest.fixture(scope="module")
def burn_py(tmp_path_factory):
    path = tmp_path_factory.mktemp("burn") / "burn.py"
    path.write_text("import sys, time\nend = time.time() + float(sys.argv[1])\nwhile time.time() < end:\n    pass\n")
    return str(path)


def _child(burn_py: str, seconds: float = 3 * BURN_S) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, burn_py, str(seconds)])


MEASURE = """
import dataclasses, json, os, sys, time
import torch  # as in the worker: the reading's threads are torch's
from compile_lens.busy.contention import Contention
from compile_lens.busy.cpu import OthersCPU, thread_run_delay_s
device, seconds = sys.argv[1], float(sys.argv[2])
watch, contention, d0 = OthersCPU(), Contention(device), thread_run_delay_s()
time.sleep(seconds)
use, d1 = watch.use(top_n=50), thread_run_delay_s()
print(json.dumps({"others": use.others, "ours": use.ours, "top": [dataclasses.asdict(t) for t in use.top],
                  "report": contention.report().json(),
                  "sched": None if d0 is None else d1 - d0, "wall": seconds}))
"""


def _measured_beside(burn_py: str, device: str) -> tuple[int, dict]:
    """A burner and, beside it, a measuring process (its sibling: the burner is outside its tree);
    what the measuring process saw, and the burner's pid."""
    burner = _child(burn_py, 60.0)  # killed once the measuring process (it imports torch) has answered
    try:
        env = {**os.environ, "PYTHONPATH": str(SERVER)}
        env.pop("COMPILE_LENS_GPU_READINGS", None)
        out = subprocess.run([sys.executable, "-c", MEASURE, device, "0.8"], capture_output=True, text=True,
                             env=env, check=True, timeout=120).stdout
    finally:
        burner.kill()
        burner.wait()
    return burner.pid, json.loads(out.strip().splitlines()[-1])


def _end(pid: int) -> None:
    try:
        proc = psutil.Process(pid)
        proc.kill()
        proc.wait(5)
    except psutil.Error:
        pass


def test_a_live_child_burning_a_core_is_ours(burn_py):
    child = _child(burn_py)
    try:
        time.sleep(0.1)
        assert child.pid in our_pids()
        watch = OthersCPU()
        time.sleep(0.8)
        use = watch.use(top_n=50)
    finally:
        child.kill()
        child.wait()
    assert use is not None and use.ours > TOP_MIN, use
    entry = [t for t in use.top if t.pid == child.pid]
    assert entry and entry[0].ours is True and "burn.py" in entry[0].cmdline, use.top


TOP_MIN = 5.0  # a burner on a loaded two-core machine still gets more than this


def test_a_foreign_burner_is_others_and_named(burn_py):
    pid, seen = _measured_beside(burn_py, "cpu")
    entry = [t for t in seen["top"] if t["pid"] == pid]
    assert entry and entry[0]["ours"] is False and entry[0]["cpu_percent"] > TOP_MIN, seen["top"]
    assert seen["others"] >= entry[0]["cpu_percent"] * 0.5, seen
    report = seen["report"]
    assert report["rule"] == "cpu" and "other_cpu_percent" in report and "own_cpu_percent" in report
    assert all(set(t) == {"pid", "name", "cmdline", "cpu_percent", "ours"} for t in report.get("top", []))
    # the rule as strict as ever on the CPU: busy exactly when others and ours pass the line
    line = busy_threshold(report["cpus"], report["threads"])
    assert report["busy"] == (report["other_cpu_percent"] + report["own_cpu_percent"] > line), report
    words = rule.busy_words(from_dict(ContentionReport, report))  # the JSON read back as the record
    if report["busy"] and report["other_cpu_percent"] >= report["own_cpu_percent"]:
        assert words.startswith("machine busy: other processes used") and "% CPU during timing" in words
        named = [t for t in report.get("top", []) if not t["ours"]][:3]
        if any(t["pid"] == pid for t in named):
            assert "python burn.py" in words, words


def _oversubscribed_wait(burn_py: str) -> tuple[float, float]:
    """(run-queue wait, wall seconds) of this thread burning while 2× as many burners as cores run."""
    burners = [_child(burn_py, BURN_S + 0.5) for _ in range(2 * CPUS)]
    try:
        time.sleep(0.2)
        d0, t0 = cpu_readers.thread_run_delay_s(), time.perf_counter()
        end = t0 + BURN_S
        while time.perf_counter() < end:
            pass
        return cpu_readers.thread_run_delay_s() - d0, time.perf_counter() - t0
    finally:
        for b in burners:
            b.kill()
            b.wait()


def test_a_tests_declaration_of_quiet_counts_busy_rounds_and_says_so(burn_py, monkeypatch):
    """`COMPILE_LENS_TEST_QUIET=1` under pytest: rounds beside real load count, and the reading says it
    was declared and what the rule saw; outside pytest (no PYTEST_CURRENT_TEST) it is ignored."""
    monkeypatch.setenv(contention.QUIET_ENV, "1")
    burners = [_child(burn_py, BURN_S + 0.5) for _ in range(2 * CPUS)]  # ours: the CPU rule counts them
    try:
        time.sleep(0.2)
        watch = contention.Contention("cpu")
        time.sleep(0.5)
        declared, quiet = watch.report(), watch.round_quiet()
        clocks = contention.round_clock("cpu"), contention.round_clock("cuda:0")
        monkeypatch.delenv("PYTEST_CURRENT_TEST")
        undeclared_clock = contention.round_clock("cpu")
        watch.start()
        time.sleep(0.5)
        plain, judged = watch.report(), watch.round_quiet()
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert declared.declared_quiet is True and declared.busy is False and quiet is True, declared
    assert declared.busy_by_rule is True and declared.why, declared  # what the rule saw, kept
    assert rule.busy_words(declared) is None
    # its CPU rounds read the thread's CPU clock (others' load does not enter it), said in the reading;
    # CUDA's and an undeclared machine's rounds read the wall clock
    assert declared.clock == "thread CPU" and clocks == (time.thread_time, None) and undeclared_clock is None
    assert "declared_quiet" not in plain.json() and plain.busy is True and judged is False, plain
    assert rule.busy_words(plain).startswith("machine busy: ")


def test_schedstat_says_a_thread_waited_when_the_cores_are_oversubscribed(burn_py):
    if cpu_readers.thread_run_delay_s() is None:
        pytest.skip("no /proc/self/task/TID/schedstat on this kernel")
    waited, wall = _oversubscribed_wait(burn_py)
    assert waited > 0.1 * wall, (waited, wall)  # 2×cores burners and us: we wait about half the time


def test_the_cuda_rule_decides_from_real_readings(burn_py, monkeypatch):
    monkeypatch.delenv("COMPILE_LENS_GPU_READINGS", raising=False)
    monkeypatch.setattr(gpu_readers, "_READER", None)
    gpu, why = gpu_readers.gpu_others()
    try:
        import pynvml
        pynvml.nvmlInit()
        pytest.skip("NVML answers on this machine: the unknown branch is not this machine's")
    except Exception:  # noqa: BLE001 - no nvidia-ml-py or no driver: NVML absent, as here
        pass
    assert gpu is None and why, (gpu, why)
    # a foreign burner on one core while the measuring thread sleeps: the CPU rule may fire, the CUDA rule not
    pid, seen = _measured_beside(burn_py, "cuda")
    report = seen["report"]
    assert report["rule"] == "cuda" and report["gpu_other_processes"] is None
    assert any("GPU" in u for u in report["unknown"]), report  # said: GPU use by others was not read
    top = [from_dict(BusyProcess, t) for t in seen["top"]]
    use, sched, wall = CpuUse(seen["others"], seen["ours"], top), seen["sched"], seen["wall"]
    read = Load(cpus=CPUS, threads=CPUS, cpu=use, wall_s=wall, sched_delay_s=sched)
    on_cuda, on_cpu = decide("cuda", read).busy, decide("cpu", read).busy
    assert on_cuda is (sched > rule.SCHED_SHARE * wall)  # a sleeping thread barely waits: quiet
    assert not on_cuda, seen
    assert on_cpu is (use.others + use.ours > busy_threshold(CPUS, CPUS))
    # no schedstat: busy only when others and ours left no core for the launching thread
    fallback = decide("cuda", Load(cpus=CPUS, threads=CPUS, cpu=use, wall_s=wall)).busy
    assert fallback is (use.others + use.ours > rule.no_schedstat_threshold(CPUS))
    # the oversubscribed thread's real wait: busy on CUDA, said as the launching thread's wait
    waited, wall = _oversubscribed_wait(burn_py)
    busy, words = decide("cuda", Load(cpus=CPUS, threads=CPUS, cpu=CpuUse(0.0, 0.0), wall_s=wall, sched_delay_s=waited))
    assert busy and words[0].startswith("our launching thread waited for a core"), words


def test_without_schedstat_an_idle_gpu_box_is_quiet_and_oversubscribed_cores_are_busy(burn_py, tmp_path, monkeypatch):
    """A box without /proc/<pid>/schedstat (gVisor, as on the lent H200): the rule reads a proc folder
    that lacks it (the `proc` seam; its loadavg is the real one) and judges the CUDA rounds from the
    CPU times. This box's real readings counted as a 16-core GPU box's (at most 2 of 16 cores taken)
    read quiet, as the CPU rule did not (it called half a core of anyone's use busy); more burners
    than cores read busy."""
    monkeypatch.delenv("COMPILE_LENS_GPU_READINGS", raising=False)
    monkeypatch.setattr(gpu_readers, "_READER", None)
    (tmp_path / "loadavg").symlink_to("/proc/loadavg")
    assert cpu_readers.thread_run_delay_s(proc=str(tmp_path)) is None
    watch = contention.Contention("cuda", proc=str(tmp_path), cpus=16)
    time.sleep(0.5)
    idle = watch.report()
    assert idle.launch_wait_percent is None and any("schedstat" in u for u in idle.unknown), idle
    assert idle.busy is False, idle
    burners = [_child(burn_py, 4 * BURN_S) for _ in range(CPUS + 2)]
    try:
        time.sleep(0.3)
        watch = contention.Contention("cuda", proc=str(tmp_path))
        time.sleep(BURN_S)
        loaded = watch.report()
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert loaded.busy is True and "no core was left for our launching thread" in loaded.why[0], loaded
    # no CPU times at all: the load average against the cores
    assert rule.no_schedstat_words(None, None, 16, 0.4, [], "during timing") == []
    assert rule.no_schedstat_words(None, None, 2, 5.0, [], "during timing") == [
        "the load average was 5.0 on 2 CPUs during timing"]


def test_another_process_on_the_gpu_is_named_and_ours_is_not(tmp_path, monkeypatch):
    """The reading through the busy-GPU wait's file reader (the format NVML's is turned into), with
    real pids: this process's parent (outside its tree: not compile-lens) and this process."""
    other = os.getppid()
    readings = tmp_path / "gpus.json"
    readings.write_text(json.dumps({"gpus": [{"index": 0, "uuid": "GPU-x", "utilization": 90,
                                              "pids": [other, os.getpid()]}]}))
    monkeypatch.setenv("COMPILE_LENS_GPU_READINGS", str(readings))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(gpu_readers, "_READER", None)
    gpu, _ = gpu_readers.gpu_others()
    label = process_label(psutil.Process(other).cmdline(), psutil.Process(other).name())
    assert gpu == (GpuProcess(other, label),), gpu
    busy, words = decide("cuda", Load(cpus=CPUS, threads=CPUS, cpu=CpuUse(0.0, 0.0), wall_s=1.0, sched_delay_s=0.0,
                                      gpu_others=gpu))
    assert busy and words == [f"1 other process used the GPU: {label}"], words


def test_settle_waits_for_our_own_processes_to_go_quiet(burn_py):
    child = _child(burn_py, 0.8)
    try:
        time.sleep(0.1)
        contention.settle(max_s=5.0)
        assert child.poll() is not None  # it waited for our burner to finish
    finally:
        child.kill()
        child.wait()


def test_a_reading_from_before_the_rule_is_judged_as_it_was():
    """A stored reading without a `busy` of its own (as JSON read back: `busy` null) gets today's rule."""
    old = lambda **fields: from_dict(ContentionReport, fields)  # noqa: E731
    assert rule.busy_words(old(other_cpu_percent=40.0, cpus=2, threads=2)) is None
    words = rule.busy_words(old(other_cpu_percent=60.0, cpus=2, threads=2, gpu_other_processes=1))
    assert words == "machine busy: other processes used 60% CPU during timing (2 CPUs) and 1 other process used the GPU"
    assert rule.busy_words(old(busy=False, other_cpu_percent=900.0, cpus=16, threads=16)) is None


PARENT = """
import json, os, subprocess, sys
sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
seen = subprocess.run([sys.executable, "-c", "import json; from compile_lens.processes import our_root, our_pids; "
                       "print(json.dumps([our_root(), sorted(our_pids())]))"], capture_output=True, text=True).stdout
sibling.kill()
print(json.dumps({"me": os.getpid(), "sibling": sibling.pid, "seen": json.loads(seen)}))
"""


@pytest.mark.parametrize("marker", ["compile_lens", "elsewhere"])
def test_the_compile_lens_parent_and_its_other_children_are_ours(marker):
    """A process started by compile-lens's CLI or server (`python -m compile_lens`: the marker in its
    command line) counts that parent and its other workers as ours; started by anything else, not."""
    env = {**os.environ, "PYTHONPATH": str(SERVER)}
    out = subprocess.run([sys.executable, "-c", PARENT, marker], capture_output=True, text=True, env=env,
                         check=True, timeout=60).stdout
    found = json.loads(out)
    root, pids = found["seen"]
    ours = marker == "compile_lens"
    assert (root == found["me"]) is ours and (found["sibling"] in pids) is ours, found


def test_the_report_line_says_what_the_rule_read_and_could_not(monkeypatch):
    """The report's timing line from a real CUDA-rule reading on this machine (no NVML: said)."""
    from types import SimpleNamespace

    from compile_lens.render.cards import contention_line

    monkeypatch.delenv("COMPILE_LENS_GPU_READINGS", raising=False)
    monkeypatch.setattr(gpu_readers, "_READER", None)
    watch = contention.Contention("cuda")
    time.sleep(0.3)
    seen = watch.report()
    line = contention_line(SimpleNamespace(train_step=None, forward=SimpleNamespace(rounds=12), contention=seen))
    assert line.startswith("12 paired rounds; other processes used") and "% CPU meanwhile" in line
    if seen.gpu_other_processes is None:
        assert "not read: other processes on the GPU (" in line, line
    if seen.launch_wait_percent is not None:
        assert "the launching thread waited for a core" in line


def test_inductors_compile_pool_is_ours_and_settles():
    """Inductor's compile workers (started as a compile on a GPU starts them: `warm_pool`; a small CPU
    compile here compiles inline) are our own processes, and `settle` leaves them ready and quiet."""
    from torch._inductor.async_compile import (
        AsyncCompile,
        get_compile_threads,
        shutdown_compile_workers,
    )

    if get_compile_threads() <= 1:
        pytest.skip("one compile thread here: Inductor starts no pool")
    AsyncCompile.warm_pool()
    try:
        contention.settle(max_s=60.0)
        workers = [p.pid for p in psutil.Process().children(recursive=True)]
        assert len(workers) > get_compile_threads(), workers  # the sidecar and its workers, ready
        assert set(workers) <= our_pids()
        watch = OthersCPU()
        time.sleep(0.3)
        use = watch.use(top_n=50)
        assert not any(t.pid in workers and not t.ours for t in use.top), use.top
    finally:
        shutdown_compile_workers()
