"""Results on disk (sqlite3), keyed by what they depend on, so a restart or reopen costs nothing.

Key: the file's AST fingerprint (comments and formatting do not count), the target, its input
recipe, the torch version, the device and the compile mode. A corrupt or unreadable database is
discarded and rebuilt, with one log line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import sqlite3
import time
from typing import Any, Mapping, Optional

log = logging.getLogger(__name__)

# 2: results carry phases, loop-fallback inner breaks, recompile frames, timing intervals; an older
# cache would render in the old shape, so it is dropped
SCHEMA_VERSION = 2


def cache_dir(env: Optional[Mapping[str, str]] = None) -> str:
    """The one folder rule, for the editor and the CLI alike: results.sqlite here, Inductor's caches
    in its `inductor/` (`lanes.worker_env`). COMPILE_LENS_CACHE_DIR, else $XDG_CACHE_HOME/compile-lens,
    else ~/.cache/compile-lens. Always absolute: a worker runs in the file's root, not in our cwd, and
    a relative folder would put its Inductor cache elsewhere. A relative XDG_CACHE_HOME is ignored,
    as the XDG spec says."""
    env = os.environ if env is None else env
    own = env.get("COMPILE_LENS_CACHE_DIR")
    if own:
        return os.path.abspath(os.path.expanduser(own))
    xdg = env.get("XDG_CACHE_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "compile-lens")


def cache_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def target_key(kind: str, torch_version: Optional[str], path: str, fingerprint: str, deps_fingerprint: str,
               spec: Any, *extra: Any) -> str:
    """The key of one target's result ("trace", "sweep", "bench"): the same for the language server
    and the CLI, so either one's results serve the other. `path` is the file's real path."""
    inputs = dataclasses.asdict(spec.inputs) if spec.inputs else None
    if inputs:
        inputs.pop("line", None)  # where the directive sits is not what it says
    return cache_key(kind, torch_version, path, fingerprint, deps_fingerprint, spec.name, spec.kind, inputs,
                     spec.compile_options, *extra)


@dataclasses.dataclass(frozen=True)
class TargetKeys:
    """Where one target's results live: the trace, the recompile sweep, the figures (per device and
    mode, paired rounds with intervals) and the deployment answers measured with them."""

    trace: str
    sweep: str
    bench: str

    @property
    def deploy(self) -> str:
        return self.bench + ":deploy"


def target_keys(torch_version: Optional[str], path: str, fingerprint: str, deps_fingerprint: str, spec: Any,
                device: str, mode: str) -> TargetKeys:
    """The keys of one target, built here only, so the editor and the CLI read each other's results."""
    real = os.path.realpath(path)

    def key(kind: str, *extra: Any) -> str:
        return target_key(kind, torch_version, real, fingerprint, deps_fingerprint, spec, *extra)

    return TargetKeys(key("trace"), key("sweep"), key("bench-paired", device, mode))


def torch_version() -> Optional[str]:
    """torch's version from its metadata: part of every key, read without importing torch."""
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # noqa: BLE001
        return None


class ResultCache:
    def __init__(self, directory: str):
        self.path = os.path.join(directory, "results.sqlite")
        self._db: Optional[sqlite3.Connection] = None

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        try:
            self._db = self._open()
        except sqlite3.DatabaseError as exc:
            log.warning("result cache %s is unreadable (%s): discarded and rebuilt", self.path, exc)
            self._discard()
            self._db = self._open()
        return self._db

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=5, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # a cache: no fsync per result, on the editor's path
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            db.execute("DROP TABLE IF EXISTS results")
        db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, kind TEXT NOT NULL,"
                   " value TEXT NOT NULL, source TEXT, created REAL NOT NULL)")
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.execute("SELECT count(*) FROM results").fetchone()  # fails here on a corrupt file
        return db

    def _discard(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.remove(self.path + suffix)
            except OSError:
                pass

    def get(self, key: str) -> Optional[tuple[Any, Optional[str], float]]:
        """(value, the source it was computed from, when) or None."""
        try:
            row = self._connect().execute("SELECT value, source, created FROM results WHERE key=?", (key,)).fetchone()
            return (json.loads(row[0]), row[1], row[2]) if row else None
        except (sqlite3.DatabaseError, ValueError) as exc:
            self._reset(exc)
            return None

    def put(self, key: str, kind: str, value: Any, source: Optional[str] = None) -> None:
        try:
            self._connect().execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?)",
                                    (key, kind, json.dumps(value), source, time.time()))
        except sqlite3.DatabaseError as exc:
            self._reset(exc)

    def clear(self) -> int:
        try:
            return self._connect().execute("DELETE FROM results").rowcount
        except sqlite3.DatabaseError as exc:
            self._reset(exc)
            return 0

    def _reset(self, exc: Exception) -> None:
        log.warning("result cache %s failed (%s): discarded and rebuilt", self.path, exc)
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
        self._db = None
        self._discard()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
