"""The language server: documents in, diagnostics, lenses, hints and hovers out. Never imports torch.

Static lints run on every change, in this process. Traces run in a warm worker on open and save;
their results are published per target as they arrive, and only while they still describe the
code in the editor. Benchmarks run in a second worker lane, after the traces, one at a time.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import dataclasses
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

import psutil
from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from . import __version__
from .analysis import analyze_file, forget_lints, safe_lint
from .cache import ResultCache, default_cache_dir, target_key
from .config import ProjectConfig, find_root, load_project_config
from .discovery import Discovery, compile_call_sites, dependency_fingerprint, discover
from .features import code_actions, report
from .inputs import resolve_inputs
from .pool import WorkerGone, WorkerSlot, default_python, kill_tree, worker_env
from .positions import position_map, remap_finding, remap_result
from .protocol import (
    Benchmark,
    Finding,
    Problem,
    Recompile,
    TargetResult,
    TargetSpec,
    from_dict,
    phase_of,
    with_phase,
)
from .record import load_recorded
from .render import benchmark_view as view
from .render import findings as fnd
from .render.lsp import to_diagnostic, to_range, uri_of
from .settings import Settings

log = logging.getLogger("compile_lens")

STATUS = "compileLens/status"
# Commands the VS Code extension runs itself (it lists them in `clientCommands`); other clients
# never get them: they would answer "command not defined".
SHOW_OUTPUT = "compileLens.showOutput"
SHOW_REPORT = "compileLens.showReport"
WORKER_FAILURES = ("crash", "timeout", "memory", "exit")
BIG_FILE_CHARS = 60_000  # ≈ 1,500 lines: above this, a keystroke does not wait for a full parse
STREAM_PUBLISH_S = 0.1  # while a file's targets stream in, publish at most this often
FOLLOWUP_DELAY_S = 1.0  # sweeps and measurements wait this long after a trace: rapid saves skip them


def _torch_version() -> Optional[str]:
    """torch's version from its metadata: a cache key without importing torch here."""
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # noqa: BLE001
        return None


@dataclass
class Saved:
    """The file as last saved: what the worker imports, and what the results describe."""

    source: str
    discovery: Discovery
    deps_fingerprint: str = ""
    deps: list[str] = field(default_factory=list)
    path: str = ""  # results name this file (break and guard paths): part of their cache key


@dataclass
class DocState:
    """What is known about one open file."""

    uri: str
    path: str
    lints: list[Finding] = field(default_factory=list)
    discovery: Optional[Discovery] = None  # of the current buffer (None: does not parse)
    saved: Optional[Saved] = None  # what the results below were computed from
    traced: dict[str, TargetResult] = field(default_factory=dict)
    problem: Optional[Problem] = None  # file-level: import failed / worker died
    benchmarks: dict[str, Benchmark] = field(default_factory=dict)
    measuring: set[str] = field(default_factory=set)
    pending_measure: set[str] = field(default_factory=set)  # asked for before the trace finished
    open: bool = True
    wanted: bool = False  # a save arrived that is not traced yet
    runner: Optional[asyncio.Task] = None
    bench_tasks: list[asyncio.Task] = field(default_factory=list)  # sweeps and measurements, in order
    discovery_stale: bool = False  # the buffer changed and has not been re-parsed yet (big files)
    rediscover: Optional[asyncio.TimerHandle] = None
    last_stream_publish: float = 0.0


class CompileLensServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("compile-lens", __version__)
        self.settings = Settings()
        self.trusted = True
        self.root: str = os.getcwd()  # the first workspace folder: the workers' cwd
        self.folders: list[str] = []  # every workspace folder; each file's root is found inside its own
        self.client_commands: set[str] = set()  # commands the client runs itself (initialization option)
        self.docs: dict[str, DocState] = {}
        self.foreign: dict[str, dict[str, list[Finding]]] = {}  # helper uri -> origin uri -> findings
        self.traces: Optional[WorkerSlot] = None
        self.bench: Optional[WorkerSlot] = None
        self.runtime: dict[str, Any] = {}
        self.torch_version = _torch_version()
        self.cache_dir = default_cache_dir()
        self.cache = ResultCache(self.cache_dir)
        self.state = "starting"
        self._sources: Optional[tuple] = None  # (when, pyproject configs by folder, recorded runs)
        self.stats = {"traces": 0, "sweeps": 0, "benchmarks": 0, "trace_cache_hits": 0, "sweep_cache_hits": 0,
                      "bench_cache_hits": 0}

    # --- status ---------------------------------------------------------------------------

    def status(self, state: str, detail: str = "") -> None:
        self.state = state
        self.protocol.notify(STATUS, {
            "state": state, "detail": detail, "torch": self.runtime.get("torch") or self.torch_version,
            "device": self._device_label(), "interpreter": default_python(),
        })

    def _device_label(self) -> Optional[str]:
        if not self.runtime:
            return None
        if self.settings.device == "cpu" or not self.runtime.get("cuda"):
            return "cpu"
        return f"cuda ({self.runtime.get('device_name')})"

    # --- workers --------------------------------------------------------------------------

    def root_for(self, path: str) -> str:
        """A file's workspace root, found as the CLI finds it (`config.find_root`), inside the
        workspace folder that holds it: a nested project's pyproject targets and recorded inputs."""
        here = os.path.abspath(path)
        inside = [f for f in self.folders if here.startswith(f.rstrip(os.sep) + os.sep)]
        return find_root(here, max(inside, key=len) if inside else (self.root if not self.folders else None))

    def _slot(self, name: str, **kwargs: Any) -> WorkerSlot:
        slot = WorkerSlot(name, default_python(), self.root, worker_env(self.cache_dir), **kwargs)
        slot.on_output = lambda text: log.info("user code output (%s):\n%s", name, text)
        return slot

    def start_workers(self) -> None:
        if not self.trusted or self.traces is not None:
            return
        self.traces = self._slot("trace")
        self.traces.warm_up(self.settings.timeout_s)
        asyncio.get_running_loop().create_task(self._announce_worker())

    async def _announce_worker(self) -> None:
        assert self.traces is not None
        self.status("starting", "starting the torch worker")
        try:
            self.runtime = await self.traces.info(self.settings.timeout_s)
        except WorkerGone as gone:
            state = "no-torch" if gone.problem.kind == "no-torch" else "error"
            log.error("worker did not start: %s", gone.problem.message)
            self.status(state, gone.problem.message)
            return
        log.info("worker ready: torch %s, %s, imported in %ss", self.runtime.get("torch"),
                 self._device_label(), self.runtime.get("import_s"))
        self.status("idle", "ready")

    async def stop_workers(self) -> None:
        for slot in (self.traces, self.bench):
            if slot is not None:
                await slot.stop()
        self.traces = self.bench = None

    def worker_pids(self) -> list[int]:
        return [pid for slot in (self.traces, self.bench) if slot for pid in slot.pids()]

    # --- documents ------------------------------------------------------------------------

    def doc(self, uri: str) -> DocState:
        state = self.docs.get(uri)
        if state is None:
            state = self.docs[uri] = DocState(uri, to_fs_path(uri) or uri)
        return state

    def relint(self, uri: str) -> None:
        """Lint the buffer and publish at once (no debounce): lints are incremental and cheap.

        Finding the targets needs a full parse (≈ 40 ms per 5,000 lines here). Small files get it
        at once; a big one publishes its lints first and is re-checked just after, its trace
        results hidden meanwhile unless the buffer is exactly the traced code.
        """
        state = self.doc(uri)
        document = self.workspace.get_text_document(uri)
        lints = safe_lint(document.source, state.path)
        if lints is not None:  # None: mid-typing syntax error; keep what was shown
            state.lints = lints
        if state.rediscover is not None:
            state.rediscover.cancel()
            state.rediscover = None
        if len(document.source) < BIG_FILE_CHARS:
            state.discovery, state.discovery_stale = self._discover(state.path, document.source), False
        else:
            state.discovery_stale = True
            state.rediscover = asyncio.get_running_loop().call_later(0.05, self._rediscover, uri)
        self.publish(uri)

    def _rediscover(self, uri: str) -> None:
        state = self.docs.get(uri)
        if state is None or not state.open:
            return
        state.rediscover = None
        state.discovery, state.discovery_stale = self._discover(state.path, self.workspace.get_text_document(uri).source), False
        self.publish(uri)

    def _discover(self, path: str, source: str) -> Optional[Discovery]:
        """Targets of a file, each with its inputs from the best source: a directive, pyproject.toml,
        a recorded run (`compile-lens record`), or the guess from its first layer."""
        found = discover(source)
        if found is not None:
            config, recorded, root_of = self._input_sources()
            root = root_of(path)
            found.targets = resolve_inputs(path, root, found.targets, source=source,
                                           config=config(path), recorded=recorded(root))
        return found

    def _input_sources(self):
        """pyproject.toml and .compile-lens/recorded.json, re-read at most every 2 s (not per keystroke)."""
        now = time.monotonic()
        if self._sources is None or now - self._sources[0] > 2.0:
            configs: dict[str, ProjectConfig] = {}
            roots: dict[str, str] = {}
            runs: dict[str, Any] = {}

            def root_of(path: str) -> str:
                folder = os.path.dirname(path)
                if folder not in roots:
                    roots[folder] = self.root_for(path)
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

            self._sources = (now, config, recorded, root_of)
        return self._sources[1], self._sources[2], self._sources[3]

    def _read_saved(self, state: DocState) -> Optional[Saved]:
        try:
            with open(state.path, encoding="utf-8") as f:
                source = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("cannot read %s: %s", state.path, exc)
            return None
        found = self._discover(state.path, source)
        if found is None:
            return None
        deps_fp, deps = dependency_fingerprint(state.path, source, self.root_for(state.path))
        return Saved(source, found, deps_fp, deps, os.path.realpath(state.path))

    def schedule_trace(self, uri: str) -> None:
        state = self.doc(uri)
        if not self.trusted:
            return
        state.wanted = True
        if state.runner is None or state.runner.done():
            state.runner = asyncio.get_running_loop().create_task(self._trace_loop(state))

    async def _trace_loop(self, state: DocState) -> None:
        """Trace the newest saved version; saves that arrive meanwhile collapse into one."""
        while state.open and state.wanted:
            state.wanted = False
            saved = self._read_saved(state)
            if saved is None or self.traces is None:
                self.publish(state.uri)
                return
            if state.saved and state.saved.discovery.fingerprint == saved.discovery.fingerprint \
                    and state.saved.deps_fingerprint == saved.deps_fingerprint and not state.problem:
                # same code as before (a comment or whitespace edit): nothing re-runs, positions move
                self._rebase(state, saved)
                continue
            try:
                await self._trace_once(state, saved)
            except Exception:  # noqa: BLE001 - keep the server alive whatever happens
                log.exception("analysis of %s failed", state.path)
                self.status("error", f"analysis of {os.path.basename(state.path)} failed; see the log")

    def _rebase(self, state: DocState, saved: Saved) -> None:
        assert state.saved is not None
        mapping = position_map(state.saved.source, saved.source)
        if mapping is not None:
            here = self._same_file(state.path)
            state.traced = {k: remap_result(r, mapping, here) for k, r in state.traced.items()}
        state.saved = saved
        self._show_trace(state)

    @staticmethod
    def _same_file(path: str):
        return lambda other: fnd.same_file(other, path)

    def _key(self, kind: str, saved: Saved, spec: TargetSpec, *extra: Any) -> str:
        return target_key(kind, self.torch_version, saved.path, saved.discovery.fingerprint, saved.deps_fingerprint,
                          spec, *extra)

    def _cached(self, kind: str, key: str, saved: Saved, path: str) -> Optional[Any]:
        hit = self.cache.get(key)
        if hit is None:
            return None
        value, source, _created = hit
        if kind == "trace":
            result = from_dict(TargetResult, value)
            if source and source != saved.source:
                mapping = position_map(source, saved.source)
                if mapping is None:
                    return None
                result = remap_result(result, mapping, self._same_file(path))
            return result
        return from_dict(Benchmark, value)

    async def _trace_once(self, state: DocState, saved: Saved) -> None:
        assert self.traces is not None
        started = time.perf_counter()
        fresh: dict[str, TargetResult] = {}
        keys = {t.name: self._key("trace", saved, t) for t in saved.discovery.targets if t.inputs}
        for name, key in keys.items():
            cached = self._cached("trace", key, saved, state.path)
            if cached is not None:
                fresh[name] = cached
                self.stats["trace_cache_hits"] += 1

        benchmarks = self._cached_benchmarks(saved, state.path)
        specs = {t.name: t for t in saved.discovery.targets}
        spec_of = specs.get
        state.last_stream_publish = 0.0  # the first target's result goes out the moment it arrives

        def current() -> bool:
            return state.open and self._matches(state, saved)

        def accept(results: dict[str, TargetResult], problem: Optional[Problem]) -> None:
            if state.saved is not saved:
                state.benchmarks = dict(benchmarks)
            state.traced, state.saved, state.problem = dict(results), saved, problem
            for name in state.benchmarks:  # export and fallback answers were measured with the figures
                hit = self.cache.get(self._bench_key(saved, spec_of(name)) + ":deploy") if spec_of(name) else None
                if hit is not None:
                    self._set_deployment(state, name, hit[0])
            state.last_stream_publish = time.monotonic()
            self._show_trace(state)

        def on_target(result: TargetResult) -> None:
            fresh[result.name] = result
            # stream: show this target's breaks while the next one is traced (then write the cache)
            if current() and time.monotonic() - state.last_stream_publish > STREAM_PUBLISH_S:
                accept(fresh, None)
            if result.error is None or result.error.kind not in WORKER_FAILURES:
                self.cache.put(keys[result.name], "trace", dataclasses.asdict(result), saved.source)

        todo = {name for name in keys if name not in fresh}
        problem = None
        if todo:
            self.status("tracing", os.path.basename(state.path))
            self.stats["traces"] += 1
            run = await analyze_file(self.traces, state.path, self.root_for(state.path), saved.discovery, self.settings,
                                     on_target=on_target, only=todo, recompiles=False,
                                     on_progress=lambda stage, target: self.status("tracing", stage))
            problem = run.problem
        if not current():
            log.info("dropped results for %s: the file changed during the trace", state.path)
            self.status("idle")
            return
        accept(fresh, problem)
        log.info("traced %s: %d targets (%d from cache) in %.2fs", os.path.basename(state.path),
                 len(fresh), len(fresh) - len(todo), time.perf_counter() - started)
        self.status("error" if problem else "idle", problem.message if problem else "")
        ok = {n for n, r in fresh.items() if r.status == "ok"}
        sweep = {n for n in ok if not self._merge_cached_sweep(state, saved, n)}
        if sweep != ok:
            self.publish(state.uri)  # recompile warnings from the cache
        measure = {n for n in ok if n not in state.benchmarks} if self.settings.benchmark_on_save else set()
        asked = state.pending_measure & ok  # "Measure" clicked before the trace was done
        state.measuring -= state.pending_measure
        state.pending_measure = set()
        measure |= asked
        self.schedule_followups(state, saved, sweep=sweep, measure=measure, delay=FOLLOWUP_DELAY_S,
                                replace=True)

    # --- benchmarks -----------------------------------------------------------------------

    def _bench_key(self, saved: Saved, spec: TargetSpec) -> str:
        return self._key("bench-paired", saved, spec, self.settings.device, self.settings.mode)  # figures with intervals

    def _cached_benchmarks(self, saved: Saved, path: str) -> dict[str, Benchmark]:
        found = {}
        for spec in saved.discovery.targets:
            if spec.inputs is not None:
                cached = self._cached("bench", self._bench_key(saved, spec), saved, path)
                if cached is not None:
                    found[spec.name] = cached
                    self.stats["bench_cache_hits"] += 1
        return found

    def _deep_lane(self) -> WorkerSlot:
        """Recompile sweeps and measurements: a second worker, so traces never wait behind them."""
        if self.bench is None:
            self.bench = self._slot("deep", spare=False, recycle_after=20)
        return self.bench

    def _sweep_key(self, saved: Saved, spec: TargetSpec) -> str:
        return self._key("sweep", saved, spec)

    def _merge_cached_sweep(self, state: DocState, saved: Saved, name: str) -> bool:
        spec = next(t for t in saved.discovery.targets if t.name == name)
        hit = self.cache.get(self._sweep_key(saved, spec))
        if hit is None or name not in state.traced:
            return False
        self.stats["sweep_cache_hits"] = self.stats.get("sweep_cache_hits", 0) + 1
        self._set_recompiles(state, name, [from_dict(Recompile, r) for r in hit[0]], hit[1], saved)
        return True

    def _set_deployment(self, state: DocState, name: str, deployment: dict) -> None:
        if name in state.traced:
            state.traced[name] = dataclasses.replace(
                state.traced[name], export=deployment.get("export"),
                fallback_ops=deployment.get("fallback_ops") or [], report=deployment.get("report"))

    def _set_recompiles(self, state: DocState, name: str, recompiles: list, source: Optional[str], saved: Saved) -> None:
        """Attach a sweep's recompiles (found on `source`) to the traced result (on `saved`)."""
        if source and source != saved.source:
            mapping = position_map(source, saved.source)
            if mapping is not None:
                moved = remap_result(TargetResult(name, "", 0, recompiles=recompiles), mapping, self._same_file(state.path))
                recompiles = moved.recompiles
        state.traced[name] = with_phase(dataclasses.replace(state.traced[name], recompiles=recompiles), "sweep", "done")

    def schedule_followups(self, state: DocState, saved: Saved, *, sweep: set[str], measure: set[str],
                           delay: float = 0.0, replace: bool = False) -> None:
        """Recompile sweeps, then measurements, after `delay`. `replace`: what was queued for older
        code is dropped (a running measurement of it is stopped)."""
        if replace:  # everything queued for older code goes, a running measurement of it too
            for task in state.bench_tasks:
                task.cancel()
            state.bench_tasks = []
            state.measuring.clear()
        if not self.trusted or not (sweep or measure):
            return
        previous = state.bench_tasks[-1] if state.bench_tasks else None
        measure = measure - state.measuring
        state.measuring |= measure

        async def run() -> None:
            if previous is not None:
                await asyncio.wait({previous})  # in order; its failure is its own, our cancel is ours
            try:
                await asyncio.sleep(delay)
                if sweep:
                    await self._sweep_once(state, saved, sweep)
                if measure:
                    await self._benchmark_once(state, saved, measure)
            except asyncio.CancelledError:
                raise
            except WorkerGone as gone:
                log.warning("sweep/measurement of %s stopped: %s", state.path, gone.problem.message)
            except Exception:  # noqa: BLE001 - a background task must say why it died
                log.exception("sweep/measurement of %s failed", state.path)
            finally:
                state.measuring -= measure
                self._refresh_views()

        task = asyncio.get_running_loop().create_task(run())
        state.bench_tasks = [t for t in state.bench_tasks if not t.done()] + [task]
        log.debug("queued for %s: sweep %s, measure %s (replace=%s)", os.path.basename(state.path),
                  sorted(sweep), sorted(measure), replace)
        if measure:
            self._refresh_views()

    async def _sweep_once(self, state: DocState, saved: Saved, names: set[str]) -> None:
        def on_target(result: TargetResult) -> None:
            sweep = phase_of(result, "sweep")
            if result.status != "ok" or sweep is None:
                return  # the trace already said why it cannot run
            here = _same_code(state.saved, saved) and result.name in state.traced
            if sweep.status != "done":  # failed or not run: said on the target, never cached
                if here:
                    state.traced[result.name] = with_phase(state.traced[result.name], "sweep", sweep.status, sweep.error)
                    self.publish(state.uri)
                return
            spec = next(t for t in saved.discovery.targets if t.name == result.name)
            self.cache.put(self._sweep_key(saved, spec), "sweep",
                           [dataclasses.asdict(r) for r in result.recompiles], saved.source)
            if here:
                self._set_recompiles(state, result.name, result.recompiles, saved.source, state.saved)
                self.publish(state.uri)

        self.status("tracing", f"checking recompiles in {os.path.basename(state.path)}")
        self.stats["sweeps"] = self.stats.get("sweeps", 0) + 1
        await analyze_file(self._deep_lane(), state.path, self.root_for(state.path), saved.discovery, self.settings,
                           trace=False, recompiles=True, only=names, on_target=on_target)
        self.status("idle")

    async def _benchmark_once(self, state: DocState, saved: Saved, names: set[str]) -> None:
        token = str(uuid.uuid4())
        progress = self.work_done_progress
        window = self.client_capabilities.window
        shown = bool(window and window.work_done_progress)  # only a client that said it can show progress
        if shown:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(progress.create_async(token), 5)
            progress.begin(token, lsp.WorkDoneProgressBegin(title="Compile Lens", message="measuring torch.compile…",
                                                            cancellable=False))

        def on_progress(stage: str, target: Optional[str]) -> None:
            if shown:
                progress.report(token, lsp.WorkDoneProgressReport(message=stage))
            self.status("benchmarking", stage)

        def on_target(result: TargetResult) -> None:
            state.measuring.discard(result.name)
            spec = next(t for t in saved.discovery.targets if t.name == result.name)
            log.info("measured %s: %s", result.name, view.lens_title(result.benchmark) if result.benchmark
                     else (result.error.message if result.error else "no figures"))
            measured = phase_of(result, "measure")
            if result.benchmark is not None:
                self.cache.put(self._bench_key(saved, spec), "bench", dataclasses.asdict(result.benchmark))
                deployment = {"export": result.export, "fallback_ops": result.fallback_ops, "report": result.report}
                self.cache.put(self._bench_key(saved, spec) + ":deploy", "deploy", deployment)
                if _same_code(state.saved, saved):
                    state.benchmarks[result.name] = result.benchmark
                    self._set_deployment(state, result.name, deployment)
            if measured is not None and _same_code(state.saved, saved) and result.name in state.traced:
                # the measurement's own outcome: a failure never hides what the trace found
                state.traced[result.name] = with_phase(state.traced[result.name], "measure", measured.status,
                                                       measured.error)
            if result.benchmark is not None or measured is not None:
                self.publish(state.uri)
            self._refresh_views()

        for name in names & set(state.traced):  # a new measurement replaces the last one's outcome
            state.traced[name] = dataclasses.replace(
                state.traced[name], phases=[p for p in state.traced[name].phases if p.name != "measure"])
        try:
            self.stats["benchmarks"] += 1
            await analyze_file(self._deep_lane(), state.path, self.root_for(state.path), saved.discovery, self.settings,
                               benchmark=True, trace=False, recompiles=False, only=names,
                               on_target=on_target, on_progress=on_progress)
        except asyncio.CancelledError:
            log.info("measurement of %s cancelled: the file changed", os.path.basename(state.path))
            raise
        finally:
            if shown:
                progress.end(token, lsp.WorkDoneProgressEnd(message="done"))
            self.status("idle")

    def _refresh_views(self) -> None:
        """Ask the client to re-request code lenses and inlay hints (when it supports that)."""
        caps = self.client_capabilities.workspace
        if caps and caps.code_lens and caps.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)
        if caps and caps.inlay_hint and caps.inlay_hint.refresh_support:
            self.workspace_inlay_hint_refresh(None)

    def close(self, uri: str) -> None:
        state = self.docs.pop(uri, None)
        if state is not None:
            state.open = False
            for task in [state.runner, *state.bench_tasks]:
                if task and not task.done():
                    task.cancel()
            forget_lints(state.path)
        self.refresh_foreign(uri, {})  # its targets' breaks leave the helper files too
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    # --- publishing -----------------------------------------------------------------------

    def _is_current(self, state: DocState) -> bool:
        """Do the results describe the code in the editor (comments and formatting aside)?"""
        return state.saved is not None and self._matches(state, state.saved)

    def _matches(self, state: DocState, saved: Saved) -> bool:
        if state.discovery_stale:  # not re-parsed yet: only an identical buffer is known to match
            return self.workspace.get_text_document(state.uri).source == saved.source
        return state.discovery is not None and saved.discovery.fingerprint == state.discovery.fingerprint

    def _traced_findings(self, state: DocState) -> tuple[list[Finding], dict[str, list[Finding]], list[tuple[int, int]]]:
        """Trace findings for this file, for other files (helpers), and the lines traced cleanly."""
        here: list[Finding] = []
        elsewhere: dict[str, list[Finding]] = {}
        covered: list[tuple[int, int]] = []
        if not self._is_current(state) or state.saved is None:
            return here, elsewhere, covered  # results of older code are never shown as current
        specs = {t.name: t for t in state.saved.discovery.targets}
        for result in state.traced.values():
            if result.name in state.benchmarks:  # accuracy warnings and Inductor compile costs
                result = dataclasses.replace(result, benchmark=state.benchmarks[result.name])
            for f in fnd.target_findings(result, state.path):
                if fnd.same_file(f.path, state.path):
                    here.append(f)
                elif _in_workspace(f.path, self.root_for(state.path)):  # a library's own file gets no squiggles
                    elsewhere.setdefault(uri_of(f.path), []).append(f)
            spec = specs.get(result.name)
            if spec is not None and result.status == "ok":
                covered.append((spec.line, spec.end_line or spec.line))
        if state.problem is not None:
            code = fnd.CODE_WORKER if state.problem.kind in WORKER_FAILURES else fnd.CODE_IMPORT
            here.append(fnd.problem_finding(state.problem, state.path, 1, code, "error"))
        return here, elsewhere, covered

    def _buffer_map(self, state: DocState):
        """Positions from the saved source to the buffer, when they differ only in comments/format."""
        if state.saved is None:
            return None
        source = self.workspace.get_text_document(state.uri).source
        return None if source == state.saved.source else position_map(state.saved.source, source)

    def findings_for(self, state: DocState) -> list[Finding]:
        """Lints merged with trace results, plus breaks other files' targets hit in this one."""
        traced, _, covered = self._traced_findings(state)
        mapping = self._buffer_map(state) if traced or covered else None
        if mapping is not None:
            here = self._same_file(state.path)
            traced = [remap_finding(f, mapping, here) for f in traced]
            covered = [(mapping.line(a), mapping.line(b)) for a, b in covered]
        targets = state.discovery.targets if state.discovery else []
        statics = [f for t in targets for f in fnd.static_target_findings(t, state.path, runs=self.trusted)]
        statics += [Finding(state.path, e.line, 1, e.line, 1, "warning", fnd.CODE_DIRECTIVE, e.message)
                    for e in (state.discovery.errors if state.discovery else [])]
        merged = fnd.merge_with_lints(state.lints, traced, covered) + statics
        return merged + [f for found in self.foreign.get(state.uri, {}).values() for f in found]

    def _show_trace(self, state: DocState) -> None:
        self.publish(state.uri)
        self.refresh_foreign(state.uri, self._traced_findings(state)[1])
        self._refresh_views()

    def refresh_foreign(self, origin: str, by_uri: dict[str, list[Finding]]) -> None:
        """Breaks found inside helpers in other files are shown on those files too."""
        touched = {uri for uri, origins in self.foreign.items() if origin in origins} | set(by_uri)
        for uri in touched - {origin}:
            origins = self.foreign.setdefault(uri, {})
            if uri in by_uri:
                origins[origin] = by_uri[uri]
            else:
                origins.pop(origin, None)
            if uri in self.docs:
                self.publish(uri)
            else:
                found = [f for o in origins.values() for f in o]
                self._send(uri, None, found, _read_lines(to_fs_path(uri) or uri))

    def publish(self, uri: str) -> None:
        state = self.docs.get(uri)
        if state is None or not state.open:
            return  # closed: nothing is ever published for it again
        document = self.workspace.get_text_document(uri)
        self._send(uri, document.version, self.findings_for(state), document.source.splitlines())

    def _send(self, uri: str, version: Optional[int], found: list[Finding], lines: list[str]) -> None:
        diagnostics, seen = [], set()
        for f in found:
            f = fnd.whole_line(f, lines)
            key = (f.line, f.column, f.code, f.message)
            if key in seen or fnd.suppressed(f, lines):
                continue
            seen.add(key)
            diagnostics.append(to_diagnostic(f))
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=uri, version=version, diagnostics=diagnostics))

    # --- lenses, hints, hovers (answered from memory: never wait for torch) ---------------

    def _targets_in_buffer(self, state: DocState) -> list[TargetSpec]:
        return state.discovery.targets if state.discovery else []

    def _confirmed(self, state: DocState, spec: TargetSpec) -> bool:
        """A target to show a lens or card for: a class whose base the source could not place only
        once the worker found it is an nn.Module."""
        result = state.traced.get(spec.name) if self._is_current(state) else None
        if result is not None and result.status == "skipped":
            return False
        return not spec.maybe_module or result is not None

    def code_lenses(self, uri: str) -> list[lsp.CodeLens]:
        state = self.docs.get(uri)
        if state is None or not self.trusted:
            return []
        lenses = []
        for spec in self._targets_in_buffer(state):
            if spec.inputs is None or not self._confirmed(state, spec):
                continue
            rng = to_range(spec.line, 1, spec.line, 1)
            bench = state.benchmarks.get(spec.name) if self._is_current(state) else None
            if spec.name in state.measuring:
                # the log, where the client has it; else the server's own command (says "measuring")
                title = "⏳ measuring torch.compile…"
                command = SHOW_OUTPUT if SHOW_OUTPUT in self.client_commands else "compileLens.measure"
            elif bench is not None:
                title, command = view.lens_title(bench), "compileLens.measure"
            else:
                title, command = "▶ Measure torch.compile speedup", "compileLens.measure"
            lenses.append(lsp.CodeLens(range=rng, command=lsp.Command(title=title, command=command, arguments=[uri, spec.name])))
        return lenses

    def inlay_hints(self, uri: str, rng: lsp.Range) -> list[lsp.InlayHint]:
        state = self.docs.get(uri)
        if state is None or not self._is_current(state) or not state.benchmarks:
            return []
        try:
            tree = ast.parse(self.workspace.get_text_document(uri).source)
        except (SyntaxError, ValueError):
            return []
        hints = []
        for site in compile_call_sites(tree, {t.name for t in self._targets_in_buffer(state)}):
            bench = state.benchmarks.get(site.target)
            if bench is None or not (rng.start.line <= site.end_line - 1 <= rng.end.line):
                continue
            hints.append(lsp.InlayHint(
                position=lsp.Position(site.end_line - 1, site.end_column - 1),
                label=" " + view.hint_label(bench), kind=lsp.InlayHintKind.Type, padding_left=True,
                tooltip=view.lens_title(bench)))
        return hints

    def hover(self, uri: str, position: lsp.Position) -> Optional[lsp.Hover]:
        state = self.docs.get(uri)
        if state is None:
            return None
        line = position.line + 1
        name = None
        for spec in self._targets_in_buffer(state):
            if spec.line == line and spec.column - 1 <= position.character <= spec.end_column - 1 \
                    and self._confirmed(state, spec):
                name = spec.name
        if name is None:
            try:
                tree = ast.parse(self.workspace.get_text_document(uri).source)
            except (SyntaxError, ValueError):
                return None
            for site in compile_call_sites(tree, {t.name for t in self._targets_in_buffer(state)}):
                if site.line <= line <= site.end_line:
                    name = site.target
        if name is None:
            return None
        spec = next(t for t in self._targets_in_buffer(state) if t.name == name)
        result = state.traced.get(name) if self._is_current(state) else None
        result = result or TargetResult(spec.name, spec.kind, spec.line, inputs=spec.inputs)
        bench = state.benchmarks.get(name) if self._is_current(state) else None
        report_line = view.REPORT_LINK if SHOW_REPORT in self.client_commands else \
            view.report_hint(os.path.relpath(state.path, self.root_for(state.path)))
        card = view.hover_card(result, bench, guessed_inputs=bool(spec.inputs and spec.inputs.source == "inferred"),
                               measuring=name in state.measuring, report=report_line)
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=card))


def _in_workspace(path: str, root: str) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real.startswith(top + os.sep) and "site-packages" not in real


def _same_code(a: Optional[Saved], b: Optional[Saved]) -> bool:
    """Two saves of the same code (comments and formatting aside): results of one hold for the other."""
    return a is not None and b is not None and a.discovery.fingerprint == b.discovery.fingerprint \
        and a.deps_fingerprint == b.deps_fingerprint


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except OSError:
        return []


server = CompileLensServer()


def _watch_client(pid: int) -> None:
    """pygls does not watch the client's process: exit (killing workers) when it is gone."""

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if not psutil.pid_exists(pid):
                log.info("client process %s is gone: exiting", pid)
                for worker_pid in server.worker_pids():
                    kill_tree(worker_pid)
                os._exit(0)

    threading.Thread(target=watch, name="client-watch", daemon=True).start()


@server.feature(lsp.INITIALIZE)
def initialize(ls: CompileLensServer, params: lsp.InitializeParams) -> None:
    options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
    ls.trusted = bool(options.get("trusted", True))
    ls.settings, problems = Settings.from_client(options.get("settings", {}))
    for problem in problems:
        log.warning(problem)
    commands = options.get("clientCommands")
    ls.client_commands = {c for c in commands if isinstance(c, str)} if isinstance(commands, list) else set()
    folders = [p for p in (to_fs_path(f.uri) for f in params.workspace_folders or []) if p]
    if not folders and params.root_uri and to_fs_path(params.root_uri):
        folders = [to_fs_path(params.root_uri)]
    ls.folders = [os.path.abspath(f) for f in folders]
    if ls.folders:
        ls.root = ls.folders[0]
    if params.process_id:
        _watch_client(params.process_id)
    log.info("compile-lens %s: root %s, trusted=%s, torch %s, settings %s", __version__, ls.root, ls.trusted,
             ls.torch_version, ls.settings.as_client())


@server.feature(lsp.INITIALIZED)
def initialized(ls: CompileLensServer, params: lsp.InitializedParams) -> None:
    if ls.trusted:
        ls.start_workers()  # import torch now, before the first file opens
    else:
        ls.status("restricted", "untrusted workspace: static lints only, no code is run")


@server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: CompileLensServer, params: lsp.DidChangeConfigurationParams) -> None:
    raw = params.settings
    if isinstance(raw, dict):
        raw = raw.get("compileLens", raw.get("settings", raw))
    if not isinstance(raw, dict) or not raw:
        return  # eglot and nvim-lspconfig send their (empty) configuration on start: keep the init options
    # keys it does not name keep their value (VS Code sends them all; other clients may send a few)
    ls.settings, problems = Settings.from_client({**ls.settings.as_client(), **raw})
    for problem in problems:
        log.warning(problem)
    log.info("settings changed: %s", ls.settings.as_client())
    for state in ls.docs.values():  # figures are per device and mode: show the ones that apply now
        if state.saved is not None:
            state.benchmarks = ls._cached_benchmarks(state.saved, state.path)
            ls.publish(state.uri)
    ls._refresh_views()


@server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
def did_change_folders(ls: CompileLensServer, params: lsp.DidChangeWorkspaceFoldersParams) -> None:
    removed = {os.path.abspath(to_fs_path(f.uri) or "") for f in params.event.removed}
    added = [os.path.abspath(p) for p in (to_fs_path(f.uri) for f in params.event.added) if p]
    ls.folders = [f for f in ls.folders if f not in removed] + [f for f in added if f not in ls.folders]
    ls._sources = None  # roots, configs and recorded runs are found again


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: CompileLensServer, params: lsp.DidOpenTextDocumentParams) -> None:
    ls.doc(params.text_document.uri).open = True
    ls.relint(params.text_document.uri)
    ls.schedule_trace(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: CompileLensServer, params: lsp.DidChangeTextDocumentParams) -> None:
    ls.relint(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: CompileLensServer, params: lsp.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.relint(uri)
    ls.schedule_trace(uri)
    saved_path = os.path.realpath(to_fs_path(uri) or uri)
    for other in list(ls.docs.values()):  # files importing this one are re-traced too
        if other.uri != uri and other.saved and saved_path in other.saved.deps:
            ls.schedule_trace(other.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: CompileLensServer, params: lsp.DidCloseTextDocumentParams) -> None:
    ls.close(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
def code_lens(ls: CompileLensServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    return ls.code_lenses(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)
def inlay_hint(ls: CompileLensServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
    return ls.inlay_hints(params.text_document.uri, params.range)


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def hover(ls: CompileLensServer, params: lsp.HoverParams) -> Optional[lsp.Hover]:
    return ls.hover(params.text_document.uri, params.position)


@server.feature(lsp.SHUTDOWN)
async def shutdown(ls: CompileLensServer, params: Any) -> None:
    await ls.stop_workers()


@server.command("compileLens.analyzeFile")
def analyze_file_command(ls: CompileLensServer, uri: str) -> dict:
    if not ls.trusted:
        return {"started": False, "reason": "untrusted workspace: no code is run"}
    state = ls.doc(uri)
    state.saved = None  # force a fresh trace of the saved file
    ls.schedule_trace(uri)
    return {"started": True}


@server.command("compileLens.measure")
def measure_command(ls: CompileLensServer, uri: str, target: str) -> dict:
    if not ls.trusted:
        return {"started": False, "reason": "untrusted workspace: no code is run"}
    state = ls.docs.get(uri)
    if state is None:
        return {"started": False, "reason": "the file is not open"}
    if target in state.measuring:  # what the "⏳ measuring" lens runs in a client without the log command
        return {"started": False, "reason": f"measuring `{target}` already; the figures replace this lens when done"}
    if state.saved is None or target not in state.traced or not ls._is_current(state):
        if state.discovery is None or target not in {t.name for t in state.discovery.targets}:
            return {"started": False, "reason": f"no target `{target}` in this file"}
        state.pending_measure.add(target)  # measured right after the trace of the saved file
        state.measuring.add(target)
        ls.schedule_trace(uri)
        return {"started": True, "queued": True}
    if state.traced[target].status != "ok":
        return {"started": False, "reason": f"`{target}` cannot run: {state.traced[target].error.message}"}
    state.benchmarks.pop(target, None)
    ls.schedule_followups(state, state.saved, sweep=set(), measure={target})
    return {"started": True}


@server.command("compileLens.saveTrace")
async def save_trace_command(ls: CompileLensServer, uri: str, *where: str) -> dict:
    """Analyse the saved file again (trace + recompile sweep) with torch's structured trace on, for tlparse.

    Never from the cache: the trace is of a run that happens now. Default folder: under the cache
    folder, so nothing is written into the user's workspace unasked.
    """
    if not ls.trusted:
        return {"started": False, "reason": "untrusted workspace: no code is run"}
    state = ls.doc(uri)
    saved = ls._read_saved(state)
    if saved is None:
        return {"started": False, "reason": "the saved file cannot be read or parsed"}
    if not any(t.inputs is not None for t in saved.discovery.targets):
        return {"started": False, "reason": "nothing in this file can be run (no target with inputs)"}
    stem = os.path.splitext(os.path.basename(state.path))[0]
    # the folder is optional (the palette passes none); pygls wants every declared argument, hence *where
    directory = os.path.abspath((where[0] if where else "") or os.path.join(
        ls.cache_dir, "torch-trace", f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"))
    from .worker.torch_trace import trace_files  # torch-free: lists the folder

    ls.status("tracing", f"writing a torch trace of {os.path.basename(state.path)}")
    try:
        run = await analyze_file(ls._deep_lane(), state.path, ls.root_for(state.path), saved.discovery, ls.settings,
                                 trace=True, recompiles=True, trace_dir=directory)
    finally:
        ls.status("idle")
    files = trace_files(directory)
    answer: dict[str, Any] = {"started": True, "dir": directory, "files": files}
    if run.problem is not None:
        answer["problem"] = run.problem.message
    if not files:
        answer["reason"] = "torch wrote no trace (nothing was compiled, or this torch version cannot)"
    log.info("torch trace of %s: %s", state.path, files or "none written")
    return answer


# Commands without parameters accept (and ignore) arguments: some clients always send a list.
@server.command("compileLens.clearCache")
def clear_cache_command(ls: CompileLensServer, *args: Any) -> dict:
    removed = ls.cache.clear()
    log.info("cache cleared: %d results", removed)
    return {"removed": removed}


@server.command("compileLens.workerPids")
def worker_pids_command(ls: CompileLensServer, *args: Any) -> list[int]:
    return ls.worker_pids()


@server.command("compileLens.stats")
def stats_command(ls: CompileLensServer, *args: Any) -> dict:
    return {**ls.stats, "server_rss": psutil.Process().memory_info().rss, "worker_pids": ls.worker_pids()}


code_actions.register(server)
report.register(server)


def main() -> None:
    with contextlib.suppress(KeyboardInterrupt):
        server.start_io()
