"""Open documents: the buffer's lints and targets on every change, the saved file read for a trace.

Lints are incremental and cheap, so they run on every keystroke. Finding the targets looks at the
whole file: small files get it at once; a big one publishes its lints first and its targets are
found in a thread (`discovery.statements` parses it chunk by chunk, so the thread never holds the
event loop long), started after a 300 ms pause in typing and stopped by the next keystroke. Its trace
results stay hidden meanwhile unless the buffer is exactly the traced code.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from ..config import ProjectConfig, load_project_config
from ..discovery import Discovery, dependency_fingerprint, discover, note_importers
from ..discovery.inputs import resolve_inputs
from ..discovery.precision import choose_for as choose_precision
from ..discovery.statements import StatementParser, Superseded
from ..jobs.analysis import forget_lints, safe_lint
from ..record import load_recorded
from .state import CompileLensServer, DocState, Saved

log = logging.getLogger("compile_lens")

BIG_FILE_CHARS = 30_000  # ≈ 750 lines (≈ 15 ms to discover): above this, targets are found off the loop
# After the last keystroke: a pause in typing, not the gap between two keys. While it runs, the
# discovery takes half the GIL (0.3-0.7 s for 5,000 lines), and a keystroke's lint waits on it.
REDISCOVER_AFTER_S = 0.3
# One thread for every document: discoveries queue behind each other, never beside the event loop twice.
_DISCOVERY_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="compile-lens-discovery")


def relint(ls: CompileLensServer, uri: str) -> None:
    """Lint the buffer and publish: at once, unless a big file's last lint ended less than its own
    duration ago (a busy machine, keys queued): then when that time is up, so that the keystrokes
    queued meanwhile are linted once, as the newest buffer, and hovers between them are answered."""
    state = ls.doc(uri)
    _stop_rediscovery(state)  # now: the thread stops between chunks, before this lint runs
    if state.relint is not None:
        state.relint.cancel()
        state.relint = None
    wait = state.relint_free_at - asyncio.get_running_loop().time()
    if wait <= 0 or len(ls.buffer(uri)) < BIG_FILE_CHARS:
        _relint_now(ls, uri)
    else:
        state.relint = asyncio.get_running_loop().call_later(min(wait, 0.5), _relint_now, ls, uri)


def _relint_now(ls: CompileLensServer, uri: str) -> None:
    state = ls.docs.get(uri)
    if state is None:
        return
    state.relint = None
    loop = asyncio.get_running_loop()
    started = loop.time()
    source = ls.buffer(uri)
    lints = safe_lint(source, state.path)
    if lints is not None:  # None: mid-typing syntax error; keep what was shown
        state.lints = lints
    _stop_rediscovery(state)
    if len(source) < BIG_FILE_CHARS:
        state.discovery, state.discovery_stale = discover_targets(ls, state.path, source), False
    else:
        state.discovery_stale = True
        state.rediscover = loop.call_later(REDISCOVER_AFTER_S, _rediscover, ls, uri)
    ls.emit("changed", uri)  # publishes: with ~1,500 diagnostics as long as the lint itself
    state.relint_free_at = 2 * loop.time() - started  # now + what this one took


def _stop_rediscovery(state: DocState) -> None:
    """The buffer changed: a discovery waiting to start, or running, would describe older text."""
    if state.rediscover is not None:
        state.rediscover.cancel()
        state.rediscover = None
    if state.rediscovering is not None:
        state.rediscovering.set()
        state.rediscovering = None


def _rediscover(ls: CompileLensServer, uri: str) -> None:
    """Find the buffer's targets in the discovery thread; apply them if the buffer did not change."""
    state = ls.docs.get(uri)
    if state is None or not state.open:
        return
    state.rediscover = None
    source = ls.buffer(uri)
    cancelled = state.rediscovering = threading.Event()
    parser = state.statements = state.statements or StatementParser()
    sources = _input_sources(ls)  # read here: the cache of pyproject/recorded lives on the loop

    def work() -> Optional[Discovery]:
        parsed = parser.parse(source, cancelled.is_set)
        if parsed is None:
            return None
        return discover_targets(ls, state.path, source, parsed, sources)

    def done(future: asyncio.Future) -> None:
        error = None if future.cancelled() else future.exception()
        if error is not None and not isinstance(error, Superseded):
            log.error("finding the targets of %s failed", state.path, exc_info=error)
        if cancelled.is_set() or future.cancelled() or not state.open:
            return  # superseded by a keystroke: that one scheduled its own discovery
        state.rediscovering = None
        if error is not None:
            return
        found = future.result()
        if found is not None:  # None: mid-typing syntax error; keep the targets shown
            state.discovery = found
        state.discovery_stale = False
        ls.emit("changed", uri)

    asyncio.get_running_loop().run_in_executor(_DISCOVERY_THREAD, work).add_done_callback(done)


def discover_targets(ls: CompileLensServer, path: str, source: str, parsed=None, sources=None
                     ) -> Optional[Discovery]:
    """Targets of a file, each with its inputs from the best source: a directive, pyproject.toml,
    a recorded run (`compile-lens record`), or the guess from its first layer. `parsed`: (tree,
    fingerprint) from a `StatementParser`; `sources`: `_input_sources` read on the event loop."""
    config, recorded, root_of = sources or _input_sources(ls)
    root = root_of(path)
    # path and root: a class's base from another workspace file is read there
    found = discover(source, *parsed, path=path, root=root) if parsed else discover(source, path=path, root=root)
    if found is not None:
        found.targets = resolve_inputs(path, root, found.targets, source=source,
                                       config=config(path), recorded=recorded(root), precision=ls.settings.precision)
    return found


def rechoose_precision(ls: CompileLensServer, saved: Saved) -> None:
    """The settings changed: what each target of the saved file is measured in, chosen again
    (`discovery/precision.py`), so its figures, its cache key and its next job follow the setting."""
    config, recorded, root_of = _input_sources(ls)
    for spec in saved.discovery.targets:
        choose_precision(spec, saved.path, ls.settings.precision, config(saved.path), recorded(root_of(saved.path)))


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
    root = ls.root_for(state.path)
    deps_fp, deps = dependency_fingerprint(state.path, source, root)
    note_importers(found, state.path, root)  # the model a workspace file compiles runs first (`discovery.order`)
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
        _stop_rediscovery(state)
        if state.relint is not None:
            state.relint.cancel()
        for task in [state.runner, *state.bench_tasks]:
            if task and not task.done():
                task.cancel()
        forget_lints(state.path)
    ls.emit("closed", uri)
