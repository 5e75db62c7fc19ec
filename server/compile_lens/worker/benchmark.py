"""Measure what Inductor does to one target: eager vs `torch.compile`, forward and a training step.

Where each figure comes from:

- **steady-state timings** — in this process, eager and compiled in paired rounds (`timing`): the
  speedup is the median of the rounds' ratios with a 95% bootstrap interval, *conclusive* only when
  the interval excludes 1× and is narrow, from rounds during which other processes left our cores
  alone; otherwise "inconclusive" with the reason. The forward is timed as a user times it:
  `with torch.no_grad(): model(*args)`, eval mode, the process's thread count. The first compiled
  calls run (and are checked for recompiles) before anything is timed.
- **cold compile** — `torch.compile()` (it imports Dynamo) plus the first compiled call of the
  training step (of the forward when there is no training step), in a *fresh process* with an
  *empty* Inductor cache dir (`bench_child`). A process that already compiled something pays far
  less (≈1.5 s instead of ≈10 s here: Inductor keeps most of its one-time cost in memory), so only
  a fresh one is honest.
- **warm compile** — in this process, after `torch._dynamo.reset()` with Inductor's in-memory
  caches cleared, so the compile reads the on-disk caches the cold run filled, as re-running an
  unchanged script does; plus the Dynamo/Inductor import time the fresh process measured. A new
  process pays somewhat more (it also starts Inductor's compile workers): 15% on the MLP of
  BENCHMARKS.md. The workload that drives break-even is compiled first, so its warm compile is this
  process's first since the cold one.
- **peak memory** — at the allocator, one call of the break-even workload (`memory`).
- **accuracy** — the compiled copy starts from a deepcopy of the eager model (same weights), gets
  the same inputs and the same RNG seed; outputs (forward, eval mode) and parameter gradients
  (one backward, train mode) are compared. `max_rel_error` is relative to the largest magnitude of
  the eager tensor (max|a-b| / max|b|): element-wise ratios blow up near zero and say nothing. The
  tolerance check is `torch.testing.assert_close`-style, |a-b| <= atol + rtol*|b| per element,
  with tolerances per dtype (`TOLERANCES`).
- **graph breaks and recompiles** seen while benchmarking go into `notes` (prefixed "graph breaks:",
  "recompiles:"), and a recompile during a timed loop says the timing includes compiling.

`notes` entries start with a fixed word and a colon — "device:", "train step:", "accuracy:",
"graph breaks:", "recompiles:", "timing:" — so a renderer can pick out the ones it warns about.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import inspect
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from typing import Any, Callable, Iterator, Optional

import torch
import torch.utils.benchmark as tbench

from ..pool import kill_tree
from ..protocol import Benchmark, Problem, Timing
from . import memory as mem
from .graph_breaks import LOOP_GB_ID, distinct_breaks, graph_break_log
from .loader import BuiltTarget, TargetError, describe
from .timing import MAX_CI_WIDTH, Contention, busy_words, paired_rounds, timer, timing_of

LR = 1e-3  # the eager SGD step of the training step; small so weights barely drift while timing
MIN_TIMING_FRACTION = 0.25  # the timing rounds get at least this share of the budget, whatever compiling took
COLD_LIMIT_MIN_S, COLD_LIMIT_FACTOR = 300.0, 5.0  # the cold compile: a hang guard, nothing seen yet
PHASE_LIMIT_MIN_S, PHASE_LIMIT_FACTOR = 60.0, 2.0  # later phases: from the cold compile's duration
HEARTBEAT_S = 5.0  # progress while a child compiles: the pool's silence limit is for hangs only
MIN_ROUND_S, MAX_ROUND_S = 0.05, 2.0  # min_run_time of one round, whatever the budget says
SPEEDUP_REAL = 1.1  # below this (or inside the spread) a speedup is not worth a compile
PAYBACK_REALISTIC = 10_000  # calls: more than this and compiling rarely pays back in one run
FEW_BREAKS = 2
NOISY_IQR = 0.5  # an IQR above this fraction of the median gets a note
TOLERANCES = {  # dtype -> (rtol, atol) for eager vs compiled; fusion reorders float arithmetic
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (5e-2, 1e-2),
}
CHILD_MODULE = "compile_lens.worker.bench_child"
CACHE_PREFIX = "compile-lens-inductor-"  # one temp folder per benchmark: Inductor cache + child files
STALE_S = 6 * 3600


# --- small helpers (also used by bench_child) ---------------------------------------------

def resolve_device(device: str) -> tuple[str, Optional[str]]:
    """The device to measure on, and a note when it is not the one asked for."""
    wanted = (device or "auto").lower()
    if wanted == "auto":
        return ("cuda" if torch.cuda.is_available() else "cpu"), None
    if wanted.startswith("cuda"):
        if torch.cuda.is_available():
            return wanted, None
        why = "this torch build has no CUDA" if torch.version.cuda is None else "no GPU is visible"
        return "cpu", f"device: cuda was asked for but {why} (torch {torch.__version__}); measured on cpu"
    if wanted == "cpu":
        return "cpu", None
    return "cpu", f"device: unknown device {device!r}; measured on cpu"


def to_device(obj: Any, device: str) -> Any:
    """Move tensors (inside tuples, lists and dicts too) to `device`; keep leaf-ness and grad flags."""
    if isinstance(obj, torch.Tensor):
        if obj.device == torch.device(device):
            return obj
        moved = obj.detach().to(device)
        return moved.requires_grad_(obj.requires_grad) if obj.is_floating_point() else moved
    if isinstance(obj, tuple):
        items = [to_device(v, device) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
    if isinstance(obj, list):
        return [to_device(v, device) for v in obj]
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    return obj


def tensors_in(obj: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    """Every tensor in an output, in a stable order (tuples, lists, dicts, dataclass-likes)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth > 8:  # a self-referencing output object: stop somewhere
        return
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            yield from tensors_in(v, depth + 1)
    elif isinstance(obj, dict):
        for k in obj:
            yield from tensors_in(obj[k], depth + 1)
    elif hasattr(obj, "__dict__") and not callable(obj) and not isinstance(obj, type):
        for v in vars(obj).values():
            yield from tensors_in(v, depth + 1)


def first_float_tensor(out: Any) -> Optional[torch.Tensor]:
    return next((t for t in tensors_in(out) if t.is_floating_point()), None)


def scalar_loss(out: Any) -> torch.Tensor:
    """The training step's loss: mean square of the first floating-point output."""
    t = first_float_tensor(out)
    if t is None:
        raise ValueError("no floating-point tensor in the output")
    return t.float().pow(2).mean()


def describe_inputs(args: tuple) -> str:
    def one(v: Any) -> str:
        if isinstance(v, torch.Tensor):
            dtype = str(v.dtype).replace("torch.", "")
            grad = " requires_grad" if v.requires_grad else ""
            return f"{dtype}[{', '.join(map(str, v.shape))}]{grad}"
        if isinstance(v, (tuple, list)):
            inner = ", ".join(one(x) for x in v)
            return f"({inner})" if isinstance(v, tuple) else f"[{inner}]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {one(x)}" for k, x in v.items()) + "}"
        text = repr(v)
        return text if len(text) <= 24 else text[:21] + "..."
    return ", ".join(one(a) for a in args)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for row in f:
                if row.startswith("model name"):
                    return row.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"{cpu_name()} ({torch.get_num_threads()} threads)"


def is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "out of memory" in text or "can't allocate memory" in text or "not enough memory" in text)


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def compile_kwargs(target: BuiltTarget, mode: str) -> dict[str, Any]:
    """`torch.compile` arguments: the setting's mode, plus `dynamic`/`fullgraph` from a decorator."""
    kwargs: dict[str, Any] = {"mode": None if mode in ("", "default") else mode}
    options = getattr(target.spec, "compile_options", None) or {}
    for key in ("dynamic", "fullgraph"):
        if key in options:
            kwargs[key] = options[key]
    return kwargs


def uses_cudagraphs(mode: str) -> bool:
    return mode == "reduce-overhead" or mode == "max-autotune"


class Model:
    """One side of the comparison: something to call and (for modules) its parameters."""

    def __init__(self, call: Callable, module: Optional[torch.nn.Module], args: tuple, step_begin: bool):
        self.call, self.module, self.args, self.step_begin = call, module, args, step_begin
        self._opt: Optional[torch.optim.Optimizer] = None

    def use(self, train: bool) -> None:
        """Train or eval mode. Set once before timing: `Module.train()` walks every submodule,
        which would add microseconds to each timed call of a small model."""
        if self.module is not None:
            self.module.train(train)

    def run(self, workload: str) -> Callable[[], Any]:
        """The call to time for a workload ("forward" | "train"), with the module's mode set."""
        self.use(workload == "train")
        return self.train_step if workload == "train" else self.forward

    def forward(self) -> Any:
        """One forward under no_grad (eval mode: call `use(False)` first)."""
        if self.step_begin:  # CUDA graphs: a new iteration may overwrite the last one's outputs
            torch.compiler.cudagraph_mark_step_begin()
        with torch.no_grad():
            return self.call(*self.args)

    def loss_backward(self) -> Any:
        """Forward and backward of the scalar loss (train mode: call `use(True)` first)."""
        if self.step_begin:
            torch.compiler.cudagraph_mark_step_begin()
        out = self.call(*self.args)
        scalar_loss(out).backward()
        return out

    def train_step(self) -> None:
        """forward, loss, backward, an eager SGD step."""
        assert self.module is not None
        if self._opt is None:
            params = [p for p in self.module.parameters() if p.requires_grad]
            self._opt = torch.optim.SGD(params, lr=LR)
        self._opt.zero_grad(set_to_none=True)
        self.loss_backward()
        self._opt.step()

    def zero_grad(self) -> None:
        if self.module is not None:
            for p in self.module.parameters():
                p.grad = None


def train_step_problem(obj: Any, out: Any) -> Optional[str]:
    """Why a training step cannot be measured for this target (None: it can)."""
    if not isinstance(obj, torch.nn.Module):
        return "a plain function has no parameters to train; forward only"
    if not any(p.requires_grad for p in obj.parameters()):
        return "the module has no trainable parameters; forward only"
    t = first_float_tensor(out)
    if t is None:
        return "no floating-point tensor in the output to make a loss from; forward only"
    if not t.requires_grad:
        return "the first floating-point output does not require grad; forward only"
    return None


def tolerance(dtypes: list[torch.dtype]) -> tuple[float, float]:
    """The loosest (rtol, atol) of the dtypes compared."""
    pairs = [TOLERANCES.get(d, TOLERANCES[torch.float32]) for d in dtypes] or [TOLERANCES[torch.float32]]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def compare(expected: list[torch.Tensor], actual: list[torch.Tensor]) -> dict[str, Any]:
    """max abs / max rel (to the tensor's scale) difference, and whether any element is out of tolerance."""
    result: dict[str, Any] = {"abs": 0.0, "rel": 0.0, "exceeds": False, "problem": None, "dtype": None}
    if len(expected) != len(actual):
        result["problem"] = f"{len(actual)} tensors instead of {len(expected)}"
        return result
    dtypes = [t.dtype for t in expected if t.is_floating_point()]
    rtol, atol = tolerance(dtypes)
    result["dtype"] = str(max(dtypes, key=lambda d: TOLERANCES.get(d, (0, 0))[0])).replace("torch.", "") if dtypes else None
    for e, a in zip(expected, actual):
        if e.shape != a.shape:
            result["problem"] = f"shape {tuple(a.shape)} instead of {tuple(e.shape)}"
            return result
        e64, a64 = e.detach().double().cpu(), a.detach().double().cpu()
        both_nan = e64.isnan() & a64.isnan()
        if bool((e64.isnan() ^ a64.isnan()).any()):
            result["problem"] = "NaN in one result but not the other"
            return result
        diff = torch.where(both_nan, torch.zeros_like(e64), (e64 - a64).abs())
        diff = torch.nan_to_num(diff, nan=0.0, posinf=0.0)  # equal infinities give inf - inf = nan
        if diff.numel() == 0:
            continue
        scale = float(torch.nan_to_num(e64.abs(), nan=0.0, posinf=0.0).max())
        worst = float(diff.max())
        result["abs"] = max(result["abs"], worst)
        result["rel"] = max(result["rel"], worst / max(scale, atol))
        limit = atol + rtol * torch.nan_to_num(e64.abs(), nan=0.0)
        if bool((diff > limit).any()):
            result["exceeds"] = True
    result["rtol"], result["atol"] = rtol, atol
    return result


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation, as numpy and torch.quantile do."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


class Stats:
    """Per-call times (seconds) of one variant, merged over rounds."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def add(self, m: tbench.Measurement) -> None:
        self.times.extend(m.times)

    @property
    def ms(self) -> tuple[float, float, float]:
        s = sorted(self.times)
        return quantile(s, 0.25) * 1e3, quantile(s, 0.5) * 1e3, quantile(s, 0.75) * 1e3


# --- Dynamo's view: graph breaks and recompiles ----------------------------------------------

def _metrics() -> list[Any]:
    try:
        from torch._dynamo.utils import get_compilation_metrics
        return list(get_compilation_metrics())
    except Exception:  # noqa: BLE001 - private API: degrade to "nothing seen"
        return []


def _clear_metrics() -> None:
    with contextlib.suppress(Exception):
        from torch._dynamo.utils import clear_compilation_metrics
        clear_compilation_metrics()


# Per-compile local cache counters in compilation metrics (filled since pytorch#171743, 2026-01);
# older torch: the process-wide `counters["inductor"]["fxgraph_cache_hit"/"_miss"]` (Inductor only)
_CACHE_FIELDS = {"hits": ("inductor_fx_local_cache_hit_count", "aotautograd_local_cache_hit_count"),
                 "misses": ("inductor_fx_local_cache_miss_count", "aotautograd_local_cache_miss_count")}


def cache_counts() -> Optional[dict[str, int]]:
    """Inductor's and AOTAutograd's on-disk cache hits and misses of the compiles in this process,
    or None when this torch does not record them."""
    counts = {"hits": 0, "misses": 0}
    recorded = False
    for entry in _metrics():
        for key, names in _CACHE_FIELDS.items():
            for name in names:
                value = getattr(entry, name, None)
                if isinstance(value, int):
                    counts[key] += value
                    recorded = True
    if recorded:
        return counts
    with contextlib.suppress(Exception):
        inductor = torch._dynamo.utils.counters["inductor"]
        if "fxgraph_cache_hit" in inductor or "fxgraph_cache_miss" in inductor:
            return {"hits": int(inductor["fxgraph_cache_hit"]), "misses": int(inductor["fxgraph_cache_miss"])}
    return None


def _frame_compiles(entries: list[Any]) -> list[Any]:
    """Entries for Dynamo frame compiles (backward compiles have no co_name)."""
    return [e for e in entries if getattr(e, "co_name", None)]


def _short_reason(text: str) -> str:
    first = (text or "").strip().splitlines()[0] if (text or "").strip() else "unknown reason"
    return first if len(first) <= 160 else first[:157] + "..."


class DynamoWatch:
    """Counts compiles per phase so that a compile after the first calls is never timed silently."""

    def __init__(self) -> None:
        torch._dynamo.reset()
        _clear_metrics()
        self.seen = 0
        self.frames: set[str] = set()
        self.guard_us: dict[str, float] = {}  # frame id -> its newest entry's guard check time

    def new(self) -> list[Any]:
        entries = _metrics()
        fresh = entries[self.seen:] if len(entries) >= self.seen else entries
        self.seen = len(entries)
        frames = _frame_compiles(fresh)
        for e in frames:
            frame = str(getattr(e, "compile_id", "?")).split("/")[0]
            self.frames.add(frame)
            latency = getattr(e, "guard_latency_us", None)  # absent on an older torch: not recorded
            if isinstance(latency, (int, float)) and latency >= 0:
                self.guard_us[frame] = float(latency)
        return frames

    def expect(self) -> None:
        """The calls since the last mark were first calls: compiles there are expected."""
        self.new()

    def unexpected(self, where: list[str], what: str) -> None:
        for e in self.new():
            reason = getattr(e, "recompile_reason", None) or "a new frame was compiled"
            where.append(f"{what}: {_short_reason(reason)}")


# --- the child processes ---------------------------------------------------------------------

def _child_env(cache_dir: str) -> dict[str, str]:
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    env["TRITON_CACHE_DIR"] = os.path.join(cache_dir, "triton")
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_child(job: dict[str, Any], *, cache_dir: str, timeout: float,
              progress: Callable[..., None] = lambda stage, **kw: None) -> dict[str, Any]:
    """Run `bench_child` in a fresh process; its result comes back in a file, never on stdout.

    While it runs, `progress` hears from it every HEARTBEAT_S (the worker is alive, only waiting);
    `timeout` is this phase's own limit. The child's stdout and stderr (user prints included) go
    to a log file whose tail is used only to explain a crash.
    """
    work = tempfile.mkdtemp(prefix="child-", dir=cache_dir)  # goes when the benchmark's folder goes
    result_path = os.path.join(work, "result.json")
    log_path = os.path.join(work, "child.log")
    job = dict(job, result_path=result_path)
    what = job.get("what", "compiling")
    try:
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", CHILD_MODULE, json.dumps(job)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=_child_env(cache_dir), cwd=job.get("root") or None)
            started = time.perf_counter()
            code = None
            while code is None:
                elapsed = time.perf_counter() - started
                try:
                    code = proc.wait(timeout=max(0.01, min(HEARTBEAT_S, timeout - elapsed)))
                except subprocess.TimeoutExpired:
                    elapsed = time.perf_counter() - started
                    if elapsed >= timeout:
                        kill_tree(proc.pid)  # the child and Inductor's compile workers
                        proc.wait()
                        raise TargetError(Problem(
                            "timeout", f"measuring stopped during {what} after {elapsed:.0f} s "
                            f"(its limit: {timeout:.0f} s, {COLD_LIMIT_FACTOR:g}× benchmark.maxSeconds, at "
                            f"least {COLD_LIMIT_MIN_S:.0f} s); nothing of the measurement was kept",
                            job.get("path"), None,
                            "raise compileLens.benchmark.maxSeconds, or use smaller example inputs")) from None
                    progress(f"{what}: {elapsed:.0f} s…", limit_s=HEARTBEAT_S * 4)
        if os.path.exists(result_path):
            with open(result_path, encoding="utf-8") as f:
                result = json.load(f)
            if result.get("error"):
                error = result["error"]
                raise TargetError(Problem(**{k: error.get(k) for k in ("kind", "message", "path", "line", "hint")}))
            return result
        with open(log_path, "rb") as f:
            tail = f.read()[-2000:].decode("utf-8", "replace").strip().splitlines()
        last = next((row for row in reversed(tail) if row.strip()), "")
        raise TargetError(Problem(
            "crash", f"the benchmark process exited with code {code} before reporting"
            + (f": {last.strip()[:200]}" if last else ""), job.get("path"), None,
            "run the model once in a plain script to see the full error"))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _sweep_stale() -> None:
    """Remove benchmark folders left by a worker that was killed mid-benchmark (hours old)."""
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(tempfile.gettempdir()):
            if entry.name.startswith(CACHE_PREFIX) and entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    if now - entry.stat(follow_symlinks=False).st_mtime > STALE_S:
                        shutil.rmtree(entry.path, ignore_errors=True)


@contextlib.contextmanager
def inductor_cache(directory: str) -> Iterator[None]:
    """Point Inductor (and Triton) at `directory` for the compiles in this block."""
    saved = {k: os.environ.get(k) for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    os.environ["TRITON_CACHE_DIR"] = os.path.join(directory, "triton")
    try:
        from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir
        ctx: Any = temporary_cache_dir(directory)
    except ImportError:  # older torch: the env var alone
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = directory
        ctx = contextlib.nullcontext()
    try:
        with ctx:
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# --- the benchmark ---------------------------------------------------------------------------

def _timer(fn: Callable[[], Any], label: str) -> tbench.Timer:
    # The process's own thread count: Timer's default of 1 thread is not what the user runs.
    return tbench.Timer("fn()", globals={"fn": fn}, label=label, num_threads=torch.get_num_threads())


def _timing(eager: Stats, compiled: Stats) -> Timing:
    """Pooled medians of two unpaired sets of times (the report's batch sweep)."""
    e25, e50, e75 = eager.ms
    c25, c50, c75 = compiled.ms
    return Timing(eager_ms=e50, compiled_ms=c50, speedup=e50 / c50 if c50 > 0 else float("nan"),
                  eager_iqr_ms=max(0.0, e75 - e25), compiled_iqr_ms=max(0.0, c75 - c25))


def _is_real(t: Timing) -> bool:
    """Conclusively faster, by at least SPEEDUP_REAL at the low end of the interval."""
    if t.speedup_ci:
        return t.conclusive and t.speedup_ci[0] >= SPEEDUP_REAL
    return (t.speedup >= SPEEDUP_REAL
            and t.compiled_ms + t.compiled_iqr_ms / 2 < t.eager_ms - t.eager_iqr_ms / 2)


GUARD_SHARE = 0.1  # guard checks above this share of the compiled forward are worth saying


def _metric_notes(guard_us: Optional[float], forward: Timing, cache: Optional[dict[str, int]]) -> list[str]:
    """What torch's compilation metrics say that matters here: only then is it a note."""
    notes = []
    compiled_us = forward.compiled_ms * 1e3
    # torch times the guard check once, when it builds the guards: a cold figure. Above the whole
    # steady compiled call it is no per-call cost (the call includes its guards): then nothing is said.
    if guard_us is not None and compiled_us > 0 and GUARD_SHARE * compiled_us < guard_us <= compiled_us:
        notes.append(f"guards: torch timed its guard check at ≈ {guard_us:.0f} µs (once, when it built them), "
                     f"{100 * guard_us / compiled_us:.0f}% of a compiled forward call ({forward.compiled_ms:.3g} ms); "
                     "fewer graph breaks mean fewer guard sets to check")
    if cache and cache.get("misses"):
        notes.append(f"warm compile: Inductor's caches missed {cache['misses']} time(s) ({cache.get('hits', 0)} hits): "
                     "the warm compile time includes compiling again")
    return notes


def break_even(compile_s: Optional[float], t: Timing) -> Optional[int]:
    """Calls after which the compile time is paid back; None when compiled is not (conclusively) faster."""
    saved_s = (t.eager_ms - t.compiled_ms) / 1000.0
    if compile_s is None or not saved_s > 0 or (t.speedup_ci is not None and not t.conclusive):
        return None
    return max(1, math.ceil(compile_s / saved_s))


def inconclusive_why(t: Timing, contention: dict[str, Any]) -> str:
    """Why a timing is not a figure: the machine was busy, the rounds disagreed, or there is no
    difference to measure."""
    busy = busy_words(contention)
    if busy:
        return f"{busy} — re-measure when idle"
    if t.speedup_ci and t.speedup_ci[0] <= 1.0 <= t.speedup_ci[1] and (
            t.speedup_ci[1] - t.speedup_ci[0]) <= MAX_CI_WIDTH * max(t.speedup, 1e-9):
        return "no measurable difference (the 95% interval contains 1×)"
    # no numbers here: this text heads the lens and hint, where a noisy bound would read as a figure
    # (the hover's table shows the interval beside it)
    return (f"the rounds disagreed too much (the 95% interval is wider than {MAX_CI_WIDTH:.0%} of the speedup)"
            " — re-measure when idle")


def verdict(device: str, forward: Timing, train: Optional[Timing], cold_s: Optional[float],
            calls: Optional[int], breaks: int, accuracy_ok: bool,
            contention: Optional[dict[str, Any]] = None) -> str:
    t, what = (train, "train step") if train is not None else (forward, "forward")
    extras = []
    if breaks > FEW_BREAKS:
        extras.append(f"{breaks} graph breaks")
    elif breaks:
        extras.append(f"{breaks} graph break{'s' if breaks > 1 else ''}")
    if not accuracy_ok:
        extras.append("outputs differ beyond tolerance — check accuracy first")
    tail = ("; " + "; ".join(extras)) if extras else ""
    if t.speedup_ci is not None and not t.conclusive:
        return f"inconclusive ({what} on {device}): {inconclusive_why(t, contention or {})}{tail}"
    if t.speedup < 1.0:
        return f"not worth it: compiled is {t.speedup:.2f}× (slower) on {device} ({what}){tail}"
    if not _is_real(t):
        return f"no clear gain: {t.speedup:.2f}× {what} on {device} is within the timing spread{tail}"
    cold = f", compile {cold_s:.1f} s" if cold_s is not None else ""
    if calls is not None and calls > PAYBACK_REALISTIC:
        return (f"only for long runs: {t.speedup:.2f}× {what} on {device}{cold}, "
                f"pays back after {calls:,} calls{tail}")
    if breaks > FEW_BREAKS or not accuracy_ok:
        return f"faster but check first: {t.speedup:.2f}× {what} on {device}{cold}{tail}"
    payback = f", pays back after {calls:,} calls" if calls is not None else ""
    return f"worth it: {t.speedup:.2f}× {what} on {device}{cold}{payback}{tail}"


def cold_limit(max_seconds: float) -> float:
    """The cold compile's limit: nothing has been seen yet, so generous — a guard against a hang."""
    return max(COLD_LIMIT_MIN_S, COLD_LIMIT_FACTOR * max_seconds)


def phase_limit(cold_s: Optional[float], max_seconds: float) -> float:
    """The limit of a later phase (a warm compile, the timing), from the cold compile seen: a warm
    compile takes a fraction of it, and the timing stops itself near `max_seconds`."""
    return max(PHASE_LIMIT_MIN_S, max_seconds, PHASE_LIMIT_FACTOR * (cold_s or 0.0))


def run_benchmark(
    target: BuiltTarget,
    *,
    path: str,
    root: str,
    device: str,
    mode: str = "default",
    max_seconds: float = 60.0,
    progress: Callable[..., None] = lambda stage, **kw: None,
) -> Benchmark:
    """Eager vs `torch.compile(mode=mode)` for one built target on `device` ("cpu" | "cuda").

    Spends about `max_seconds` in all, compiles included: one cold compile in a fresh process,
    then in this process one warm compile per workload and the paired timing rounds, which get
    what is left (at least MIN_TIMING_FRACTION of the budget, and they stop early once the
    figure is conclusive). `progress(stage, limit_s=...)` says how long the next stage may be
    silent (see `pool.Worker.run`).
    Raises TargetError for a target that cannot run, runs out of memory, whose compile fails,
    or a phase that goes past its limit.
    """
    device, device_note = resolve_device(device)
    progress = _with_limits(progress)
    state = {"stage": "building the model"}
    _sweep_stale()
    cache_dir = tempfile.mkdtemp(prefix=CACHE_PREFIX)
    try:
        return _measure(target, path, root, device, mode, max_seconds, progress, state, cache_dir,
                        [device_note] if device_note else [])
    except TargetError:
        raise
    except Exception as exc:  # noqa: BLE001
        if not is_oom(exc):
            raise
        # _measure's frame (models, inputs, compiled code) is gone once the traceback is dropped
        message = describe(exc)
        exc.__traceback__ = None
        del exc
        free_memory()
        raise TargetError(Problem(
            "oom", f"out of memory on {device} while {state['stage']}: {message[:200]}", path,
            target.spec.line, "use smaller example inputs (a smaller batch), or measure on another device"
        )) from None
    finally:
        with contextlib.suppress(Exception):
            torch._dynamo.reset()
        free_memory()
        shutil.rmtree(cache_dir, ignore_errors=True)


def _with_limits(progress: Callable[..., None]) -> Callable[..., None]:
    """`progress(stage, limit_s=...)` for a callback that takes the limit, else `progress(stage)`."""
    try:
        params = inspect.signature(progress).parameters.values()
    except (TypeError, ValueError):
        return lambda stage, **kw: progress(stage)
    if any(p.kind == p.VAR_KEYWORD or p.name == "limit_s" for p in params):
        return progress
    return lambda stage, **kw: progress(stage)


def _clear_in_memory_caches() -> None:
    """Forget what this process compiled, keeping the on-disk caches: the next compile reads them
    as a new process would (Dynamo's code cache, Inductor's loaded modules and memoised lookups)."""
    torch._dynamo.reset()
    with contextlib.suppress(Exception):
        from torch._inductor.utils import clear_inductor_caches
        clear_inductor_caches()
    with contextlib.suppress(Exception):
        from torch._inductor.codecache import PyCodeCache
        PyCodeCache.cache_clear(purge=False)


def _user_forward(model: Model) -> tbench.Timer:
    """The forward timed as a user times it: `with torch.no_grad(): model(*args)`, nothing around it."""
    stmt = "with torch.no_grad():\n    f(*args)"
    if model.step_begin:
        stmt = "torch.compiler.cudagraph_mark_step_begin()\n" + stmt
    return timer(stmt, {"f": model.call, "args": model.args, "torch": torch})


def _measure(target: BuiltTarget, path: str, root: str, device: str, mode: str, max_seconds: float,
             progress: Callable[..., None], state: dict[str, str], cache_dir: str,
             notes: list[str]) -> Benchmark:
    started = time.perf_counter()
    name = target.spec.name
    step_begin = uses_cudagraphs(mode) and device.startswith("cuda")
    # 1. build and run eagerly once: a target that cannot run fails here, not after the compiles
    obj = target.make()
    is_module = isinstance(obj, torch.nn.Module)
    if is_module:
        eager_obj = (obj if target.spec.kind == "module" else copy.deepcopy(obj)).to(device)
    else:
        eager_obj = obj
    args = to_device(target.args, device)
    eager = Model(eager_obj, eager_obj if is_module else None, args, False)
    state["stage"] = "running the model eagerly"
    try:
        eager.use(False)
        eager.forward()
        train_problem: Optional[str] = None
        if is_module:
            with torch.enable_grad():
                eager_obj.train()
                out = eager_obj(*args)
            train_problem = train_step_problem(eager_obj, out)
            if train_problem is None:
                scalar_loss(out).backward()
            del out
        else:
            train_problem = train_step_problem(eager_obj, None)
        eager.zero_grad()
    except TargetError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code
        if is_oom(exc):
            raise
        raise TargetError(Problem("call", f"calling `{name}` eagerly failed: {describe(exc)}",
                                  path, target.spec.line, "check the example inputs")) from None
    has_train = train_problem is None
    if train_problem:
        notes.append(f"train step: {train_problem}")
    workloads = ["train", "forward"] if has_train else ["forward"]  # the first drives break-even

    # 2. the cold compile, in a fresh process with an empty Inductor cache (it fills the cache)
    child_job = {"path": os.path.abspath(path), "root": os.path.abspath(root),
                 "spec": asdict(target.spec), "device": device,
                 "mode": mode, "workloads": workloads, "step_begin": step_begin}
    state["stage"] = "compiling with a cold cache (fresh process)"
    progress(f"compiling {name} with Inductor (cold cache, fresh process)…")
    phases: dict[str, float] = {"build": time.perf_counter() - started}
    t_child = time.perf_counter()
    cold = run_child(dict(child_job, tasks=["compile"], what="the cold compile (fresh process)"),
                     cache_dir=cache_dir, timeout=cold_limit(max_seconds), progress=progress)
    phases["cold_child"] = time.perf_counter() - t_child
    cold_s = cold["compile_s"].get(workloads[0])
    import_s = float(cold.get("import_s") or 0.0)
    notes.extend(n for n in cold.get("notes", []) if n not in notes)
    limit = phase_limit(cold_s, max_seconds)

    # 3. in this process, per workload: the warm compile (Dynamo reset and Inductor's in-memory
    # caches cleared, the on-disk caches the cold run filled kept), accuracy, paired timing.
    # Dynamo is reset between workloads, so each is timed with only its own graphs cached (a
    # second cache entry adds guard checks to every call, which shows on a small model).
    errors: dict[str, Any] = {"output_abs": None, "output_rel": None, "grad_abs": None,
                              "grad_rel": None, "exceeds": False}
    timings: dict[str, Timing] = {}
    late: list[str] = []
    timed: list[str] = []
    frames = 0
    warm_s: Optional[float] = None
    contention = Contention(device)
    busy_seen: dict[str, Any] = {}
    memory: dict[str, Any] = {"eager": None, "compiled": None, "method": mem.method(device, workloads[0])}
    guard_us: Optional[float] = None
    warm_cache: Optional[dict[str, int]] = None
    # Breaks counted as everywhere else: distinct breaks at distinct locations (graph_breaks.py),
    # from torch's graph_breaks log; not message texts, not frames (a library adds frames of its own).
    with graph_break_log() as break_log, inductor_cache(cache_dir):
        compiled_obj = _same_weights_copy(eager_obj, target, device) if is_module else eager_obj
        # The workload that drives break-even first: its warm compile is then this process's
        # first since the cold one, the closest to a new process's (see README). The train
        # step's SGD steps move the weights (each side by its own number of calls): both models
        # get the starting weights back before the forward is compared.
        order = workloads
        start_state = copy.deepcopy(eager_obj.state_dict()) if has_train else None
        for i, wl in enumerate(order):
            label = "forward" if wl == "forward" else "train step"
            _clear_in_memory_caches()
            watch = DynamoWatch()
            state["stage"] = f"compiling the {label} with warm caches"
            progress(f"compiling {name} {label} with Inductor (warm cache), checking accuracy…", limit_s=limit)
            if is_module:
                compiled_obj.train(wl == "train")
            sync(device)
            t0 = time.perf_counter()
            fn = torch.compile(compiled_obj, **compile_kwargs(target, mode))
            compiled = Model(fn, compiled_obj if is_module else None, args, step_begin)
            if wl == "forward":
                first = _seeded(compiled.forward)  # the first compiled call: the compile
            else:
                first = _grads(compiled, 0)
            sync(device)
            compile_s = time.perf_counter() - t0
            phases["warm_compiles"] = phases.get("warm_compiles", 0.0) + compile_s
            if wl == workloads[0]:
                # what a new process pays: the imports it does on the first call, then this
                warm_s = import_s + compile_s
                warm_cache = cache_counts()  # did it read what the cold compile wrote? (metrics cleared by the watch)
            t_acc = time.perf_counter()
            if wl == "forward":
                _output_accuracy(eager, compiled, errors, notes, first)
            else:
                _grad_accuracy(eager, compiled, errors, notes, first)
            del first
            watch.expect()
            state["stage"] = f"warming up the {label}"
            for _ in range(2):  # calls 2 and 3 must not compile again
                compiled.run(wl)()
            eager.run(wl)()
            watch.unexpected(late, f"the {label} compiled again after its first call")
            phases["accuracy_warmup"] = phases.get("accuracy_warmup", 0.0) + time.perf_counter() - t_acc

            left = max_seconds - (time.perf_counter() - started)
            share = left / (len(order) - i)
            budget = max(share, MIN_TIMING_FRACTION * max_seconds / len(workloads))
            if i == 0 and share < MIN_TIMING_FRACTION * max_seconds / len(workloads):
                notes.append(f"timing: compiling took most of the {max_seconds:.0f} s budget; the timing "
                             f"rounds got {budget:.0f} s each (raise compileLens.benchmark.maxSeconds "
                             "for more)")
            sides = {"eager": eager, "compiled": compiled}
            if wl == "forward":
                timers = {side: _user_forward(m) for side, m in sides.items()}
            else:
                timers = {side: timer("fn()", {"fn": m.run(wl)}) for side, m in sides.items()}
            state["stage"] = f"timing the {label}"
            progress(f"timing {label} (eager and compiled in paired rounds)…", limit_s=limit)
            contention.start(gpu=True)
            t_timing = time.perf_counter()

            def on_round(n: int, p: Any, label: str = label) -> None:
                if n % 4 == 0:
                    progress(f"timing {label}: {n} paired rounds…", limit_s=limit)

            pairs = paired_rounds(timers["eager"], timers["compiled"], budget_s=budget, on_round=on_round,
                                  watch=Contention(device))
            timings[wl] = timing_of(pairs)
            phases["timing"] = phases.get("timing", 0.0) + time.perf_counter() - t_timing
            t_mem = time.perf_counter()
            seen = contention.report()
            busy_seen = _worse(busy_seen, seen)
            watch.unexpected(timed, f"recompiled while timing the {label} (the timing includes compiling)")
            frames = max(frames, len(watch.frames))
            if wl == workloads[0]:  # the allocator peak of the workload that drives break-even
                state["stage"] = f"measuring the peak memory of the {label}"
                progress(f"measuring the peak memory of the {label}…", limit_s=limit)
                memory["eager"] = mem.peak_of(eager.run(wl), eager.zero_grad, device)
                memory["compiled"] = mem.peak_of(compiled.run(wl), compiled.zero_grad, device)
                if memory["eager"] is None and memory["compiled"] is None:
                    memory["method"] = "unavailable: the profiler recorded no allocations"
            if wl == "forward" and watch.guard_us:  # every call checks each compiled frame's guards
                guard_us = round(sum(watch.guard_us.values()), 1)
            eager.zero_grad()
            phases["memory"] = phases.get("memory", 0.0) + time.perf_counter() - t_mem
            if wl == "train" and start_state is not None:
                with torch.no_grad():
                    eager_obj.load_state_dict(start_state)  # in place: the compiled graphs keep their guards
                    compiled_obj.load_state_dict(start_state)
            del fn, compiled, timers, sides

    forward = timings["forward"]
    train = timings.get("train")
    driver = train if train is not None else forward
    for wl, t in timings.items():
        if not t.conclusive:
            label = "forward" if wl == "forward" else "train step"
            notes.append(f"timing: the {label} is inconclusive after {t.rounds} paired rounds — "
                         f"{inconclusive_why(t, busy_seen)}")
    # Break-even is driven by the training step when there is one: a training run is where a
    # compile is paid once and amortised over many calls; forward-only for plain functions.
    calls = break_even(cold_s, driver)

    breaks = distinct_breaks(break_log.messages, root)
    n_breaks = len(breaks)
    if n_breaks:
        named = "; ".join(f"{b.gb_id + ' ' if b.gb_id else ''}{_short_reason(b.gb_type)} at "
                          f"{os.path.basename(b.path)}:{b.line}" for b in breaks[:3])
        split = (f"{frames} compiled frames with eager code between them" if frames > 1
                 else "the whole function runs eagerly" if any(b.gb_id == LOOP_GB_ID for b in breaks)
                 else "the code after a break runs eagerly")
        notes.append(f"graph breaks: {n_breaks} — {split}" + (f" ({named})" if named else ""))
    for text in late + timed:
        notes.append(f"recompiles: {text}")
    notes.extend(_metric_notes(guard_us, forward, warm_cache))
    accuracy_ok = not errors["exceeds"]
    return Benchmark(
        device=device,
        device_name=device_name(device),
        mode=mode or "default",
        forward=forward,
        train_step=train,
        compile_s={"cold": cold_s, "warm": warm_s},
        guard_latency_us=guard_us,
        warm_cache=warm_cache,
        break_even_calls=calls,
        peak_memory_bytes=memory,
        max_abs_error={"output": errors["output_abs"], "grad": errors["grad_abs"]},
        max_rel_error={"output": errors["output_rel"], "grad": errors["grad_rel"]},
        verdict=verdict(device, forward, train, cold_s, calls, n_breaks, accuracy_ok, busy_seen),
        torch=torch.__version__,
        inputs=describe_inputs(target.args),
        measured_at=time.time(),
        notes=notes,
        conclusive=driver.conclusive,
        contention=busy_seen,
        phases_s={**{k: round(v, 3) for k, v in phases.items()}, "cold_compile": round(cold_s or 0.0, 3),
                  "total": round(time.perf_counter() - started, 3)},
    )


def _worse(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The busier of two contention readings (the one to report)."""
    if not a:
        return b
    key = lambda c: (c.get("gpu_other_processes") or 0, c.get("other_cpu_percent") or 0.0)  # noqa: E731
    return a if key(a) >= key(b) else b


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _same_weights_copy(model: torch.nn.Module, target: BuiltTarget, device: str) -> torch.nn.Module:
    """A second model with the eager model's weights and buffers."""
    try:
        return copy.deepcopy(model)
    except Exception:  # noqa: BLE001 - some modules do not deepcopy; rebuild and load the state
        other = target.make()
        other = (other if target.spec.kind == "module" else copy.deepcopy(other)).to(device)
        other.load_state_dict(model.state_dict())
        return other


def _seeded(fn: Callable[[], Any], seed: int = 0) -> Any:
    torch.manual_seed(seed)
    return fn()


def _output_accuracy(eager: Model, compiled: Model, errors: dict[str, Any], notes: list[str],
                     compiled_out: Any = None) -> None:
    """Outputs of one forward (eval mode, no_grad, same seed) of eager vs compiled."""
    eager.use(False)
    compiled.use(False)
    out_e = [t.clone() for t in tensors_in(_seeded(eager.forward))]
    out_c = [t.clone() for t in tensors_in(compiled_out if compiled_out is not None else _seeded(compiled.forward))]
    again = [t.clone() for t in tensors_in(_seeded(eager.forward, seed=1))]
    random_model = compare(out_e, again)["abs"] > 0
    _record(compare(out_e, out_c), "output", errors, notes, random_model)


def _grads(model: Model, seed: int) -> list[tuple[str, Optional[torch.Tensor]]]:
    assert model.module is not None
    model.use(True)
    model.zero_grad()
    _seeded(model.loss_backward, seed)
    grads = [(n, None if p.grad is None else p.grad.detach().clone()) for n, p in model.module.named_parameters()]
    model.zero_grad()
    return grads


def _grad_accuracy(eager: Model, compiled: Model, errors: dict[str, Any], notes: list[str],
                   compiled_grads: Optional[list[tuple[str, Optional[torch.Tensor]]]] = None) -> None:
    """Parameter gradients after one backward (train mode, same weights and seed)."""
    eager.use(True)
    compiled.use(True)
    ge, gc_ = _grads(eager, 0), (compiled_grads if compiled_grads is not None else _grads(compiled, 0))
    random_model = compare([g for _, g in ge if g is not None],
                           [g for _, g in _grads(eager, 1) if g is not None])["abs"] > 0
    expected, actual = [], []
    for (name, e), (_, c) in zip(ge, gc_):
        if e is None and c is None:
            continue
        if e is None or c is None:
            notes.append(f"accuracy: the gradient of `{name}` is missing in the "
                         f"{'eager' if e is None else 'compiled'} model")
            errors["exceeds"] = True
            continue
        expected.append(e)
        actual.append(c)
    _record(compare(expected, actual), "grad", errors, notes, random_model)


def _record(cmp: dict[str, Any], what: str, errors: dict[str, Any], notes: list[str], random_model: bool) -> None:
    label = "outputs" if what == "output" else "gradients"
    if cmp["problem"]:
        notes.append(f"accuracy: compiled {label} differ: {cmp['problem']}")
        errors["exceeds"] = True
        return
    errors[f"{what}_abs"], errors[f"{what}_rel"] = cmp["abs"], cmp["rel"]
    if cmp["exceeds"]:
        errors["exceeds"] = True
        why = (" — the model draws random numbers, and Inductor generates them differently "
               "(torch._inductor.config.fallback_random=True matches eager)") if random_model else ""
        notes.append(f"accuracy: compiled {label} differ from eager by up to {cmp['abs']:.3g} "
                     f"(relative {cmp['rel']:.3g}), beyond {cmp['dtype'] or 'float32'} tolerance "
                     f"(rtol {cmp['rtol']:g}, atol {cmp['atol']:g}){why}")
