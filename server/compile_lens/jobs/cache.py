"""Results on disk (sqlite3), keyed by what they depend on, so a restart or reopen costs nothing.

Key: the file's path relative to its project root and the root's identity (`project_identity`),
the file's AST fingerprint (comments and formatting do not count) and those of the workspace files
it imports, the target, its input recipe, the torch version, the device and the compile mode. No
absolute path is in a key, and paths under the root are stored relative to it (`project.anchored`): a
second clone, a moved checkout or a CI runner that restores the cache folder elsewhere reads the
results. A corrupt or unreadable database is discarded and rebuilt, with one log line.

The entries of one target, and their shapes (read and written only through the helpers below, by
the language server and the CLI alike):
- trace: the `TargetResult` of the trace phase, with the source it ran on (positions move to
  today's text on read);
- sweep: the recompile sweep's `Recompile` list, with its source;
- bench: the `Benchmark` (figures do not depend on positions);
- deploy: the answers measured with the figures: `{"export", "fallback_ops", "report", "unmeasured"}`;
- levers: the `Lever` list of the levers phase (with the figures' key: they are measured on the same device and mode).
A phase that a worker failure ended (crash, timeout, memory, exit) is never stored: it says
nothing about the code.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import sqlite3
import time
from typing import Any, Mapping, Optional, Sequence

from ..config import find_root
from ..positions import moved
from ..protocol import (
    LEVERS,
    Benchmark,
    ExportCheck,
    FallbackOp,
    Lever,
    PartStatus,
    Recompile,
    Report,
    TargetResult,
    from_dict,
    phase_of,
    with_phase,
)
from ..remote_cache import in_use as remote_cache_in_use
from ..settings import Settings
from .project import anchored, placed, project_identity

log = logging.getLogger(__name__)

# 2: results carry phases, loop-fallback inner breaks, recompile frames, timing intervals; an older
# cache would render in the old shape, so it is dropped
# 3: a break inside a loop is the break at its own line, with its loop (`GraphBreak.loop`)
# 4: warm_remote, warm_cache.remote, the forward's measured guard cost (guard_us_per_call, its interval, share)
# 5: a lever's forward and train step are `Timing` records (were {"before", "after", "ci", …} dicts); the
# deployment answers, peak memory and errors are records (`ExportCheck`, `FallbackOp`, `Report`, …)
# 6: a timing's machine load (`contention`, the benchmark's and a lever's) is a `ContentionReport` record
# (was a dict of the fields read: unread ones are now null, and no reading is null, not {})
SCHEMA_VERSION = 6
# what each version changed, for the log line that drops an older cache's entries
CHANGED = {5: "a lever's timings are Timing records; export, fallback ops, the report, peak memory and errors "
              "are typed records",
           6: "a timing's machine load (contention) is a typed record"}


def why_dropped(version: int) -> str:
    """Why a cache of schema `version` is not read: what changed since, or that a newer version wrote it."""
    if version > SCHEMA_VERSION:
        return "written by a newer Compile Lens"
    return "; ".join(CHANGED[v] for v in range(version + 1, SCHEMA_VERSION + 1) if v in CHANGED) or "an older shape"

WORKER_FAILURES = ("crash", "timeout", "memory", "exit")  # not the code's answer: never cached


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
    and the CLI, so either one's results serve the other. `path` names the file where it is
    (`target_keys`: relative to the project root, with the root's identity)."""
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
    remote: Optional[str] = None  # the remote cache the figures are to be measured with
    root: str = ""  # the project root: paths under it are stored relative to it, read back under it

    @property
    def deploy(self) -> str:
        return self.bench + ":deploy"

    @property
    def levers(self) -> str:
        return self.bench + ":levers"


def target_keys(torch_version: Optional[str], path: str, fingerprint: str, deps_fingerprint: str, spec: Any,
                device: str, mode: str, python: Optional[str] = None, remote: Optional[str] = None,
                opt_in: Sequence[str] = ()) -> TargetKeys:
    """The keys of one target, built here only, so the editor and the CLI read each other's results.
    `python`: the workers' interpreter when it is not this process's own (`check --compare-with`):
    two venvs with the same torch version may still hold different builds. `remote`: the remote
    cache the measurement uses (`remote_cache.in_use`): turning one on measures again. `opt_in`:
    the parts asked for whatever the budget (`benchmark.optIn`): a cached measurement the budget
    cut short is not the one asked for (none asked: the keys are as before)."""
    root = find_root(path)
    where = (project_identity(root), os.path.relpath(os.path.realpath(path), os.path.realpath(root)))
    other = () if python is None else (("python", python),)

    def key(kind: str, *extra: Any) -> str:
        return target_key(kind, torch_version, where, fingerprint, deps_fingerprint, spec, *extra, *other)

    served = () if remote is None else (("remote_cache", remote),)
    # the precision it is measured in, and where that was chosen (named with the figures); none: torch's defaults
    chosen = getattr(spec, "precision", "")
    precision = (("precision", chosen, spec.precision_source),) if chosen else ()
    asked = (("opt_in", tuple(sorted(set(opt_in)))),) if opt_in else ()
    return TargetKeys(key("trace"), key("sweep"), key("bench-paired", device, mode, *served, *precision, *asked),
                      remote, root)


def run_keys(torch_version: Optional[str], path: str, fingerprint: str, deps_fingerprint: str, spec: Any,
             settings: Settings, python: Optional[str] = None) -> TargetKeys:
    """`target_keys` under a run's settings (device, mode, the remote cache in use, the parts opted
    in): the one way the engine's `check` and the editor's scheduler key a target."""
    return target_keys(torch_version, path, fingerprint, deps_fingerprint, spec, settings.device, settings.mode,
                       python, remote_cache_in_use(settings.remote_cache, os.environ), settings.opt_in)


def torch_version(python: Optional[str] = None) -> Optional[str]:
    """torch's version from its metadata: part of every key, read without importing torch. `python`:
    the workers' interpreter when it is another one (probed: `interpreters.probe`)."""
    if python is not None:
        from ..interpreters import InterpreterError, is_own, probe

        if not is_own(python):
            try:
                return probe(python).torch
            except InterpreterError:
                return None
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # noqa: BLE001
        return None


class ResultCache:
    def __init__(self, directory: str, read: bool = True):
        self.path = os.path.join(directory, "results.sqlite")
        self._db: Optional[sqlite3.Connection] = None
        self.read = read  # False: every result is computed afresh, and written (`check --profile-dir`)

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
            # another shape would render wrong or not at all: its entries are measured again, and the log says why
            log.warning("result cache %s holds schema %s, this version reads %s (%s): its entries are dropped",
                        self.path, version, SCHEMA_VERSION, why_dropped(version))
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
        if not self.read:
            return None
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


# --- one target's entries: read (moved to today's text) and write (settled phases only) ---------

def read_trace(cache: ResultCache, keys: TargetKeys, source: str, path: str) -> Optional[TargetResult]:
    """The cached trace of a target, in `source`'s positions (None: not cached, or other code)."""
    hit = cache.get(keys.trace)
    if hit is None:
        return None
    return moved(from_dict(TargetResult, placed(hit[0], keys.root)), hit[1], source, path)


def read_sweep(cache: ResultCache, keys: TargetKeys, source: str, path: str) -> Optional[list[Recompile]]:
    """The cached recompile sweep of a target, in `source`'s positions (None: not cached, or other code)."""
    hit = cache.get(keys.sweep)
    if hit is None:
        return None
    carrier = TargetResult("", "", 0, recompiles=[from_dict(Recompile, r) for r in placed(hit[0], keys.root)])
    found = moved(carrier, hit[1], source, path)
    return None if found is None else found.recompiles


def read_bench(cache: ResultCache, keys: TargetKeys) -> Optional[Benchmark]:
    hit = cache.get(keys.bench)
    return None if hit is None else from_dict(Benchmark, placed(hit[0], keys.root))


def read_deployment(cache: ResultCache, keys: TargetKeys) -> Optional[dict]:
    hit = cache.get(keys.deploy)
    return None if hit is None else placed(hit[0], keys.root)


def read_levers(cache: ResultCache, keys: TargetKeys) -> Optional[list[Lever]]:
    """The levers measured on a target (None: not cached)."""
    hit = cache.get(keys.levers)
    return None if hit is None else [from_dict(Lever, lever) for lever in placed(hit[0], keys.root)]


def write_levers(cache: ResultCache, keys: TargetKeys, result: TargetResult) -> bool:
    """Store a finished levers phase; not one whose lever was inconclusive or not measured (the
    machine was busy, the budget ran out): that says nothing about the code. True if stored."""
    phase = phase_of(result, LEVERS)
    if phase is None or phase.status != "done":
        return False
    if any(lever.verdict in ("inconclusive", "not measured") for lever in result.levers):
        return False
    cache.put(keys.levers, "levers", anchored([dataclasses.asdict(lever) for lever in result.levers], keys.root))
    return True


def with_recompiles(result: TargetResult, recompiles: list[Recompile]) -> TargetResult:
    """`result` with a finished sweep's recompiles."""
    return with_phase(dataclasses.replace(result, recompiles=recompiles), "sweep", "done")


def _plain(record: Any) -> Any:
    return None if record is None else dataclasses.asdict(record)


def with_deployment(result: TargetResult, deployment: Mapping[str, Any]) -> TargetResult:
    """`result` with the deployment answers measured with its figures (see `deployment_of`)."""
    parts = {name: from_dict(PartStatus, state) for name, state in (deployment.get("parts") or {}).items()}
    export, report = deployment.get("export"), deployment.get("report")
    return dataclasses.replace(result, export=from_dict(ExportCheck, export) if export else None,
                               fallback_ops=[from_dict(FallbackOp, o) for o in deployment.get("fallback_ops") or []],
                               report=from_dict(Report, report) if report else None,
                               unmeasured=dict(deployment.get("unmeasured") or {}), parts=parts,
                               parts_s=dict(deployment.get("parts_s") or {}))


def deployment_of(result: TargetResult) -> dict:
    return {"export": _plain(result.export), "fallback_ops": [dataclasses.asdict(o) for o in result.fallback_ops or []],
            "report": _plain(result.report),
            "unmeasured": result.unmeasured, "parts": {k: dataclasses.asdict(v) for k, v in result.parts.items()},
            "parts_s": result.parts_s}


def read_result(cache: ResultCache, keys: TargetKeys, source: str, path: str, *, recompiles: bool,
                benchmark: bool) -> Optional[TargetResult]:
    """The whole answer for one target, or None when any asked-for part is missing."""
    result = read_trace(cache, keys, source, path)
    if result is None or result.status != "ok":
        return result
    if recompiles:
        swept = read_sweep(cache, keys, source, path)
        if swept is None:
            return None
        result = with_recompiles(result, swept)
    if benchmark:
        figures = read_bench(cache, keys)
        if figures is None:
            return None
        result = dataclasses.replace(result, benchmark=figures)
        deployment = read_deployment(cache, keys)
        if deployment is not None:
            result = with_deployment(result, deployment)
        result = with_phase(result, "measure", "done")
    return result


def settled(result: TargetResult, phase: str) -> bool:
    """Did `phase` of `result` end with an answer about the code (done, or failed in user code)?
    Not run, or ended by the worker dying: no."""
    state = phase_of(result, phase)
    if state is None or state.status == "not-run":
        return False
    failed = state.error or (result.error if phase == "trace" else None)
    return failed is None or failed.kind not in WORKER_FAILURES


def write_trace(cache: ResultCache, keys: TargetKeys, result: TargetResult, source: str) -> bool:
    """Store the trace part of `result` (run on `source`) once it is settled; True if stored."""
    if not settled(result, "trace"):
        return False
    trace = dataclasses.replace(result, recompiles=[], benchmark=None, export=None, fallback_ops=[], report=None,
                                unmeasured={}, bug_reports=[], levers=[],
                                phases=[p for p in result.phases if p.name == "trace"])
    cache.put(keys.trace, "trace", anchored(dataclasses.asdict(trace), keys.root), source)
    return True


def write_sweep(cache: ResultCache, keys: TargetKeys, result: TargetResult, source: str) -> bool:
    """Store the recompiles of a finished sweep (run on `source`); True if stored."""
    sweep = phase_of(result, "sweep")
    if sweep is None or sweep.status != "done":
        return False
    cache.put(keys.sweep, "sweep", anchored([dataclasses.asdict(r) for r in result.recompiles], keys.root), source)
    return True


FIGURE_PARTS = ("forward", "train_step", "memory", "lines")  # the benchmark's own parts (`protocol.PARTS`)


def write_bench(cache: ResultCache, keys: TargetKeys, result: TargetResult) -> bool:
    """Store the figures of `result`, once they are in; True if stored. Figures measured without the
    remote cache they were asked with (it did not answer) are not: once it answers, they are measured again."""
    if result.benchmark is None or result.status != "ok":
        return False
    if any(state.status == "pending" for name, state in result.parts.items() if name in FIGURE_PARTS):
        return False  # the forward landed first: the figures are stored once the train step, memory and lines have
    if keys.remote is not None and result.benchmark.compile_s.warm_remote is None:
        return False
    cache.put(keys.bench, "bench", anchored(dataclasses.asdict(result.benchmark), keys.root))
    return True


def write_deployment(cache: ResultCache, keys: TargetKeys, result: TargetResult) -> bool:
    """Store the deployment answers, which come after the figures in the same phase, once it is done."""
    measure = phase_of(result, "measure")
    if result.benchmark is None or measure is None or measure.status != "done":
        return False
    cache.put(keys.deploy, "deploy", anchored(deployment_of(result), keys.root))
    return True


class ResultWriter:
    """Writes a running job's results as the worker sends them, each phase once it is settled (the
    phases a result carries say which): the trace, the recompile sweep, the figures; the
    deployment answers each time they come (they follow the figures)."""

    def __init__(self, cache: ResultCache, keys: Mapping[str, TargetKeys], source: str):
        self.cache, self.keys, self.source = cache, keys, source
        self.stored: set[tuple[str, str]] = set()  # (target, phase)

    def __call__(self, result: TargetResult) -> None:
        keys = self.keys.get(result.name)
        if keys is None:
            return
        for phase, write in (("trace", lambda: write_trace(self.cache, keys, result, self.source)),
                             ("sweep", lambda: write_sweep(self.cache, keys, result, self.source))):
            if (result.name, phase) not in self.stored and write():
                self.stored.add((result.name, phase))
        # the figures grow until the measure phase ends (drift, the warm-remote compile): each event's kept
        if (result.name, "bench") not in self.stored and write_bench(self.cache, keys, result) and \
                settled(result, "measure"):
            self.stored.add((result.name, "bench"))
        write_deployment(self.cache, keys, result)
        if (result.name, LEVERS) not in self.stored and write_levers(self.cache, keys, result):
            self.stored.add((result.name, LEVERS))
