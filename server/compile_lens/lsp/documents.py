"""Open documents: the buffer's lints and targets on every change, the saved file read for a trace.

Lints are incremental and cheap, so they run on every keystroke. Finding the targets needs a full
parse (≈ 40 ms per 5,000 lines here): small files get it at once; a big one publishes its lints
first and is re-checked just after, its trace results hidden meanwhile unless the buffer is
exactly the traced code.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any, Optional

from ..config import ProjectConfig, load_project_config
from ..discovery import Discovery, dependency_fingerprint, discover
from ..discovery.inputs import resolve_inputs
from ..jobs.analysis import forget_lints, safe_lint
from ..record import load_recorded
from .state import CompileLensServer, DocState, Saved

log = logging.getLogger("compile_lens")

BIG_FILE_CHARS = 60_000  # ≈ 1,500 lines: above this, a keystroke does not wait for a full parse


def relint(ls: CompileLensServer, uri: str) -> None:
    """Lint the buffer and publish at once (no debounce)."""
    state = ls.doc(uri)
    source = ls.buffer(uri)
    lints = safe_lint(source, state.path)
    if lints is not None:  # None: mid-typing syntax error; keep what was shown
        state.lints = lints
    if state.rediscover is not None:
        state.rediscover.cancel()
        state.rediscover = None
    if len(source) < BIG_FILE_CHARS:
        state.discovery, state.discovery_stale = discover_targets(ls, state.path, source), False
    else:
        state.discovery_stale = True
        state.rediscover = asyncio.get_running_loop().call_later(0.05, _rediscover, ls, uri)
    ls.emit("changed", uri)


def _rediscover(ls: CompileLensServer, uri: str) -> None:
    state = ls.docs.get(uri)
    if state is None or not state.open:
        return
    state.rediscover = None
    state.discovery, state.discovery_stale = discover_targets(ls, state.path, ls.buffer(uri)), False
    ls.emit("changed", uri)


def discover_targets(ls: CompileLensServer, path: str, source: str) -> Optional[Discovery]:
    """Targets of a file, each with its inputs from the best source: a directive, pyproject.toml,
    a recorded run (`compile-lens record`), or the guess from its first layer."""
    found = discover(source)
    if found is not None:
        config, recorded, root_of = _input_sources(ls)
        root = root_of(path)
        found.targets = resolve_inputs(path, root, found.targets, source=source,
                                       config=config(path), recorded=recorded(root))
    return found


def _input_sources(ls: CompileLensServer):
    """pyproject.toml and .compile-lens/recorded.json, re-read at most every 2 s (not per keystroke)."""
    now = time.monotonic()
    if ls.sources is None or now - ls.sources[0] > 2.0:
        configs: dict[str, ProjectConfig] = {}
        roots: dict[str, str] = {}
        runs: dict[str, Any] = {}

        def root_of(path: str) -> str:
            folder = os.path.dirname(path)
            if folder not in roots:
                roots[folder] = ls.root_for(path)
            return roots[folder]

        def config(path: str) -> ProjectConfig:
            folder = os.path.dirname(path)
            if folder not in configs:
                configs[folder] = load_project_config(path, root_of(path))
            return configs[folder]

        def recorded(root: str) -> Any:
            if root not in runs:
                runs[root] = load_recorded(root)
            return runs[root]

        ls.sources = (now, config, recorded, root_of)
    return ls.sources[1], ls.sources[2], ls.sources[3]


def read_saved(ls: CompileLensServer, state: DocState) -> Optional[Saved]:
    """The file as saved, with the version it was saved at; None when it cannot be read or parsed."""
    try:
        with open(state.path, encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("cannot read %s: %s", state.path, exc)
        return None
    found = discover_targets(ls, state.path, source)
    if found is None:
        return None
    deps_fp, deps = dependency_fingerprint(state.path, source, ls.root_for(state.path))
    return Saved(source, found, deps_fp, deps, os.path.realpath(state.path), saved_version(ls, state, source))


def version_on_disk(ls: CompileLensServer, state: DocState) -> Optional[int]:
    """`saved_version` of the file as it is now (None: unreadable, or not a known version)."""
    try:
        with open(state.path, encoding="utf-8") as f:
            return saved_version(ls, state, f.read())
    except (OSError, UnicodeDecodeError):
        return None


def saved_version(ls: CompileLensServer, state: DocState, source: str) -> Optional[int]:
    """The document version whose text is `source` (read from disk): the buffer's when they are
    equal, else the last save's when it saved this text, else not known (None)."""
    document = ls.workspace.get_text_document(state.uri)
    if document.source == source:
        return document.version
    return state.saved_version if state.saved_text == source else None


def close(ls: CompileLensServer, uri: str) -> None:
    state = ls.docs.pop(uri, None)
    if state is not None:
        state.open = False
        for task in [state.runner, *state.bench_tasks]:
            if task and not task.done():
                task.cancel()
        forget_lints(state.path)
    ls.emit("closed", uri)
