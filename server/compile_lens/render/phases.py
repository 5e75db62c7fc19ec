"""Where each phase of a target's analysis stands — traced / swept / measured / failed (why) /
not run — in the words every view uses (hover, CLI text and JSON, the report). Pure.

A phase is settled by the job that ran it (`TargetResult.phases`); results cached before phases
were recorded are read from their fields (a graph count means traced, figures mean measured).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..protocol import LEVERS, PHASES, Problem, TargetResult, phase_of

WORKER_KINDS = ("crash", "timeout", "memory", "exit")
DONE = {"trace": "traced", "sweep": "recompiles checked", "measure": "measured", LEVERS: "levers tried"}
FAILED = {"trace": "trace failed", "sweep": "recompile check failed", "measure": "measurement failed",
          LEVERS: "levers phase failed"}
NOT_RUN = {"trace": "not traced", "sweep": "recompiles not checked", "measure": "not measured",
           LEVERS: "levers not tried"}
VERB = {"trace": "tracing", "sweep": "checking recompiles", "measure": "measuring", LEVERS: "trying levers"}


@dataclass
class PhaseState:
    name: str  # "trace" | "sweep" | "measure"
    status: str  # "done" | "failed" | "not-run"
    error: Optional[Problem] = None  # failed: why; not-run: why not (None: it was not asked for)

    @property
    def words(self) -> str:
        """`traced`, `measurement failed: the analysis took longer than 60 s …`, `not measured`."""
        if self.status == "done":
            return DONE[self.name]
        head = FAILED[self.name] if self.status == "failed" else NOT_RUN[self.name]
        if self.error is None:
            return head
        return f"{head}: {self.error.message.removeprefix('not run: ')}"


def phase_states(result: TargetResult) -> list[PhaseState]:
    """The three phases of `result`, in order, each with its status."""
    states = []
    for name in PHASES:
        phase = phase_of(result, name)
        if phase is not None:
            states.append(PhaseState(name, phase.status, phase.error))
        elif name == "trace" and result.status == "error":
            states.append(PhaseState(name, "failed", result.error))
        elif name == "trace" and result.graph_count is not None:
            states.append(PhaseState(name, "done"))
        elif name == "measure" and result.benchmark is not None:
            states.append(PhaseState(name, "done"))
        else:
            states.append(PhaseState(name, "not-run"))
    levers = phase_of(result, LEVERS)  # only when asked for (`check --levers`, "Try levers")
    if levers is not None:
        states.append(PhaseState(LEVERS, levers.status, levers.error))
    return states


def summary(result: TargetResult) -> str:
    """One line: `traced · recompiles checked · measurement failed: …`."""
    return " · ".join(state.words for state in phase_states(result))


def all_traced(results: list[TargetResult]) -> bool:
    return all(phase_states(r)[0].status == "done" for r in results)
