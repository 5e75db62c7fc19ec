"""Recompile sweeps: call the compiled target with input variations and read torch's own log.

The target is compiled with `backend="eager"` (guards do not depend on the backend), called with
its base inputs, then with each variation. What recompiled, and why, comes from torch itself: one
record per recompile from the `collector` (the frame's code object and one guard failure per cache
entry, as torch's recompiles log call holds them), with `get_compilation_metrics()` for the compile
time and the recompile-limit failure. Variations: `variations`; reading a guard failure and the
classification below: `recompile_kinds`.

One `Recompile` per "Recompiling function" log entry, never merged or dropped for declared
variants, so what is reported for them equals torch's own log in number and reason. An entry lists
one guard failure per cached entry of that frame, newest first. `reason` is one of those lines,
verbatim except for the "0/1: " compile-id prefix and the trailing "  # source  # file:line" comment
torch appends (the line number is read from it into `line`):
- declared variants, recorded shapes and the base call: torch's first line (the same one
  `get_compilation_metrics()` gives as `recompile_reason`);
- automatic variations: the failure against the entry compiled from the base inputs, which names
  the one thing the variation changed (the newest entry may fail on an unrelated, earlier change).
A recompile refused by the limit gets kind "limit" and its reason is followed by torch's warning:
"steps == 9 — torch._dynamo hit config.recompile_limit (8): after 8 compiles it runs eager".

Classification, by observing the sweep, per (frame, changed input, kind of guard[, dimension]), a
frame being a code object (file, first line, name), never a bare function name:
- "limit": the recompile limit was hit on this entry (warning record, or metrics fail_type/reason);
- "specialization": the same input recompiled twice or more for different values, or once for a
  guard that every new value fails (dtype, requires_grad, rank, device, strings, bools, module
  flags such as `training`, global state such as autocast and grad mode, object identity, lengths);
- "automatic-dynamic": one recompile for a size (or an int/float value), after which Dynamo makes
  it dynamic; sizes 0 and 1, which Dynamo always specialises, do not count towards the repeats.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from typing import Any, Callable

import torch

from ...protocol import Problem, Recompile
from ...torch_text.stable_text import stable_text
from .. import dynamo
from ..dynamo import recompile_limit
from ..loader import BuiltTarget, TargetError, describe, user_line
from .collector import CompileCollector, collect
from .recompile_kinds import (
    SIZE_EXPR_RE,
    SIZE_RE,
    base_failure,
    classify,
    frame_of,
    limit_text,
    user_location,
    what_changed,
)
from .records import RecompileEntry
from .variations import (
    Variation,
    autocast_variation,
    batch_variations,
    mode_variation,
    param_names,
    probe_plans,
    recorded_variations,
    requires_grad_variation,
    scalar_variations,
    sequence_variations,
)

log = logging.getLogger(__name__)

_LIMIT_GB_ID = "GB0039"  # "Dynamo recompile limit exceeded"
_LIMIT_FAIL_RE = re.compile(r"recompile[_ ]limit|cache[_ ]size[_ ]limit|gb0039", re.IGNORECASE)


# --- the sweep ------------------------------------------------------------------------------

class _Sweep:
    def __init__(self, target: BuiltTarget, path: str, progress: Callable[[str], None],
                 compile_kwargs: dict[str, Any], collector: CompileCollector):
        self.target = target
        self.path = path
        self.progress = progress
        self.obj = target.make()
        self.compiled = torch.compile(self.obj, backend="eager", **compile_kwargs)
        self.collector = collector
        self.limit_hit = False
        self.deadline: float | None = None

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def call(self, v: Variation) -> tuple[bool, list[RecompileEntry], BaseException | None]:
        """Run one variation; returns (it ran, the entries it logged, the exception)."""
        self.progress(f"recompiles: {v.label}")
        self.collector.variation = v.label
        first, first_limit = len(self.collector.recompiles), len(self.collector.limits)
        dynamo.clear_metrics()
        error: BaseException | None = None
        try:
            if v.setup:
                v.setup()
            with (v.context() if v.context else contextlib.nullcontext()):
                self.compiled(*v.args)
        except Exception as exc:  # noqa: BLE001 - user code: note it, never crash
            error = exc
        finally:
            if v.teardown:
                try:
                    v.teardown()
                except Exception:  # noqa: BLE001
                    log.info("restoring after %s failed", v.label, exc_info=True)
        entries = self.collector.recompiles[first:]
        self._annotate(entries, self.collector.limits[first_limit:], first, v.declared)
        if error is not None and not v.declared:
            log.info("recompile sweep: skipped %s: %s", v.label, describe(error))
            del self.collector.recompiles[first:]
            return False, [], error
        if error is not None:
            log.info("recompile sweep: %s raised: %s", v.label, describe(error))
        return error is None, entries, error

    def _annotate(self, entries: list[RecompileEntry], limits: list[tuple[int, str]], first: int,
                  declared: bool) -> None:
        metrics = dynamo.metrics()
        by_id = {str(getattr(m, "compile_id", "")): m for m in metrics}
        with_reason = [m for m in metrics if getattr(m, "recompile_reason", None)]
        for n, entry in enumerate(entries):
            entry.relevant = 0 if declared else base_failure(entry)
            m = by_id.get(entry.compile_id or "") or (with_reason[n] if n < len(with_reason) else None)
            if m is not None:
                seconds = getattr(m, "entire_frame_compile_time_s", None)
                if self._hit_limit(m):
                    entry.limit = entry.limit or f"torch._dynamo hit config.recompile_limit ({recompile_limit()})"
                elif isinstance(seconds, (int, float)):
                    entry.compile_s = round(float(seconds), 6)
        for count, headline in limits:
            index = count - first - 1
            if 0 <= index < len(entries):
                entries[index].limit = headline
                entries[index].compile_s = None
        if any(e.limit for e in entries):
            self.limit_hit = True

    def _hit_limit(self, m: Any) -> bool:
        """Did this compile fail on the recompile limit: its failure is the break torch formats
        for it (GB0039), else (another torch) its failure's words."""
        failed = str(getattr(m, "fail_reason", "") or "")
        sections = self.collector.sections_of(failed) if failed else None
        if sections:
            return any(dynamo.gb_id(s.gb_type) == _LIMIT_GB_ID for s in sections)
        failed = f"{getattr(m, 'fail_type', '') or ''} {failed}"
        return bool(_LIMIT_FAIL_RE.search(failed))


def sweep_recompiles(
    target: BuiltTarget,
    *,
    path: str,
    progress: Callable[[str], None] = lambda s: None,
    automatic: bool = True,
    recorded_shapes: list | None = None,
    compile_kwargs: dict | None = None,
    max_seconds: float | None = None,
) -> list[Recompile]:
    """Compile the target (backend eager), call it with variations, report each recompile.

    Order of calls: base inputs, declared variants, recorded shapes, then (automatic=True) batch,
    sequence, Python scalars, train/eval, requires_grad, autocast, and last the recompile-limit
    probe. `compile_kwargs` are the options of the user's own `torch.compile(...)` decorator or
    call; only `dynamic` changes guards, the rest (backend, mode, options, fullgraph) is not used.
    `max_seconds`: no automatic variation or probe starts after that long (declared and recorded
    ones always run). Raises `TargetError` when the base inputs themselves cannot be called.
    """
    kwargs = {k: v for k, v in (compile_kwargs or {}).items() if k == "dynamic"}
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    dynamo.reset()
    try:
        with collect(recompiles=True) as collector:
            sweep = _Sweep(target, path, progress, kwargs, collector)
            sweep.deadline = deadline
            return _run(sweep, automatic, recorded_shapes)
    finally:
        dynamo.reset()


def _run(sweep: _Sweep, automatic: bool, recorded_shapes: list | None) -> list[Recompile]:
    target = sweep.target
    args = target.args
    ok, _, error = sweep.call(Variation("base inputs", args, declared=True))
    if not ok and error is not None:
        raise TargetError(Problem(
            "call", f"calling `{target.spec.name}` compiled with its inputs failed: {describe(error)}",
            sweep.path, user_line(error, sweep.path) or target.spec.line,
            "check that the inputs fit the model")) from None

    variations: list[Variation] = []
    variants = target.spec.inputs.variants if target.spec.inputs else []
    for n, text in enumerate(variants, 1):
        try:
            variations.append(Variation(f"variant {n}", target.eval_args(text), declared=True))
        except Exception as exc:  # noqa: BLE001 - the user's expression
            log.info("recompile sweep: variant %d `%s` failed to evaluate: %s", n, text, describe(exc))
    variations += recorded_variations(args, recorded_shapes or [])
    names = param_names(sweep.obj, args)
    if automatic:
        # Shapes and scalars first; state switches (train/eval, requires_grad, autocast) last.
        variations += batch_variations(args)
        variations += sequence_variations(args)
        variations += scalar_variations(args, sweep.obj, names)
        variations += mode_variation(args, sweep.obj)
        variations += requires_grad_variation(args)
        variations += autocast_variation(args, sweep.obj)

    for v in variations:
        if not v.declared and sweep.limit_hit:  # from here on the frame runs eager: no news
            log.info("recompile sweep: limit hit, automatic variations not run")
            break
        if not v.declared and sweep.out_of_time():
            sweep.progress("recompiles: out of time, automatic variations stopped")
            log.info("recompile sweep: out of time before %s", v.label)
            break
        sweep.call(v)

    entries = list(sweep.collector.recompiles)
    records = classify(entries, target, sweep.path)
    if automatic and not sweep.limit_hit:
        probe = _limit_probe(sweep, records, names, variations)
        if probe is not None:
            records.append(probe)
    return records



# --- the recompile-limit probe --------------------------------------------------------------

def _limit_probe(sweep: _Sweep, records: list[Recompile], names: list[str],
                 tried: list[Variation]) -> Recompile | None:
    """Keep giving a specialised input new values until torch refuses to compile (bounded)."""
    special = [r for r in records if r.kind == "specialization"]
    scalars = {r.changed for r in special
               if not r.reason.startswith(("tensor '", "GLOBAL_STATE")) and not SIZE_EXPR_RE.search(r.reason)}
    sizes = {r.changed for r in special if SIZE_RE.search(r.reason) or SIZE_EXPR_RE.search(r.reason)}
    limit = recompile_limit()
    if not (scalars or sizes) or limit > 64:
        return None
    for plan in probe_plans(sweep.target.args, names, scalars, sizes, [v.args for v in tried],
                             limit + 1):
        quiet = 0
        for label, new_args in plan:
            if sweep.out_of_time():
                return None
            ok, logged, _ = sweep.call(Variation(f"limit probe: {label}", new_args))
            if not ok:
                break
            hit = next((e for e in logged if e.limit), None)
            if hit is not None:
                failure = hit.failures[0]
                where = user_location(failure, sweep.path, hit.frame_file)
                return Recompile(
                    line=where[1] if where else sweep.target.spec.line,
                    variation=hit.variation, kind="limit",
                    reason=stable_text(f"{failure.text} — {limit_text(hit.limit or '')}"),
                    changed=what_changed(failure.text), compile_s=None,
                    path=where[0] if where else None, frame=frame_of(hit), compile_id=hit.compile_id)
            quiet = 0 if logged else quiet + 1
            if quiet >= 2:  # new values stopped recompiling: nothing to hit
                break
    return None


__all__ = ["sweep_recompiles", "recompile_limit"]
