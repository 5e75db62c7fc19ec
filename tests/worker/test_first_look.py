"""The forward's first look (`timing.per_workload.first_look`) ends within the limit docs/cli.md states,
whatever the model: a call slow enough that its minimum pairs would take longer stops at the limit
with fewer pairs (the worker refines that figure). Its own timing figure: run `alone`."""

from __future__ import annotations

import re
import time

import pytest
import torch

from compile_lens.worker.measure.timing.per_workload import FIRST_LOOK_MAX_S, first_look
from compile_lens.worker.measure.timing.rounds import MIN_ROUNDS
from compile_lens.worker.measure.workload.model import Model
from paths import REPO

# per call: 8 pairs of three blocks (eager, compiled, guards skipped) would take ≈ 7 s, and 3× faster calls
# still over 4 s; below the half second past which docs/cli.md says a look may run over
SLOW_CALL_S = 0.3


def _documented_limit() -> float:
    said = re.search(r"a \*first look\* of about \d+ s, (\d+) s at most", (REPO / "docs" / "cli.md").read_text())
    assert said, "docs/cli.md no longer states the first look's limit"
    return float(said.group(1))


def _slow_linear() -> tuple[torch.nn.Module, torch.Tensor]:
    """A Linear whose call takes about SLOW_CALL_S on this machine: the batch scaled to it, twice (a small
    batch's call is mostly overhead, so one scaling from it undershoots)."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(1024, 1024).eval()
    rows = 256
    for _ in range(2):
        x = torch.randn(rows, 1024)
        with torch.no_grad():
            layer(x)
            times = []
            for _ in range(2):
                t0 = time.perf_counter()
                layer(x)
                times.append(time.perf_counter() - t0)
        # its quiet speed: the calls made are this slow or slower
        rows = int(min(65536, max(64, rows * SLOW_CALL_S / max(min(times), 1e-6))))
    return layer, torch.randn(rows, 1024)


@pytest.mark.alone
def test_the_first_look_ends_within_its_documented_limit():
    assert FIRST_LOOK_MAX_S == _documented_limit()
    layer, x = _slow_linear()
    eager = Model(layer, layer, (x,), False)
    # compiled by Dynamo alone (backend "eager": real guards and frames, no Inductor compile to wait for)
    compiled = Model(torch.compile(layer, backend="eager"), layer, (x,), False)
    eager.use(False)
    compiled.forward()  # its compile, as the cold child's is, before the look
    look = first_look(eager, compiled, "cpu")
    assert look.pairs is not None and look.why is None, look
    pairs = len(look.pairs.eager)
    assert 1 <= pairs and look.s <= FIRST_LOOK_MAX_S, (pairs, look.s)
    # the limit is what stopped it: the minimum pairs of calls this slow do not fit in it
    assert pairs < MIN_ROUNDS, (pairs, look.s)
