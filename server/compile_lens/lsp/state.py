"""The server's typed state: settings, workspace folders, open documents, the two worker lanes,
the result cache, and the events the scheduler emits (the diagnostics feature subscribes).

Every handler gets this object (`ls: CompileLensServer`); features read it, never private members.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from .. import __version__
from ..config import find_root
from ..discovery import Discovery
from ..discovery.statements import StatementParser
from ..jobs.cache import ResultCache, cache_dir, torch_version
from ..jobs.lanes import WorkerGone, WorkerSlot, default_python, spare_by_default, worker_env
from ..jobs.template import Templates
from ..positions import PositionMap, position_map
from ..protocol import Benchmark, Finding, Problem, TargetResult, TargetSpec
from ..settings import Settings
from ..timeline import Timeline
from .gpu_gate import GpuGate
from .published import EncodedDiagnostics
from .wire import CompileLensProtocol

log = logging.getLogger("compile_lens")

STATUS = "compileLens/status"
# {uri, version, phase: traced|swept|measured, ok}: a phase of a saved version is done and its
# diagnostics are published; clients (and the tests) wait on it instead of polling
ANALYZED = "compileLens/analyzed"
# Commands the VS Code extension runs itself (it lists them in `clientCommands`); other clients
# never get them: they would answer "command not defined".
SHOW_OUTPUT = "compileLens.showOutput"
SHOW_REPORT = "compileLens.showReport"

# What the scheduler and the documents say happened to a file (by uri); the diagnostics feature
# publishes on them. "changed": lints or results of the buffer; "traced": a trace's results replaced
# the file's (helper files too); "swept" / "measured": a recompile check or measurement landed;
# "closed": the file was closed.
EVENTS = ("changed", "traced", "swept", "measured", "closed")


@dataclass
class Saved:
    """The file as last saved: what the worker imports, and what the results describe."""

    source: str
    discovery: Discovery
    deps_fingerprint: str = ""
    deps: list[str] = field(default_factory=list)
    path: str = ""  # results name this file (break and guard paths): part of their cache key
    version: Optional[int] = None  # the document version this text was saved at (None: not known)


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
    stalled: dict[str, str] = field(default_factory=dict)  # target -> where its quiet worker is (hover)
    # target -> its running measurement's latest result: the parts not measured yet (`render.progress_rows`)
    live: dict[str, TargetResult] = field(default_factory=dict)
    pending_measure: set[str] = field(default_factory=set)  # asked for before the trace finished
    open: bool = True
    wanted: bool = False  # a save arrived that is not traced yet
    runner: Optional[asyncio.Task] = None
    bench_tasks: list[asyncio.Task] = field(default_factory=list)  # sweeps and measurements, in order
    discovery_stale: bool = False  # the buffer changed and has not been re-parsed yet (big files)
    relint: Optional[asyncio.TimerHandle] = None  # a big file's lints, due in a few ms
    relint_free_at: float = 0.0  # loop time before which its next lint waits (as long as the last took)
    rediscover: Optional[asyncio.TimerHandle] = None
    rediscovering: Optional[threading.Event] = None  # set: the running discovery is superseded
    statements: Optional[StatementParser] = None  # a big file's chunks, parsed in the discovery thread
    last_stream_publish: float = 0.0
    saved_version: Optional[int] = None  # the document's version at its last save
    saved_text: Optional[str] = None  # and its text then: the file read later may be newer
    encoded: EncodedDiagnostics = field(default_factory=EncodedDiagnostics)  # as last published
    timeline: Optional[Timeline] = None  # open/save → the first trace publish with a break, when timelines are read (bench)


def same_code(a: Optional[Saved], b: Optional[Saved]) -> bool:
    """Two saves of the same code (comments and formatting aside): results of one hold for the other."""
    return a is not None and b is not None and a.discovery.fingerprint == b.discovery.fingerprint \
        and a.deps_fingerprint == b.deps_fingerprint


class CompileLensServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("compile-lens", __version__, protocol_cls=CompileLensProtocol)
        self.settings = Settings()
        self.trusted = True
        self.root: str = os.getcwd()  # the first workspace folder: the workers' cwd
        self.folders: list[str] = []  # every workspace folder; each file's root is found inside its own
        self.client_commands: set[str] = set()  # commands the client runs itself (initialization option)
        self.docs: dict[str, DocState] = {}
        self.foreign: dict[str, dict[str, list[Finding]]] = {}  # helper uri -> origin uri -> findings
        self.imported: dict[str, list[Finding]] = {}  # uri -> findings of an imported torch trace (kept apart)
        self.traces: Optional[WorkerSlot] = None
        self.bench: Optional[WorkerSlot] = None
        self.templates = Templates()  # the torch-imported process both lanes' workers are forked from
        self.runtime: dict[str, Any] = {}
        self.torch_version = torch_version()
        self.cache_dir = cache_dir()
        self.cache = ResultCache(self.cache_dir)
        self.state = "starting"
        self.sources: Optional[tuple] = None  # (when, pyproject configs by folder, recorded runs, roots)
        self.stats = {"traces": 0, "sweeps": 0, "benchmarks": 0, "trace_cache_hits": 0, "sweep_cache_hits": 0,
                      "bench_cache_hits": 0}
        self.listeners: dict[str, list[Callable[[str], None]]] = {event: [] for event in EVENTS}
        self.busy: dict[str, tuple[str, str]] = {}  # lane -> (state, detail) of the work it runs now
        self.gpu_gate = GpuGate()  # background measurements wait while others use the GPU

    @property
    def wire(self) -> CompileLensProtocol:
        """The protocol, typed as the one this server runs (it sends pre-encoded diagnostics)."""
        assert isinstance(self.protocol, CompileLensProtocol)
        return self.protocol

    # --- events ---------------------------------------------------------------------------

    def on(self, event: str, listener: Callable[[str], None]) -> None:
        self.listeners[event].append(listener)

    def emit(self, event: str, uri: str) -> None:
        for listener in self.listeners[event]:
            listener(uri)

    def analyzed(self, uri: str, phase: str, version: Optional[int], ok: bool) -> None:
        """Tell the client a phase of a saved version is done (after its diagnostics went out)."""
        self.protocol.notify(ANALYZED, {"uri": uri, "version": version, "phase": phase, "ok": ok})

    # --- status ---------------------------------------------------------------------------

    def status(self, state: str, detail: str = "", lane: Optional[str] = None) -> None:
        """Tell the client what runs. With `lane` ("trace" or "deep"), "idle" means that
        lane is done: while another lane still works, the client is shown that work instead, so
        "idle" is said only when nothing runs."""
        if lane is not None:
            self.busy.pop(lane, None)  # re-inserted last: the newest activity is shown
            if state in ("tracing", "benchmarking", "waiting"):  # waiting: for a busy GPU (gpu_gate)
                self.busy[lane] = (state, detail)
            elif state == "idle" and self.busy:
                state, detail = list(self.busy.values())[-1]
        self.state = state
        self.protocol.notify(STATUS, {
            "state": state, "detail": detail, "torch": self.runtime.get("torch") or self.torch_version,
            "device": self.device_label(), "interpreter": default_python(),
        })

    def device_label(self) -> Optional[str]:
        if not self.runtime:
            return None
        if self.settings.device == "cpu" or not self.runtime.get("cuda"):
            return "cpu"
        return f"cuda ({self.runtime.get('device_name')})"

    def root_for(self, path: str) -> str:
        """A file's workspace root, found as the CLI finds it (`config.find_root`), inside the
        workspace folder that holds it: a nested project's pyproject targets and recorded inputs."""
        here = os.path.abspath(path)
        inside = [f for f in self.folders if here.startswith(f.rstrip(os.sep) + os.sep)]
        return find_root(here, max(inside, key=len) if inside else (self.root if not self.folders else None))

    # --- worker lanes ---------------------------------------------------------------------

    def _slot(self, name: str, **kwargs: Any) -> WorkerSlot:
        slot = WorkerSlot(name, default_python(), self.root, worker_env(self.cache_dir), templates=self.templates,
                          **kwargs)
        slot.on_output = lambda text: log.info("user code output (%s):\n%s", name, text)
        return slot

    def start_workers(self) -> None:
        if not self.trusted or self.traces is not None:
            return
        spare = self.settings.spare_worker
        self.traces = self._slot("trace", spare=spare_by_default() if spare is None else spare)
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
                 self.device_label(), self.runtime.get("import_s"))
        self.status("idle", "ready")

    def deep_lane(self) -> WorkerSlot:
        """Recompile sweeps and measurements: a second worker, so traces never wait behind them."""
        if self.bench is None:
            self.bench = self._slot("deep", spare=False, recycle_after=20)
        return self.bench

    async def stop_workers(self) -> None:
        for slot in (self.traces, self.bench):
            if slot is not None:
                await slot.stop()
        self.traces = self.bench = None
        await self.templates.stop()

    def worker_pids(self) -> list[int]:
        return [pid for slot in (self.traces, self.bench) if slot for pid in slot.pids()]

    # --- documents and whether their results are current -------------------------------------

    def doc(self, uri: str) -> DocState:
        state = self.docs.get(uri)
        if state is None:
            state = self.docs[uri] = DocState(uri, to_fs_path(uri) or uri)
        return state

    def buffer(self, uri: str) -> str:
        return self.workspace.get_text_document(uri).source

    def is_current(self, state: DocState) -> bool:
        """Do the results describe the code in the editor (comments and formatting aside)?"""
        return state.saved is not None and self.matches(state, state.saved)

    def matches(self, state: DocState, saved: Saved) -> bool:
        if state.discovery_stale:  # not re-parsed yet: only an identical buffer is known to match
            return self.buffer(state.uri) == saved.source
        return state.discovery is not None and saved.discovery.fingerprint == state.discovery.fingerprint

    def buffer_map(self, state: DocState) -> Optional[PositionMap]:
        """Positions from the saved source to the buffer, when they differ only in comments/format."""
        if state.saved is None:
            return None
        source = self.buffer(state.uri)
        return None if source == state.saved.source else position_map(state.saved.source, source)

    def targets_in_buffer(self, state: DocState) -> list[TargetSpec]:
        return state.discovery.targets if state.discovery else []

    def confirmed(self, state: DocState, spec: TargetSpec) -> bool:
        """A target to show a lens or card for: a class whose base the source could not place only
        once the worker found it is an nn.Module."""
        result = state.traced.get(spec.name) if self.is_current(state) else None
        if result is not None and result.status == "skipped":
            return False
        return not spec.maybe_module or result is not None

    def refresh_views(self) -> None:
        """Ask the client to re-request code lenses and inlay hints (when it supports that)."""
        caps = self.client_capabilities.workspace
        if caps and caps.code_lens and caps.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)
        if caps and caps.inlay_hint and caps.inlay_hint.refresh_support:
            self.workspace_inlay_hint_refresh(None)
