"""One `compile-lens trial`: which runs happen and what their figures become. No torch (the runs are
the user's program, in processes of their own).

The plan (`TrialPlan`): eager; eager again with `repeat_eager` (is the program deterministic?);
compiled (with empty Inductor caches when `cold`, saving torch's cache artifact when `cache_artifact`
is asked); then, from a fresh process up to the last step that compiled, the run warmed by the
artifact only (`cache_artifact`) and the run served by the team's remote cache only (`remote_cache`),
each with why it missed the compiled run's FX-graph cache entries (`miss_reasons`). An eager run
that fails ends the trial there: the compiled run would only repeat the failure.

`run` returns the figures (`figures.TrialFigures`) and the exit status; the caller prints and saves
them. Progress goes to `say`, one line a run.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..cost import CostInputs
from ..remote_cache import parse as parse_remote
from ..remote_cache import remote_counts, unreachable
from ..torch_text import cache_keys, guard_words
from . import keep_record, ranks, runner, shapes, summary, torchrun
from .figures import ArtifactRun, Failure, Machine, Recorded, RemoteRun, RunRecompile, TrialFigures

DEFAULT_STEPS = 30


@dataclass
class TrialPlan:
    """What the trial runs: the user's command and the trial's options (`compile-lens trial`'s flags)."""

    program: list[str]
    root: str  # the workspace: modules defined under it are compiled
    steps: int = 0  # 0 with `seconds`: eager runs that long, the compiled run as many steps
    seconds: float = 0.0
    step_on: str = "optimizer"
    options: dict = field(default_factory=dict)  # torch.compile's mode, backend, dynamic
    cold: bool = False
    cache_artifact: Optional[str] = None  # None: no artifact run; "": ROOT/.compile-lens/compile-cache.bin
    remote_cache: Optional[str] = None  # redis://HOST:PORT
    repeat_eager: bool = False
    rtol: float = 1e-3
    atol: float = 1e-5
    hang_timeout: float = torchrun.DEFAULT_HANG_TIMEOUT
    bill: CostInputs = field(default_factory=CostInputs)

    @property
    def command(self) -> str:
        return shlex.join(self.program)


@dataclass
class TrialOutcome:
    figures: Optional[TrialFigures]  # None: the command itself could not be run
    exit_code: int  # the eager run's when it failed, else the compiled run's (0 when the trial stopped it)
    eager_failed: bool = False  # the trial stopped after the eager run


def run(plan: TrialPlan, say: Callable[[str], None]) -> TrialOutcome:
    """Run the plan's runs and make their figures."""
    steps = plan.steps
    common = {"root": plan.root, "step_on": plan.step_on, "hang_timeout": plan.hang_timeout}
    load_before = _load()
    with tempfile.TemporaryDirectory(prefix="compile-lens-trial-") as scratch:
        say("eager run")
        eager_code, eager = runner.run_once(plan.program, mode="eager", scratch=scratch, steps=steps,
                                            seconds=plan.seconds, **common)
        if eager_code in (126, 127) and eager is None:  # the command itself was not found or not runnable
            return TrialOutcome(None, eager_code)
        kept = keep_record.keep(scratch, plan.root)
        if eager_code != 0:  # the program failed by itself (a run the trial stops exits 0)
            return _eager_failed(plan, eager, eager_code, kept, load_before, say)
        if not steps:  # --seconds: the compiled run does as many steps as eager did
            steps = len((eager or {}).get("steps") or []) or 0
        seconds = 0.0 if steps else plan.seconds
        repeat = None
        if plan.repeat_eager:
            say("eager run, again (determinism)")
            _, repeat = runner.run_once(plan.program, mode="eager", scratch=scratch, steps=steps, seconds=seconds,
                                        tag="-2", **common)
        options = plan.options
        say("compiled run" + (f" ({', '.join(f'{k}={v}' for k, v in options.items())})" if options else ""))
        compiled_code, compiled = runner.run_once(
            plan.program, mode="compiled", scratch=scratch, steps=steps, seconds=seconds, options=options,
            cold_cache=plan.cold, save_artifact=_artifact_path(plan),
            fx_keys=plan.cache_artifact is not None or plan.remote_cache is not None, **common)
        artifact = _artifact_run(plan, scratch, compiled, common, say) if plan.cache_artifact is not None else None
        served = _remote_run(plan, scratch, compiled, common, say) if plan.remote_cache is not None else None
    figures = summary.summarize(eager, eager_code, compiled, compiled_code, rtol=plan.rtol, atol=plan.atol,
                                repeat_run=repeat, command=plan.command)
    _add_what_it_saw(figures, compiled, kept, say)
    figures.artifact = artifact
    figures.remote_cache = served
    figures.ranks = ranks.per_rank(eager, compiled)
    figures.rank_divergence = ranks.divergence(compiled)
    figures.cold = plan.cold
    figures.machine = Machine(cpus=os.cpu_count(), load_before=load_before, load_after=_load())
    figures.cost = summary.bill(figures, plan.bill)
    return TrialOutcome(figures, compiled_code)


def _eager_failed(plan: TrialPlan, eager: Optional[dict], code: int, kept: Optional[tuple[str, list[str]]],
                  load_before: Optional[float], say: Callable[[str], None]) -> TrialOutcome:
    """The eager run failed: the compiled run would only repeat the failure, so the trial stops with
    the program's status (a signal's as the shell gives it)."""
    say(f"the eager run failed (exit status {code}): the compiled run would only repeat the failure; "
        "fix the program, then run the trial again")
    figures = summary.summarize(eager, code, None, None, rtol=plan.rtol, atol=plan.atol, command=plan.command)
    figures.compiled.failure = Failure(kind="not-run", message=f"not run: the eager run failed (exit status {code})")
    _add_what_it_saw(figures, None, kept, say)
    figures.ranks = ranks.per_rank(eager, None)
    figures.machine = Machine(cpus=os.cpu_count(), load_before=load_before, load_after=_load())
    return TrialOutcome(figures, code if code > 0 else 128 - code, eager_failed=True)


def _add_what_it_saw(figures: TrialFigures, compiled_run: Optional[dict], kept: Optional[tuple[str, list[str]]],
                     say: Callable[[str], None]) -> None:
    """The recompiles in the user's terms, the run per input shape, and the record kept for the editor."""
    figures.recompiles = [RunRecompile(**guard_words.say(dataclasses.asdict(r))) for r in figures.recompiles]
    figures.by_shape = shapes.by_shape(figures.eager, figures.compiled, compiled_run, figures.recompiles)
    figures.shape_findings = shapes.findings(figures.by_shape, figures.wall, figures.compiled, figures.eager)
    figures.recorded = Recorded(path=kept[0], targets=kept[1]) if kept else None
    if kept:
        say(f"the eager run's record of {len(kept[1])} target{'s' if len(kept[1]) != 1 else ''} merged into "
            f"{os.path.relpath(kept[0])} (check, report and the editor trace them with these inputs)")


def _artifact_path(plan: TrialPlan) -> str:
    if plan.cache_artifact is None:
        return ""
    path = os.path.abspath(plan.cache_artifact or os.path.join(plan.root, ".compile-lens", "compile-cache.bin"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def _served_steps(compiled: Optional[dict]) -> int:
    """A run meant to be served goes up to the compiled run's last step that compiled."""
    ct = summary.compile_time(compiled)
    return max(ct.steps) + 1 if ct and ct.steps else 1


def _artifact_run(plan: TrialPlan, scratch: str, compiled: Optional[dict], common: dict,
                  say: Callable[[str], None]) -> ArtifactRun:
    """A fresh process with empty Inductor caches and the saved artifact loaded, up to the last compile step."""
    saved = (compiled or {}).get("artifact_saved") or {}
    if not saved.get("saved"):
        return ArtifactRun(path=None, note=saved.get("error") or "the compiled run saved no artifact")
    steps = _served_steps(compiled)
    say(f"compiled run warmed by the cache artifact only ({steps} steps)")
    code, run_ = runner.run_once(plan.program, mode="compiled", scratch=scratch, steps=steps, options=plan.options,
                                 cold_cache=True, load_artifact=saved["saved"], tag="-artifact", fx_keys=True,
                                 **common)
    loaded = (run_ or {}).get("artifact_loaded") or {}
    return ArtifactRun(path=saved["saved"], bytes=saved.get("bytes"), steps=steps, exit_code=code,
                       loaded=bool(loaded.get("loaded")), note=loaded.get("error"),
                       compile_time=summary.compile_time(run_),
                       miss_reasons=_miss_reasons(compiled, run_) if loaded.get("loaded") else [])


def _remote_run(plan: TrialPlan, scratch: str, compiled: Optional[dict], common: dict,
                say: Callable[[str], None]) -> RemoteRun:
    """A fresh process with an empty local Inductor cache, served by the team's remote cache only, up to
    the last compile step. torch's Redis client has no timeout: an address that does not answer
    within 1 s is not run against, and the figures say so."""
    url = plan.remote_cache or ""
    remote = parse_remote(url)
    problem = unreachable(remote)
    if problem:
        say(f"remote cache {url} {problem}: no remote-cache run")
        return RemoteRun(url=url, note=f"{url} {problem}; check the address, or that the Redis server runs")
    steps = _served_steps(compiled)
    say(f"compiled run served by the remote cache {url}, empty local cache ({steps} steps)")
    code, run_ = runner.run_once(plan.program, mode="compiled", scratch=scratch, steps=steps, options=plan.options,
                                 cold_cache=True, remote=remote, tag="-remote", fx_keys=True, **common)
    counts = remote_counts((run_ or {}).get("compiles") or [], (run_ or {}).get("device") or "cpu")
    hits = sum(c["hits"] for c in (counts or {}).values() if isinstance(c, dict))
    note = None
    if counts is None:
        note = "torch recorded no remote-cache lookup (is the `redis` package installed in the program's environment?)"
    elif not hits:
        note = "the remote cache held none of this program's compiles: this run filled it; a next trial is served by it"
    return RemoteRun(url=url, steps=steps, exit_code=code, remote=counts, served=bool(hits), note=note,
                     compile_time=summary.compile_time(run_), miss_reasons=_miss_reasons(compiled, run_))


def _miss_reasons(compiled: Optional[dict], run_: Optional[dict]) -> list[str]:
    """What differed in the FX-graph cache keys `run_` missed from the compiled run's (whose graphs the
    artifact holds, and the remote cache holds when an earlier trial filled it): [] when every miss had
    a key the compiled run had too (not in the cache, not different), or torch logged no keys."""
    return cache_keys.reasons((compiled or {}).get("fx_keys") or [], (run_ or {}).get("fx_keys") or [])


def _load() -> Optional[float]:
    """The 1-minute load average: other work on the machine makes step times noisy, and the text says so."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
