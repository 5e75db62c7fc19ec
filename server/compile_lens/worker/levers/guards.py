"""Guard filters: where guard evaluation is above 5% of the compiled forward (the measurement's
`forward.guard_share`), each `guard_filter_fn` of `torch.compiler` this torch has, against the
default, in paired rounds of the steady forward; each with the assumption it makes."""

from __future__ import annotations

from ...protocol import Lever
from ..loader import BuiltTarget
from .judge import forward_faster, forward_slower, ratio_words
from .steady import forward_pair

SHARE = 0.05  # the guard share above which filters are worth trying


def measure(target: BuiltTarget, name: str, assumption: str, *, device: str, mode: str, steady_s: float) -> Lever:
    forward = forward_pair(target, "default", f"guard_filter:{name}", device=device, mode=mode, budget_s=steady_s)
    change = f"torch.compile(..., options={{\"guard_filter_fn\": torch.compiler.{name}}})"
    lever = Lever("guard_filter", change, "no change", forward=forward, data={"filter": name, "assumption": assumption})
    fwd = ratio_words(forward)
    if forward_faster(forward):
        lever.verdict, lever.why = "better", f"{fwd}; assumes {assumption}"
        lever.action = f"Skip guards ({name}): {fwd} (measured; assumes {assumption})"
    elif forward_slower(forward):
        lever.verdict, lever.why = "worse", fwd
    elif not forward.get("conclusive") and forward.get("busy"):
        lever.verdict, lever.why = "inconclusive", f"{fwd}: {forward['busy']}"
    else:
        lever.why = f"{fwd}: no measurable difference"
    return lever
