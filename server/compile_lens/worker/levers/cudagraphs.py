"""CUDA graphs (on a GPU): `mode="reduce-overhead"` against the default compile, the steady forward in
paired rounds, how many of the compiled graphs torch CUDA-graphed, and each "skipping cudagraphs due
to …" torch logged, on the user's line its stack trace names (pytorch#124506: users cannot tell how
much of the model was graphed). Not tried on the CPU: CUDA graphs are a GPU feature.

torch's records are read as the trial reads them (`torch_text/cudagraph_events`): one recording per
graph captured (re-recordings are not new graphs), one skip message per graph left out.

Why it pays is the GPU's idle time: a launch-bound call leaves the GPU idle between kernels, and a
CUDA graph launches them at once. After the paired rounds each side's compiled call is profiled and
its GPU idle share read as the line costs read `forward.gpu_idle_share` (`lines.windows.gpu_idle_share`,
against the side's timed call), so the verdict reads one figure before and after: `GPU idle 64% → 8%
of the call` (`Lever.gpu_idle_share`)."""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any, Iterator, Optional

from ...protocol import Lever, Timing
from ...speed_words import idle_words
from ...torch_text.cudagraph_events import LOGGER, SKIP_LOGGER, event_of, skip_of
from ...torch_text.frames import is_user_file
from ..loader import BuiltTarget
from ..measure.lines import windows
from ..measure.lines.costs import calls_to_profile
from ..measure.workload.model import uses_cudagraphs
from .judge import busy_unsure, forward_faster, forward_slower, ratio_words
from .steady import forward_pair

CHANGE = 'torch.compile(..., mode="reduce-overhead")'


def applies(device: str, mode: str) -> bool:
    """On a GPU, when the measurement's own mode does not CUDA-graph already."""
    return device.startswith("cuda") and not uses_cudagraphs(mode)


class CudagraphRecords(logging.Handler):
    """The recordings and skips torch logs while a `reduce-overhead` compile warms up."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.recorded: list[str] = []  # the functions recorded, one per graph (re-recordings left out)
        self.skips: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            event = event_of(record)
            if event is not None:
                if not event["rerecord"] and event["function"] not in self.recorded:
                    self.recorded.append(event["function"])
                return
            skip = skip_of(record.getMessage())
            if skip is not None:
                self.skips.append(skip)
        except Exception:  # noqa: BLE001 - a record we cannot read is no event
            return


@contextlib.contextmanager
def watching() -> Iterator[CudagraphRecords]:
    """torch's two `cudagraphs` artifact loggers heard at debug level, and put back as they were."""
    handler = CudagraphRecords()
    saved = []
    for name in (LOGGER, SKIP_LOGGER):
        logger = logging.getLogger(name)
        saved.append((logger, logger.level, logger.propagate))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False  # torch's stderr handler sits on a parent: the worker's stderr stays quiet
    try:
        yield handler
    finally:
        for logger, level, propagate in saved:
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate


def skip_rows(skips: list[dict[str, Any]], root: str) -> list[dict[str, Any]]:
    """Each skip with the innermost workspace line of its stack trace ({"reason", "path", "line"};
    path and line None when torch gave no stack trace or it names no workspace file), one per reason
    and line."""
    rows: list[dict[str, Any]] = []
    for skip in skips:
        mine = [(p, n) for p, n in skip["frames"] if is_user_file(p, root)]
        path, line = mine[-1] if mine else (None, None)
        row = {"reason": skip["reason"], "path": path, "line": line}
        if row not in rows:
            rows.append(row)
    return rows


def graphed_words(graphed: int, skipped: int, rows: list[dict[str, Any]]) -> str:
    """`2 of 3 graphs CUDA-graphed; skipped: mutated inputs (1 instances) at model.py:6`."""
    text = f"{graphed} of {graphed + skipped} graph(s) CUDA-graphed"
    if rows:
        text += "; skipped: " + "; ".join(
            r["reason"] + (f" at {os.path.basename(r['path'])}:{r['line']}" if r["path"] else "") for r in rows)
    return text


def idle_shares(calls: dict[str, Any], forward: Timing, device: str) -> dict[str, Optional[float]]:
    """{"before", "after"}: each side's GPU idle share of its compiled call, profiled after the rounds
    (never inside them) against its timed call; None for a side with no call or no profile."""
    shares: dict[str, Optional[float]] = {}
    for side in ("before", "after"):
        call, ms = calls.get(side), forward.eager_ms if side == "before" else forward.compiled_ms
        if call is None:
            shares[side] = None
            continue
        # as many calls as the line costs profile (`line_costs.calls_to_profile`), read as they read theirs
        share = windows.gpu_idle_share(windows.profile(call, calls_to_profile(ms), device), ms * 1e3 if ms else None)
        shares[side] = round(share, 3) if share is not None else None
    return shares


def judged(forward: Timing, graphs: str, shares: dict[str, Optional[float]], data: dict[str, Any]) -> Lever:
    """The lever from its figures: the verdict by the forward's paired rounds, its words (and the
    action's title) with the GPU idle share before and after where both were read:
    `forward 1.40× faster; GPU idle 64% → 8% of the call; 1 of 1 graph(s) CUDA-graphed`."""
    lever = Lever("cudagraphs", CHANGE, "no change", forward=forward, data=data, gpu_idle_share=dict(shares))
    idle = idle_words(shares)
    said = f"{idle}; {graphs}" if idle else graphs
    fwd = ratio_words(forward)
    if forward_faster(forward):
        lever.verdict, lever.why = "better", f"{fwd}; {said}"
        lever.action = f'CUDA graphs (mode="reduce-overhead"): {fwd}, ' + (f"{idle}, " if idle else "") + \
            f"{graphs} (measured)"
    elif forward_slower(forward):
        lever.verdict, lever.why = "worse", f"{fwd}; {said}"
    elif busy_unsure(forward):  # `fwd` already says "machine busy"
        lever.verdict, lever.why = "inconclusive", f"{fwd} ({forward.busy}); {said}"
    else:
        lever.why = f"{fwd}; {said}"  # "forward: no measurable change"
    return lever


def measure(target: BuiltTarget, *, root: str, device: str, mode: str, steady_s: float) -> Lever:
    import torch._dynamo.utils

    counters = torch._dynamo.utils.counters["inductor"]
    skips_before = counters["cudagraph_skips"]
    calls: dict[str, Any] = {}
    with watching() as heard:
        forward = forward_pair(target, "default", "cudagraphs", device=device, mode=mode, budget_s=steady_s,
                               keep=calls)
    # graphs on the CPU alone are counted by torch without a message: the counter holds every skip
    skipped = max(counters["cudagraph_skips"] - skips_before, len(heard.skips))
    rows = skip_rows(heard.skips, root)
    data: dict[str, Any] = {"graphed": len(heard.recorded), "graphs": len(heard.recorded) + skipped, "skips": rows}
    try:
        shares = idle_shares(calls, forward, device)
    except Exception as exc:  # noqa: BLE001 - the timing's verdict stands without the idle figure
        shares = {"before": None, "after": None}
        data["gpu_idle_note"] = f"not measurable: {type(exc).__name__}: {str(exc)[:200]}"
    return judged(forward, graphed_words(len(heard.recorded), skipped, rows), shares, data)
