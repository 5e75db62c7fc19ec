"""Guard filters: where guard evaluation is above 5% of the compiled forward (the measurement's
`forward.guard_share`), each `guard_filter_fn` of `torch.compiler` this torch has, against the
default, in paired rounds of the steady forward (and of the train step where the measurement timed
one); each with the assumption it makes, which the offered edit's title states."""

from __future__ import annotations

from ...protocol import Lever
from ..loader import BuiltTarget
from .judge import busy_unsure, figures_words, forward_faster, forward_slower
from .steady import timed

SHARE = 0.05  # the guard share above which filters are worth trying


def measure(target: BuiltTarget, name: str, assumption: str, *, device: str, mode: str, steady_s: float,
            train: bool = False) -> Lever:
    forward, step = timed(target, "default", f"guard_filter:{name}", device=device, mode=mode, budget_s=steady_s,
                          train=train)
    change = f"torch.compile(..., options={{\"guard_filter_fn\": torch.compiler.{name}}})"
    lever = Lever("guard_filter", change, "no change", forward=forward, train_step=step,
                  data={"filter": name, "assumption": assumption})
    figures = figures_words("", forward, step)
    slower = forward_slower(forward) or forward_slower(step)
    if (forward_faster(forward) or forward_faster(step)) and not slower:
        lever.verdict, lever.why = "better", f"{figures}; assumes {assumption}"
        lever.action = f"Skip guards ({name}): {figures} — assumes {assumption}"
    elif slower:
        lever.verdict, lever.why = "worse", figures
    elif busy_unsure(forward):
        lever.verdict, lever.why = "inconclusive", f"{figures}: {forward.busy}"
    else:
        lever.why = figures
    return lever
