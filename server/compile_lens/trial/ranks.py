"""A torchrun trial's ranks: its figures rank by rank, the run as a whole, and where ranks compiled apart
(`render/trial_ranks_text.py` words them, `render/report_ranks.py` is their HTML). Pure: no torch.

The run as a whole (`merge`) is a record like a one-process run's, so every figure of the trial
keeps its meaning: its step *i* took the slowest rank's time for step *i* (ranks wait for each
other in the all-reduce), over the steps every rank finished; step *i* is a warm-up step when
any rank compiled in it; its loss and input shapes are rank 0's; its compiles are the rank's that
compiled longest. Each rank's own record stays inside it (`ranks`), for `per_rank` and `divergence`.
"""

from __future__ import annotations

from typing import Any, Optional

from ..ranks import RankEvent, RankParting, rank_divergence
from . import summary
from .figures import RankFigures

WHY_IT_MATTERS = ("on a cluster the ranks' collectives then pair different programs: an NCCL watchdog hang "
                  "or wrong values (OpenPipe/ART#843, unslothai/unsloth-zoo#967)")


def merge(ranks: dict[int, dict], hung: Optional[dict] = None) -> dict:
    """The run as a whole from each rank's record (see the module docstring)."""
    order = sorted(ranks)
    first = ranks[order[0]]
    common = min(len(ranks[r].get("steps") or []) for r in order)
    steps = []
    for i in range(common):
        per = {r: ranks[r]["steps"][i] for r in order}
        slowest = max(order, key=lambda r: per[r].get("wall_s") or 0.0)
        step = {**per[order[0]], "wall_s": per[slowest].get("wall_s"),
                "hook_s": max(s.get("hook_s") or 0.0 for s in per.values()),
                "compiles": max(s.get("compiles") or 0 for s in per.values()),
                "profiled": any(s.get("profiled") for s in per.values()), "slowest_rank": slowest}
        if any(s.get("timed") is False for s in per.values()):
            step["timed"] = False
        steps.append(step)
    longest = max(order, key=lambda r: getattr(summary.compile_time(ranks[r]), "total_s", 0.0))
    memory = [ranks[r]["peak_memory_bytes"] for r in order if ranks[r].get("peak_memory_bytes") is not None]
    record: dict[str, Any] = {k: v for k, v in first.items() if k not in ("steps", "events", "compiles", "rank")}
    record.update(steps=steps, events=_events(ranks), compiles=ranks[longest].get("compiles") or [],
                  stopped_by_trial=all(ranks[r].get("stopped_by_trial") for r in order),
                  failure=_failure(ranks, hung), ranks={str(r): ranks[r] for r in order}, hang=hung)
    if memory:
        record["peak_memory_bytes"] = max(memory)
    return record


def _events(ranks: dict[int, dict]) -> list[dict]:
    """Rank 0's events, then each other rank's that rank 0 did not have, with the rank that had it."""
    seen: set = set()
    out = []
    for rank in sorted(ranks):
        for event in ranks[rank].get("events") or []:
            key = (event.get("kind"), event.get("where"), event.get("reason"), event.get("step"))
            if key not in seen:
                seen.add(key)
                out.append({**event, "rank": rank})
    return out


def _failure(ranks: dict[int, dict], hung: Optional[dict]) -> Optional[dict]:
    """The first rank's failure (by step, then by time: the others then fail in a collective with it),
    named with its rank; or the hang, with where each rank was."""
    failed = [(r, rec["failure"]) for r, rec in sorted(ranks.items()) if rec.get("failure")]
    if failed:
        rank, failure = min(failed, key=lambda f: (f[1].get("step") or 0, f[1].get("at") or 0.0))
        return {**failure, "rank": rank, "message": f"rank {rank}: {failure.get('message')}"}
    if hung:
        stuck = hung.get("ranks") or {}
        where = ", ".join(f"rank {r} at step {s}" for r, s in sorted(stuck.items())) or "no rank left a record"
        return {"kind": "hang", "step": min(stuck.values()) if stuck else None, "where": None, "ranks": sorted(stuck),
                "message": f"no rank finished a step for {hung['after_s']:g} s, so the trial ended the run "
                           f"(--hang-timeout): stuck: {where} (a rank waiting in a collective for one that "
                           "never came?)"}
    return None


def per_rank(eager_run: Optional[dict], compiled_run: Optional[dict]) -> list[RankFigures]:
    """Each rank's figures as `eager`/`compiled` hold them for the run, compared eager vs compiled."""
    eager_ranks = (eager_run or {}).get("ranks") or {}
    compiled_ranks = (compiled_run or {}).get("ranks") or {}
    out = []
    for rank in sorted({*eager_ranks, *compiled_ranks}, key=int):
        e, c = eager_ranks.get(rank), compiled_ranks.get(rank)
        # others' CPU was measured for the run as a whole: it makes each rank's times noisy alike
        e = e and {**e, "other_cpu_percent": (eager_run or {}).get("other_cpu_percent")}
        c = c and {**c, "other_cpu_percent": (compiled_run or {}).get("other_cpu_percent")}
        ef, cf = summary.run_figures(e, None), summary.run_figures(c, None)
        ok = ef.failure is None and cf.failure is None
        out.append(RankFigures(rank=int(rank), eager=ef, compiled=cf,
                               speedup=summary.speedup(ef, cf, "wall_s") if ok else None,
                               graph_breaks=summary.graph_breaks(c), recompiles=summary.recompiles(c),
                               ddp_splits=ddp_splits(c),
                               compile_time=summary.compile_time(c), frames_compiled=frames_compiled(c),
                               killed={"eager": (e or {}).get("killed"), "compiled": (c or {}).get("killed")},
                               finished={"eager": (e or {}).get("finished"), "compiled": (c or {}).get("finished")}))
    return out


def frames_compiled(run: Optional[dict]) -> list[dict]:
    """Each frame the rank compiled, as torch's compilation metrics name it (its compile id, function,
    file and first line, step): the rank's compiled programs, comparable with TORCH_LOGS=dynamo's
    "start tracing" lines (a program's own `torch.compile(DDP(model))` compiles `model.forward` once)."""
    return [{"compile_id": e.get("compile_id"), "function": e.get("co_name"), "step": e.get("step"),
             "where": f"{e.get('co_filename')}:{e.get('co_firstlineno')}"}
            for e in (run or {}).get("compiles") or [] if e.get("co_name")]


def ddp_splits(run: Optional[dict]) -> list[dict]:
    """The graphs DDPOptimizer split at DDP's bucket boundaries (a program compiling its DDP model)."""
    return [{k: e.get(k) for k in ("step", "buckets", "bucket_cap_bytes")}
            for e in (run or {}).get("events") or [] if e.get("kind") == "ddp_split"]


def divergence(compiled_run: Optional[dict]) -> list[RankParting]:
    """Where ranks ran different compiled code (`ranks.rank_divergence`'s shape), each with why it
    matters and the levers against it (torch's, as the ranks' torch has them, and the program's)."""
    ranks = (compiled_run or {}).get("ranks") or {}
    events = {int(r): _rank_events(rec) for r, rec in ranks.items()}
    partings = rank_divergence(events)
    levers = next((rec.get("levers") for rec in ranks.values() if rec.get("levers")), {}) or {}
    for parting in partings:
        parting.why = WHY_IT_MATTERS
        parting.levers = _levers(levers)
    return partings


def _rank_events(record: dict) -> list[RankEvent]:
    """A rank's compile events in step order: what identifies the compiled program each step ran."""
    out = []
    for event in record.get("events") or []:
        step = event.get("step")
        if event.get("kind") == "recompile":
            out.append(RankEvent(key=f"recompile {event.get('function')} {event.get('compile_id')} @{step}", step=step,
                                 what=f"recompile of `{event.get('function')}`", guard=event.get("reason") or None))
        elif event.get("kind") == "graph_break":
            out.append(RankEvent(key=f"break {event.get('where')} {event.get('reason')} @{step}", step=step,
                                 what=f"graph break at {event.get('where')}: {event.get('reason')}"))
    for entry in record.get("compiles") or []:
        if entry.get("co_name"):  # a frame compile: its compile id is the program it runs
            out.append(RankEvent(key=f"compile {entry.get('compile_id')} {entry.get('co_name')} @{entry.get('step')}",
                                 step=entry.get("step"), what=f"compile {entry.get('compile_id')} of "
                                                              f"`{entry.get('co_name')}`",
                                 guard=entry.get("recompile_reason") or None))
    return sorted(out, key=lambda e: e.step if isinstance(e.step, int) else -1)


def _levers(found: dict) -> list[str]:
    out = []
    if found.get("torch.compiler.set_enable_guard_collectives"):
        out.append("torch.compiler.set_enable_guard_collectives(True): the ranks agree on guard results, so all "
                   "recompile together")
    if found.get("torch._dynamo.config.enable_compiler_collectives"):
        out.append("torch._dynamo.config.enable_compiler_collectives = True: the ranks share what they saw while "
                   "compiling (dynamic shapes decided together)")
    if not out:
        out.append("this torch has neither torch.compiler.set_enable_guard_collectives nor "
                   "torch._dynamo.config.enable_compiler_collectives")
    out.append("in the program: mark the varying dimension dynamic (torch._dynamo.mark_dynamic(x, dim)), or give "
               "every rank shards of the same size")
    return out
