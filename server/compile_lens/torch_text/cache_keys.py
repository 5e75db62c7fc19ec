"""Why a cache missed, from torch's own cache-key details.

The FX-graph cache logs each lookup as a structured-trace artifact (`fx_graph_cache_hit` /
`fx_graph_cache_miss`) whose JSON has the `key` and its `components`: one line per part of the key,
`[hash] name: value` (`inductor_config[max_autotune]`, `torch_version`, `system_info`, the graph
`gm`, `example_inputs[0]`, `shape_env_guards`, …). `recorded()` collects them from the
`torch.__trace` logger (`record_all()`: for the rest of the process, as the trial's hook does) (a handler of our own, as TORCH_TRACE installs one; feature-detected: an
older torch logs nothing and nothing is said). `reasons()` compares a compile that missed with the
one that wrote the cache: for each missed graph, the written graph closest to it, and the parts
that differ, in words. Stdlib only: the trial's hook imports it inside the user's program.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from typing import Any, Iterator

ARTIFACTS = {"fx_graph_cache_hit": "hit", "fx_graph_cache_miss": "miss"}
_KEPT = 300  # characters of a part's line kept: its hash names it, a long value (the graph's code) is not shown
_LINE = re.compile(r"^\[(?P<hash>[^\]]*)\] (?P<name>[^:]+): ?(?P<value>.*)$", re.S)
# a key part's name (before any "[index]") → what a user calls it
_WHAT = [("inductor_config", "Inductor config"), ("torch_version", "torch version"),
         ("system_info", "device/GPU and compiler"), ("shape_env_guards", "dynamic-shape decisions"),
         ("example_inputs", "input shapes/dtypes"), ("gm", "the graph itself"),
         ("fx_kwargs", "compile options"), ("deterministic_algorithms", "deterministic algorithms setting"),
         ("user_defined_triton_source", "user Triton kernels"), ("post_grad_custom", "custom passes")]


class _Keys(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.found: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        artifact = (getattr(record, "metadata", None) or {}).get("artifact") or {}
        state = ARTIFACTS.get(artifact.get("name"))
        if state is None:
            return
        with contextlib.suppress(ValueError, TypeError):
            payload = json.loads(getattr(record, "payload", "") or "{}")
            self.found.append({"state": state, "key": payload.get("key"),
                               "components": [str(c)[:_KEPT] for c in payload.get("components") or []]})


@contextlib.contextmanager
def recorded() -> Iterator[list[dict[str, Any]]]:
    """The FX-graph cache lookups of the compiles in this block: [{state, key, components}]."""
    handler = _listen()
    try:
        yield handler.found
    finally:
        logging.getLogger("torch.__trace").removeHandler(handler)


def record_all() -> list[dict[str, Any]]:
    """The FX-graph cache lookups of every compile from now until the process exits (a trial run's)."""
    return _listen().found


def _listen() -> _Keys:
    handler = _Keys()
    logging.getLogger("torch.__trace").addHandler(handler)
    return handler


def _parts(components: list[str]) -> dict[str, tuple[str, str]]:
    """name → (hash, value) of each key part: the hash tells parts apart, the value is for the words."""
    parts = {}
    for line in components:
        m = _LINE.match(line)
        if m:
            parts[m["name"].strip()] = (m["hash"], m["value"].strip())
    return parts


def _words(name: str, before: str | None, after: str | None) -> str:
    base = name.split("[", 1)[0]
    what = next((w for prefix, w in _WHAT if base == prefix), base)
    if base == "inductor_config" and "[" in name:
        option = name.split("[", 1)[1].rstrip("]")
        if before is not None and after is not None and len(before) + len(after) < 80:
            return f"{what} option `{option}` ({before} → {after})"
        return f"{what} option `{option}`"
    if base == "torch_version" or len((before or "") + (after or "")) > 80 or before is None or after is None:
        return what
    return f"{what} ({before} → {after})"


def differences(written: list[str], missed: list[str]) -> list[str]:
    """What differs between two keys' components, in words (each part once)."""
    a, b = _parts(written), _parts(missed)
    said: list[str] = []
    for name in sorted(set(a) | set(b)):
        (hash_a, before), (hash_b, after) = a.get(name, (None, None)), b.get(name, (None, None))
        if hash_a != hash_b:
            words = _words(name, before, after)
            if words not in said:
                said.append(words)
    return said


def reasons(written: list[dict[str, Any]], missed: list[dict[str, Any]]) -> list[str]:
    """For each lookup in `missed` that missed, what differs from the closest lookup in `written`
    (the compile that filled the cache): de-duplicated words, e.g. "Inductor config option
    `size_asserts` (True → False)"."""
    out: list[str] = []
    candidates = [w for w in written if w.get("components")]
    for miss in missed:
        if miss.get("state") != "miss" or not miss.get("components") or not candidates:
            continue
        mine = _parts(miss["components"])
        closest = max(candidates, key=lambda w: sum(_parts(w["components"]).get(k, (None,))[0] == h
                                                    for k, (h, _) in mine.items()))
        if closest.get("key") == miss.get("key"):
            continue  # the same key missed: evicted or not written (e.g. a bypass), not a difference
        for words in differences(closest["components"], miss["components"]):
            if words not in out:
                out.append(words)
    return out


def reason_words(found: list[str]) -> str:
    """`: the key differed in Inductor config option `x` (…), …` or '' when nothing was named."""
    return f"; its cache key differed in {', '.join(found[:4])}" + (f" and {len(found) - 4} more" if len(found) > 4 else "") if found else ""
