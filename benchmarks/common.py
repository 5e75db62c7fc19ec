"""The parts every unit shares, written once: the machine and its load, the commit, a subprocess
under the unit's limit, loading targets (`FILE[:Target]`), the independent timing in a fresh
process, and the bare LSP client over stdio (`WireClient`)."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Optional

from . import REPO, Context
from .figures import Load, Result, read_line

MODEL_DIR = REPO / "benchmarks" / "models"  # the held-out models units load (not examples/, not fixtures)
MODELS = MODEL_DIR / "speedup_models.py"
SHARED = ("MLPStack", "GPT", "ConvNet")


def py(module: str, *args: str) -> list[str]:
    """The command line of a benchmark module run as its own process (`python -m benchmarks.X ...`)."""
    return [sys.executable, "-m", f"benchmarks.{module}", *args]


def timed_stream(path: Path, server: Path, *args: str, **more_env: str) -> tuple[list[tuple[float, dict]], float, int]:
    """`compile-lens check FILE --stream ARGS` run by `server` (a checkout's `server/`) in FILE's folder:
    each stdout line parsed, with the seconds from the start at which it arrived; the run's seconds; its
    exit code."""
    environ = {**os.environ, "PYTHONPATH": str(server), **more_env}
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "compile_lens.cli", "check", path.name, "--stream", *args],
                             cwd=path.parent, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=environ)
    lines = [(time.perf_counter() - started, json.loads(line)) for line in child.stdout or ()]
    code = child.wait()
    return lines, time.perf_counter() - started, code


def env(ctx: Context, **more: str) -> dict[str, str]:
    """The environment of a child: the checkout's server first on the path, the model sizes of the device."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "server"), e.get("PYTHONPATH", "")) if p)
    e["COMPILE_LENS_BENCH_DEVICE"] = ctx.device
    e.update(more)
    return e


def run(ctx: Context, args: list[str], timeout: Optional[float] = None, **more: str) -> subprocess.CompletedProcess:
    """A child under the unit's limit; its output kept (the tail goes into the figures on failure)."""
    try:
        return subprocess.run(args, cwd=REPO, env=env(ctx, **more), capture_output=True, text=True,
                              timeout=timeout or ctx.timeout_s)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return subprocess.CompletedProcess(args, 124, out, f"timed out after {exc.timeout:.0f} s")


def last_json(proc: subprocess.CompletedProcess) -> Optional[Any]:
    """The last line of a child's stdout that parses as JSON (how the modules hand figures back)."""
    for line in reversed((proc.stdout or "").splitlines()):
        if line.startswith(("{", "[")):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def printed(proc: subprocess.CompletedProcess, n: int = 8) -> list[str]:
    """The last lines a module printed: the figures of one that hands back no JSON."""
    return [ln.rstrip()[:200] for ln in (proc.stdout or "").splitlines() if ln.strip()][-n:]


def module_figures(ctx: Context, module: str, *args: str, timeout: Optional[float] = None, **more: str) -> dict[str, Any]:
    """The untyped form, for the units not yet on `child_result`: a child's last JSON line (a dict) as
    the figures, else the lines it printed; a failed run is the figure `ok: False` with its output's tail."""
    proc = run(ctx, py(module, *args), timeout, **more)
    if proc.returncode != 0:
        return {"ok": False, "error": f"rc {proc.returncode}: {tail(proc)}"}
    got = last_json(proc)
    return dict(got) if isinstance(got, dict) else {"printed": printed(proc)}


def child_result(ctx: Context, module: str, *args: str, timeout: Optional[float] = None, **more: str) -> Result:
    """Run `benchmarks.<module>` as its own process and read back the one figures line it writes
    (`figures.emit`); a failed run, or one that wrote no such line, is a failed result with its tail."""
    return result_of(run(ctx, py(module, *args), timeout, **more))


def result_of(proc: subprocess.CompletedProcess) -> Result:
    """The figures line of a finished child, whatever its exit status (a child run by hand may exit 1 on
    a missed goal: its figures say so); a child that wrote no such line is a failed result with its tail."""
    got = read_line(proc.stdout or "")
    if got is None:
        return Result.failed(f"rc {proc.returncode}, no figures line: {tail(proc)}")
    if proc.returncode != 0:
        got.notes["rc"] = proc.returncode
    return got


def not_run(why: str) -> dict[str, Any]:
    """What a unit returns where its floor is missing here (another torch, Redis, a GPU): no figure."""
    return {"ok": None, "not_run": why}


def tail(proc: subprocess.CompletedProcess, n: int = 600) -> str:
    return ((proc.stdout or "") + (proc.stderr or ""))[-n:]


def busy() -> Load:
    """The load as the figure was taken: load average, other processes' CPU (sampled over 0.5 s), cores."""
    import psutil

    me = os.getpid()
    psutil.cpu_percent(None)
    procs = list(psutil.process_iter(["pid"]))
    for p in procs:
        try:
            p.cpu_percent(None)
        except psutil.Error:
            pass
    time.sleep(0.5)
    others = 0.0
    for p in procs:
        try:
            if p.pid != me:
                others += p.cpu_percent(None)
        except psutil.Error:
            pass
    return Load.now(round(others, 1))


def machine(device: str) -> dict[str, Any]:
    out: dict[str, Any] = {"host": platform.node(), "python": platform.python_version(), "cores": os.cpu_count()}
    try:
        import torch

        out["torch"] = torch.__version__
        if device.startswith("cuda") and torch.cuda.is_available():
            out["gpu"] = torch.cuda.get_device_name(0)
            out["cuda"] = torch.version.cuda
    except ImportError:
        out["torch"] = None
    return out


def rounded(value: Any) -> Any:
    """Figures as a table shows them: floats to 3 decimals (the ledger is read by people too)."""
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v) for v in value]
    return value


def commit() -> Optional[str]:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


# --- the independent timing: torch's own floor, in a fresh process --------------------------------
# Eager vs torch.compile(model) as a user writes it: the first compiled call timed (the cold
# compile), then alternating eager/compiled pairs (which goes first alternates), CUDA events on a GPU.
_FRESH = r'''
import json, statistics, sys, time, torch
sys.path.insert(0, {models_dir!r})
import speedup_models as m
name, device, pairs = {name!r}, {device!r}, {pairs}
t0 = time.perf_counter()
model = getattr(m, name)().to(device).eval()
spec = {{"MLPStack": lambda: (torch.randn(m.MLP_BATCH, m.MLP_WIDTH),),
        "GPT": lambda: (torch.randint(0, m.GPT_VOCAB, (m.GPT_BATCH, m.GPT_SEQ)),),
        "ConvNet": lambda: (torch.randn(m.CONV_BATCH, 3, m.CONV_SIDE, m.CONV_SIDE),),
        "TinyGPT2": lambda: (torch.randint(0, 1000, (4, 32)),)}}[name]
x = tuple(t.to(device) for t in spec())
cuda = device.startswith("cuda")
def sync():
    if cuda: torch.cuda.synchronize()
compiled = torch.compile(model)
with torch.no_grad():
    c0 = time.perf_counter(); compiled(*x); sync(); cold = time.perf_counter() - c0
    first = time.perf_counter() - t0
    def clock(fn, n):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(n): fn(*x)
            b.record(); b.synchronize(); return a.elapsed_time(b) / 1e3 / n
        s = time.perf_counter()
        for _ in range(n): fn(*x)
        return (time.perf_counter() - s) / n
    for fn in (model, compiled):
        clock(fn, 3)
    n = max(1, int(0.05 / max(clock(model, 3), 1e-6)))
    ratios, es, cs = [], [], []
    for i in range(pairs):
        order = (model, compiled) if i % 2 == 0 else (compiled, model)
        got = {{id(f): clock(f, n) for f in order}}
        e, c = got[id(model)], got[id(compiled)]
        es.append(e); cs.append(c); ratios.append(e / c)
print("RESULT " + json.dumps({{"cold_compile_s": cold, "to_first_figure_s": first, "whole_s": time.perf_counter() - t0,
      "eager_ms": statistics.median(es) * 1e3, "compiled_ms": statistics.median(cs) * 1e3,
      "speedup": statistics.median(ratios), "pairs": pairs}}))
'''


def fresh_torch(ctx: Context, name: str, pairs: int = 10) -> dict[str, Any]:
    """Torch's own compile + timing of one shared model in a fresh process (its figures, or an error)."""
    code = _FRESH.format(models_dir=str(MODELS.parent), name=name, device=ctx.device, pairs=3 if ctx.dry else pairs)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-inductor-") as cache:  # cold, as the tool's cold compile is
        proc = run(ctx, [sys.executable, "-c", code], TORCHINDUCTOR_CACHE_DIR=cache)
    line = next((ln for ln in (proc.stdout or "").splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        return {"error": f"rc {proc.returncode}: {tail(proc)}"}
    out = json.loads(line[len("RESULT "):])
    out["process_s"] = time.perf_counter() - started
    return out


# --- loading targets: `FILE[:Target]`, every target with inputs when no name is given --------------
def load_targets(items: list[str]) -> Iterator[tuple[str, str, Any, Any]]:
    """(path, root, spec, built target or the exception that stopped building it) per target,
    discovered and given inputs as the worker does (`compile_lens` on the path: PYTHONPATH=server)."""
    from compile_lens.discovery import discover
    from compile_lens.discovery.inputs import resolve_inputs
    from compile_lens.worker.loader import build_target, import_file

    for item in items:
        path, _, name = item.partition(":")
        path = os.path.abspath(path)
        root = os.path.dirname(path)
        source = Path(path).read_text(encoding="utf-8")
        specs = [t for t in resolve_inputs(path, root, discover(source).targets, source=source)
                 if t.inputs is not None and (not name or t.name == name)]
        module = import_file(path, root)
        for spec in specs:
            try:
                built: Any = build_target(module, spec, path)
            except Exception as exc:  # noqa: BLE001 - a benchmark: the caller says it and goes on
                built = exc
            yield path, root, spec, built


# --- the server over stdio: a bare JSON client ------------------------------------------------------
# pytest-lsp's client turns every published diagnostic into lsprotocol objects, which costs more
# than the server's work on a 1,500-diagnostic file; an editor (VS Code's JSON parser) does not.
# This client reads the raw messages, so what it times is the server and the pipe.
class WireClient:
    def __init__(self, process: asyncio.subprocess.Process):
        self.process = process
        self.next_id = 0
        self.answers: dict[int, asyncio.Future] = {}
        self.published: list[tuple[float, dict]] = []  # (arrival time, params without diagnostics)
        self.notifications: list[tuple[float, str, Any]] = []  # other notifications: (arrival, method, params)
        self.log_lines: list[tuple[float, str]] = []  # the server's stderr, when `start(log=True)`
        self.arrived = asyncio.Event()  # set on each message: waiting never polls (the CPU is the server's)
        self.reader = asyncio.get_running_loop().create_task(self._read())
        self.log_reader = (asyncio.get_running_loop().create_task(self._read_log())
                           if process.stderr is not None else None)

    @classmethod
    async def start(cls, root: Path, trusted: bool = False, settings: Optional[dict] = None,
                    env: Optional[dict] = None, log: bool = False) -> WireClient:
        """`log`: keep the server's stderr lines (`log_lines`); otherwise it is dropped."""
        env = {**os.environ, "PYTHONSAFEPATH": "1",
               "COMPILE_LENS_CACHE_DIR": tempfile.mkdtemp(prefix="compile-lens-wire-cache-"), **(env or {})}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "compile_lens", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE if log else asyncio.subprocess.DEVNULL, env=env, limit=2**26)
        client = cls(process)
        await client.request("initialize", {
            "processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {},
            "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
            "initializationOptions": {"settings": settings or {}, "trusted": trusted}})
        client.notify("initialized", {})
        return client

    def _send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        future = self.answers[self.next_id] = asyncio.get_running_loop().create_future()
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return await future

    async def _read(self) -> None:
        stream = self.process.stdout
        loop = asyncio.get_running_loop()
        while True:
            length = None
            while True:
                line = await stream.readline()
                if not line:
                    return
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
                elif line in (b"\r\n", b"\n"):
                    break
            message = json.loads(await stream.readexactly(length or 0))
            if "id" in message and "method" not in message:
                future = self.answers.pop(message["id"], None)
                if future is not None and not future.done():
                    future.set_result(message.get("result"))
            elif message.get("method") == "textDocument/publishDiagnostics":
                params = message["params"]
                codes = [str(d.get("code", "")) for d in params["diagnostics"]]
                self.published.append((loop.time(), {"uri": params["uri"], "version": params.get("version"),
                                                     "count": len(params["diagnostics"]),
                                                     "gb": any(c.startswith("GB") for c in codes)}))
                self.arrived.set()
            elif "id" in message:  # a request from the server (configuration, refresh): answer null
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif "method" in message:
                self.notifications.append((loop.time(), message["method"], message.get("params")))
                self.arrived.set()

    async def _read_log(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            line = await self.process.stderr.readline()
            if not line:
                return
            self.log_lines.append((loop.time(), line.decode("utf-8", "replace").rstrip("\n")))
            self.arrived.set()

    async def wait_for(self, found) -> Any:
        """Wait (on arrivals, never polling) until `found()` returns something other than None."""
        while True:
            self.arrived.clear()
            answer = found()
            if answer is not None:
                return answer
            await self.arrived.wait()

    async def wait_published(self, uri: str, version: int, since: int = 0) -> tuple[float, int]:
        """The first publish of this version or a newer one (a server may lint queued edits once)."""
        while True:
            for at, params in self.published[since:]:
                if params["uri"] == uri and (params["version"] or 0) >= version:
                    return at, params["count"]
            since = len(self.published)
            self.arrived.clear()
            await self.arrived.wait()

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.request("shutdown", None), 30)
            self.notify("exit", None)
            await asyncio.wait_for(self.process.wait(), 30)
        except (asyncio.TimeoutError, ConnectionError):
            self.process.kill()
        self.reader.cancel()
        if self.log_reader is not None:
            self.log_reader.cancel()


def hover_params(uri: str, line: int, character: int) -> dict:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def change_params(uri: str, version: int, line: int, column: int, text: str, end: Optional[tuple] = None) -> dict:
    end_line, end_column = end or (line, column)
    return {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{
        "range": {"start": {"line": line, "character": column}, "end": {"line": end_line, "character": end_column}},
        "text": text}]}
