"""Every private-torch call the worker makes about Dynamo's state, defined once.

torch's private APIs move between releases: each shim detects the feature (attribute present),
never the version, and degrades to "nothing seen" rather than raising into a job.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from functools import lru_cache
from typing import Any, Iterator, Optional

import torch
import torch._dynamo


def metrics() -> list[Any]:
    """Per-compile records (`CompilationMetrics`) since the last clear; [] where torch lacks them."""
    get = getattr(torch._dynamo.utils, "get_compilation_metrics", None)
    if get is None:
        return []
    try:
        return list(get())
    except Exception:  # noqa: BLE001 - private API: degrade to "nothing seen"
        return []


@contextlib.contextmanager
def structured_trace(handler: logging.Handler) -> Iterator[bool]:
    """While inside, `handler` receives torch's structured-trace records (`trace_log`, held at DEBUG,
    its level restored after); yields False, attaching nothing, on a torch without that log."""
    try:
        from torch._logging import _internal

        trace_log = _internal.trace_log
    except (ImportError, AttributeError):
        yield False
        return
    saved = trace_log.level
    trace_log.setLevel(logging.DEBUG)
    trace_log.addHandler(handler)
    try:
        yield True
    finally:
        trace_log.removeHandler(handler)
        trace_log.setLevel(saved)


def clear_metrics() -> None:
    clear = getattr(torch._dynamo.utils, "clear_compilation_metrics", None)
    if clear is not None:
        try:
            clear()
        except Exception:  # noqa: BLE001
            pass


def frame_compiles(entries: list[Any]) -> list[Any]:
    """Entries for Dynamo frame compiles (backward compiles have no co_name)."""
    return [e for e in entries if getattr(e, "co_name", None)]


def reset() -> None:
    """Forget every compiled frame, the metrics, the counters and the repeated-break memory.

    Repeated breaks are logged without their stack; a warm worker must see each as new."""
    torch._dynamo.reset()
    reset_dup = getattr(torch._dynamo.utils, "reset_graph_break_dup_checker", None)
    if reset_dup is not None:
        reset_dup()
    torch._dynamo.utils.counters.clear()
    clear_metrics()


def current_compile_id() -> Optional[str]:
    """The id ("frame/compile") of the compile running now, from torch's compile context."""
    try:
        trace_id = torch._guards.CompileContext.current_trace_id()
    except Exception:  # noqa: BLE001 - private API, may move
        return None
    compile_id = getattr(trace_id, "compile_id", None)
    frame, number = getattr(compile_id, "frame_id", None), getattr(compile_id, "frame_compile_id", None)
    return f"{frame}/{number}" if frame is not None and number is not None else None


def recompile_limit() -> int:
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):  # the newer name first
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    return 8


# --- the graph-break registry ------------------------------------------------------------------

@lru_cache(maxsize=1)
def registry() -> dict[str, list[dict[str, Any]]]:
    """`graph_break_registry.json`: id -> entries `{Gb_type, Context, Explanation, Hints}` (the
    first is today's wording); {} on a torch without it (ids then come only from message links)."""
    path = os.path.join(os.path.dirname(torch._dynamo.__file__), "graph_break_registry.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


@lru_cache(maxsize=1024)
def registry_id(gb_type: str) -> Optional[str]:
    for gb_id, entries in registry().items():
        if any(e.get("Gb_type") == gb_type for e in entries):
            return gb_id
    return None


def gb_id(gb_type: str) -> Optional[str]:
    """The registry id of a break type, by torch's own map (the one its message links use)."""
    mapping = getattr(torch._dynamo.exc, "_load_gb_type_to_gb_id_map", None)
    if mapping is not None:
        try:
            found = mapping().get(gb_type)
        except Exception:  # noqa: BLE001 - private API
            found = None
        if found:
            return str(found)
    return registry_id(gb_type)


def registry_url(gb_id: Optional[str]) -> Optional[str]:
    if not gb_id:
        return None
    base = getattr(torch._dynamo.exc, "GRAPH_BREAK_SITE_URL", None)
    return f"{base}gb{gb_id[2:]}.html" if base else None


def documentation_link(gb_type: str) -> Optional[str]:
    """torch's own page for a break type (`exc.get_gbid_documentation_link`), else from the registry."""
    link = getattr(torch._dynamo.exc, "get_gbid_documentation_link", None)
    if link is not None:
        try:
            found = link(gb_type)
        except Exception:  # noqa: BLE001 - private API
            found = None
        if found:
            return found
    return registry_url(registry_id(gb_type))
