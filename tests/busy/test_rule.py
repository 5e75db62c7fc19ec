"""The busy rule's one `decide`, on readings written by hand: each box and each reading it may lack
(schedstat, NVML, CPU times), and the askers that judge a stored or a trial's reading get its answer.
The real readings (processes, schedstat, NVML's stand-in) are tests/busy/test_busy_rule.py's."""

from __future__ import annotations

from compile_lens.busy.rule import CpuUse, GpuProcess, Load, busy_words, contention_busy, decide
from compile_lens.protocol import BusyProcess, ContentionReport
from compile_lens.trial.figures import RunFigures
from compile_lens.trial.summary import busy_during

TOP = [BusyProcess(1, "pytest", "python -m pytest", 95.0, False),
       BusyProcess(2, "python", "python -c from torch._inductor import compile_worker", 40.0, True)]


def test_the_cpu_rule_counts_others_and_ours_beyond_the_cores_our_threads_leave():
    # two cores, two threads: half a core is the line, whoever used it
    assert decide("cpu", Load(cpus=2, threads=2, cpu=CpuUse(30.0, 20.0))) == (False, [])
    busy, why = decide("cpu", Load(cpus=2, threads=2, cpu=CpuUse(95.0, 40.0, TOP)))
    assert busy and why == ["other processes used 95% CPU during timing (2 CPUs): python -m pytest 95%"]
    busy, why = decide("cpu", Load(cpus=2, threads=2, cpu=CpuUse(10.0, 90.0, TOP)), during="during the compile")
    assert busy and why == ["our own processes used 90% CPU during the compile: Inductor compile worker 40%"]
    # one compile thread on sixteen cores (a lever's side): 15.5 cores are others' to use
    assert not decide("cpu", Load(cpus=16, threads=1, cpu=CpuUse(1500.0, 0.0))).busy
    assert decide("cpu", Load(cpus=0, threads=1)) == (False, [])  # nothing read: nothing said


def test_the_cuda_rule_reads_what_it_can():
    gpu = (GpuProcess(7, "python train.py"),)
    # an idle 16-core GPU box with a busy core of ours: quiet (the CPU rule would call it busy)
    quiet = Load(cpus=16, threads=16, cpu=CpuUse(60.0, 40.0), wall_s=1.0, sched_delay_s=0.01, gpu_others=())
    assert decide("cuda", quiet) == (False, []) and decide("cpu", quiet).busy
    # another process on our GPU, whatever its use while we time (the utilization is ours too)
    assert decide("cuda", Load(gpu_others=gpu, gpu_utilization=1.0, sched_delay_s=0.0, wall_s=1.0)).why == [
        "1 other process used the GPU: python train.py"]
    # our launching thread off a core 20% of the round
    busy, why = decide("cuda", Load(cpus=16, cpu=CpuUse(0.0, 0.0), wall_s=1.0, sched_delay_s=0.2))
    assert busy and why == ["our launching thread waited for a core 20% of the time during timing"]
    # no schedstat: busy when others and ours left no core; no CPU times either: the load average
    assert not decide("cuda", Load(cpus=16, cpu=CpuUse(1400.0, 0.0), wall_s=1.0)).busy
    assert decide("cuda", Load(cpus=16, cpu=CpuUse(1400.0, 200.0), wall_s=1.0)).busy
    assert decide("cuda", Load(cpus=2, load_average=5.0)).why == ["the load average was 5.0 on 2 CPUs during timing"]


def test_the_wait_asks_the_same_rule_with_its_threshold():
    gpu = (GpuProcess(7, "python train.py"),)
    assert not decide("cuda", Load(gpu_others=gpu, gpu_utilization=50.0), gpu_threshold=50.0).busy
    assert decide("cuda", Load(gpu_others=gpu, gpu_utilization=51.0), gpu_threshold=50.0).busy
    assert not decide("cuda", Load(gpu_others=(), gpu_utilization=99.0), gpu_threshold=50.0).busy


def test_a_stored_reading_is_judged_by_its_own_verdict_or_todays_rule():
    mine = ContentionReport(busy=True, why=["other processes used 180% CPU during timing (2 CPUs)"], cpus=2, threads=2)
    assert contention_busy(mine) and busy_words(mine) == "machine busy: other processes used 180% CPU during timing (2 CPUs)"
    assert not contention_busy(ContentionReport(busy=False, other_cpu_percent=900.0, cpus=16, threads=16))
    old = ContentionReport(other_cpu_percent=60.0, cpus=2, threads=2)  # from before the rule: no `busy`
    assert contention_busy(old) and not contention_busy(ContentionReport(other_cpu_percent=40.0, cpus=2, threads=2))
    assert contention_busy(ContentionReport(other_cpu_percent=0.0, cpus=2, threads=2, gpu_other_processes=1))
    assert not contention_busy(None) and busy_words(None) is None  # nothing read says nothing


def test_the_trials_runs_are_judged_by_the_cpu_rule_on_every_core():
    """The program's torch runs on every core (threads = cpus): half a core of anyone's use is the line."""
    def runs(eager: float) -> tuple[RunFigures, RunFigures]:
        return RunFigures(ran=True, other_cpu_percent=eager), RunFigures(ran=True, other_cpu_percent=None)

    assert busy_during(*runs(50.0)) is None
    assert busy_during(*runs(51.0)) == "machine busy: other processes used 51% CPU during the eager run"
