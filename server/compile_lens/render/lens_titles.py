"""A measured target's CodeLens title and inlay hint: the verdict first, within 100 columns. Pure."""

from __future__ import annotations

import os
from typing import Optional

from ..protocol import Benchmark, Timing
from ..speed_words import direction, imprecise, short_speed, speed_words
from .line_costs import us_text
from .units import duration


def inconclusive_reason(b: Benchmark) -> str:
    """The verdict's reason when the figure is inconclusive: `machine busy: …` or the interval."""
    head, _, why = b.verdict.partition(": ")
    if head.startswith("inconclusive") and why:
        return why.split("; ")[0]
    return "re-measure when the machine is idle"


LENS_COLUMNS = 100  # a lens wider than this is cut by the editor, mid-figure


def lens_title(b: Benchmark, pending: tuple[str, ...] = ()) -> str:
    """`⚡ torch.compile: train step faster: 1.36–1.49× (median 1.42×) · forward … · compile 14.2 s ·
    pays back after 870 steps` (the verdict's figure first), `forward slower: 0.84–0.90× (median
    0.87×) · …`, or `train step inconclusive — machine busy …`. `pending`: the parts not measured
    yet (`render.progress_rows`), while the measurement runs: the figures so far, and `⏳ train step…`
    instead of a payback not known yet. At most LENS_COLUMNS wide (`fit_lens`)."""
    main = b.train_step or b.forward
    cold = b.compile_s.cold if b.compile_s.cold is not None else b.compile_s.cold_forward
    compile_piece = f"compile {duration(cold)}"
    # the payback is the train step's: until it lands, it is said to come (later parts are the hover's)
    coming = ["⏳ train step…"] if "train_step" in pending else []
    if not main.conclusive:
        what = "train step" if b.train_step is not None else "forward"
        reason = inconclusive_reason(b)
        # the reason's detail goes first, then the reason: "inconclusive" is the verdict
        verdicts = [f"{what} inconclusive — {reason}", f"{what} inconclusive — {reason.split(':')[0]}",
                    f"{what} inconclusive"]
        return fit_lens([verdicts, [compile_piece], *([coming] if coming else [])], cuts=[0, 0])
    # the verdict's figure (the train step's, else the forward's) first, the other after it
    figures = [(main, "train step" if b.train_step is not None else "forward")]
    if b.train_step is not None:
        figures.append((b.forward, "forward"))
    pieces = [_wordings(t, what) for t, what in figures]
    if len(pieces) == 2:  # the figure the verdict is not: shortened first (to its median), dropped first
        pieces[1] = [pieces[1][0], pieces[1][-1], ""] if len(pieces[1]) > 1 else [pieces[1][0], ""]
    pieces.append([compile_piece])
    if coming:
        pieces.append(coming)
    else:
        # the break-even counts train steps where one was measured, else forward calls
        counted = "steps" if b.train_step is not None else "calls"
        pieces.append([f"pays back after {b.break_even_calls:,} {counted}" if b.break_even_calls is not None
                      else "never pays back", ""])
    other = 1 if len(figures) == 2 else None
    payback = None if coming else len(pieces) - 1
    cuts = [i for i in (other, 0, other, payback, 0) if i is not None]
    return fit_lens(pieces, cuts)


def _wordings(t: Timing, what: str) -> list[str]:
    """A lens figure's wordings, fullest first: `train step slower: 0.91–0.97× (median 0.94×)`,
    `train step slower: 0.91–0.97×` (its interval, what makes it conclusive), `train step 0.94× slower`."""
    full = _figure(t, what)
    if not direction(t):
        return [full]
    return [full, full.split(" (median")[0] + (" (imprecise)" if imprecise(t) else ""), f"{what} {short_speed(t)}"]


def fit_lens(pieces: list[list[str]], cuts: list[int], width: int = LENS_COLUMNS) -> str:
    """`⚡ torch.compile: ` and the pieces joined by ` · `; each piece is a list of its wordings, the
    first the fullest ("" drops the piece). The rule: while the title is wider than `width`, make the
    next cut — piece `i` to its next wording. `lens_title`'s cuts, least important first: the
    figure the verdict is not (the forward's, beside a train step) loses its interval; the verdict's
    own figure loses its median (the interval stays); the other figure goes; the payback goes; the
    verdict's figure keeps only its median. An inconclusive verdict's reason loses its detail, then
    goes. The verdict itself stays: a title still too wide is cut at its end with "…".
    """
    chosen = [0] * len(pieces)

    def text() -> str:
        return LENS_PREFIX + " · ".join(p[k] for p, k in zip(pieces, chosen) if p[k])

    for i in cuts:
        if len(text()) > width and chosen[i] < len(pieces[i]) - 1:
            chosen[i] += 1
    title = text()
    return title if len(title) <= width else title[: width - 1] + "…"


LENS_PREFIX = "⚡ torch.compile: "


def _figure(t: Timing, what: str) -> str:
    """`forward faster: 1.36–1.49× (median 1.42×)`, or `forward inconclusive` for the one of two
    figures the rounds could not tell."""
    return f"{what} {speed_words(t)}" if direction(t) else f"{what} inconclusive"


def hint_label(b: Benchmark) -> str:
    main = b.train_step or b.forward
    what = "train step" if b.train_step else "forward"
    if not main.conclusive:
        return f"⚡ {what}: inconclusive"
    return f"⚡ {what} {short_speed(main)}"


MEASURING_LENS = "⏳ measuring torch.compile…"
MEASURE_LENS = "▶ Measure torch.compile speedup"
MEASURE_SHORT = "▶ Measure"  # an inner target's lens: the rest of its title says what is known already


def code_lens_title(b: Optional[Benchmark], measuring: bool, pending: tuple[str, ...] = ()) -> str:
    """A target's lens: measuring now, its figures (with what is still to come, `pending`), or the
    invitation to measure."""
    if measuring:
        return MEASURING_LENS
    return lens_title(b, pending) if b is not None else MEASURE_LENS


def within_lens_title(outer: str, b: Optional[Benchmark], path: str, first: int, last: int) -> str:
    """An inner target left unmeasured (`discovery.order`): the invitation to measure it, and what
    the measurement of `outer` says of its lines (`first`..`last` of `path`): `▶ Measure · within
    GPT: its lines 1.20 ms eager → 0.80 ms compiled per forward`, or, until GPT's figures land,
    `▶ Measure · measured within GPT: see its line costs`."""
    t = b.forward if b is not None else None
    here = os.path.realpath(path)
    mine = [ln for ln in (t.lines if t is not None and not t.lines_note else [])
            if first <= ln.line <= last and os.path.realpath(ln.path) == here]
    if not mine:
        return f"{MEASURE_SHORT} · measured within {outer}: see its line costs"
    eager = sum(ln.eager_us or 0.0 for ln in mine)
    compiled = [ln.compiled_us for ln in mine if ln.compiled_us is not None]
    text = f"{us_text(eager)} eager"
    if compiled:
        text += f" → {us_text(sum(compiled))} compiled"
    return f"{MEASURE_SHORT} · within {outer}: its lines {text} per forward"


def waiting_lens_title(busy: str) -> str:
    """A target whose measurement waits for a busy GPU (`busy`: "GPU busy (python train.py, 92%)");
    the lens runs "Measure anyway"."""
    return f"⏸ waiting: {busy} · measure anyway"
