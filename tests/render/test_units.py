"""render/units: the one duration and size formatter; each style writes what its renderer wrote
before it was shared (the comments of STYLES list them), and a missing figure is one mark."""

from __future__ import annotations

import math

import pytest

from compile_lens.render import units
from compile_lens.render.units import (
    FINE,
    MS,
    MS_UNDER_10S,
    SECONDS,
    SHORT,
    STEP,
    duration,
    format_bytes,
)

SECONDS_IN = (1.5, 0.128, 0.0128, 0.00064)


@pytest.mark.parametrize("style, written", [
    (SHORT, ["1.5 s", "128 ms", "13 ms", "1 ms"]),
    (STEP, ["1.5 s", "128 ms", "12.8 ms", "640 µs"]),
    (FINE, ["1500 ms", "128 ms", "12.80 ms", "640 µs"]),
    (MS, ["1500.0 ms", "128.0 ms", "12.8 ms", "0.6 ms"]),
    (MS_UNDER_10S, ["1500.0 ms", "128.0 ms", "12.8 ms", "0.6 ms"]),
    (SECONDS, ["1.5 s", "0.13 s", "0.01 s", "0.00 s"]),
])
def test_each_style_writes_its_renderers_words(style, written):
    assert [duration(s, style) for s in SECONDS_IN] == written


def test_the_edges_of_each_style():
    assert duration(12.5, MS_UNDER_10S) == "12.5 s" and duration(9.99, MS_UNDER_10S) == "9990.0 ms"
    assert duration(ms=0.003, style=FINE) == "3 µs"  # a figure kept in ms: no float dust
    assert duration(ms=0.0125, style=FINE) == "12.5 µs" and duration(ms=250, style=FINE) == "250 ms"
    assert duration(0.99, STEP) == "990 ms" and duration(1.0, SHORT) == "1.0 s"


@pytest.mark.parametrize("missing", [None, math.nan, math.inf, "3", True])
def test_a_missing_figure_is_one_mark(missing):
    assert duration(missing) == "–" and duration(missing, MS, units.MISSING_TEXT) == "-"
    assert duration(ms=missing, style=FINE) == "–" and format_bytes(missing) == "–"


def test_sizes():
    assert [format_bytes(n) for n in (512, 1536, 12 * 2**20, 3.2 * 2**30, 5000 * 2**30)] == [
        "512 B", "1.5 KB", "12.0 MB", "3.2 GB", "5000.0 GB"]


def test_an_unknown_style_is_refused():
    with pytest.raises(ValueError, match="no duration style"):
        duration(1.0, "minutes")
