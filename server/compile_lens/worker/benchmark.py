"""Measure what Inductor does to one target: eager vs `torch.compile`, forward and a training step.

Where each figure comes from:

- **steady-state timings** — in this process, with `torch.utils.benchmark.Timer.blocked_autorange`
  (it warms up and synchronises the accelerator), eager and compiled measured in alternating rounds
  so a slow minute on a noisy machine hits both; median and interquartile range in ms. The first
  compiled calls run (and are checked for recompiles) before anything is timed.
- **cold compile** — `torch.compile()` (it imports Dynamo) plus the first compiled call of the
  training step (of the forward when there is no training step), in a *fresh process* with an
  *empty* Inductor cache dir (`bench_child`). A process that already compiled something pays far less (≈1.5 s instead of
  ≈10 s here: Inductor keeps most of its one-time cost in memory), so only a fresh one is honest.
- **warm compile** — the same in another fresh process whose on-disk Inductor caches are warm (the
  cold run filled them): what re-running an unchanged script costs.
- **peak memory** — in the warm child; see `bench_child` for the method on each device.
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
from .graph_breaks import LOOP_GB_ID, distinct_breaks, graph_break_log
from .loader import BuiltTarget, TargetError, describe

LR = 1e-3  # the eager SGD step of the training step; small so weights barely drift while timing
ROUNDS = 5  # alternating eager/compiled rounds per timing
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


def run_child(job: dict[str, Any], *, cache_dir: str, timeout: float) -> dict[str, Any]:
    """Run `bench_child` in a fresh process; its result comes back in a file, never on stdout.

    The child's stdout and stderr (user prints included) go to a log file whose tail is used
    only to explain a crash.
    """
    work = tempfile.mkdtemp(prefix="child-", dir=cache_dir)  # goes when the benchmark's folder goes
    result_path = os.path.join(work, "result.json")
    log_path = os.path.join(work, "child.log")
    job = dict(job, result_path=result_path)
    try:
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", CHILD_MODULE, json.dumps(job)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=_child_env(cache_dir), cwd=job.get("root") or None)
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                kill_tree(proc.pid)  # the child and Inductor's compile workers
                proc.wait()
                raise TargetError(Problem(
                    "timeout", f"the benchmark process did not finish within {timeout:.0f} s "
                    f"({job.get('what', 'compiling')})", job.get("path"), None,
                    "raise compileLens.benchmark.maxSeconds, or use smaller example inputs")) from None
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

def _busy() -> Optional[str]:
    """Say so when other processes kept the CPUs busy (the load average counts us too)."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return f"the machine was busy (load average {load:.1f} on {cpus} CPUs)" if load > cpus + 0.5 else None


def _timer(fn: Callable[[], Any], label: str) -> tbench.Timer:
    # The process's own thread count: Timer's default of 1 thread is not what the user runs.
    return tbench.Timer("fn()", globals={"fn": fn}, label=label, num_threads=torch.get_num_threads())


def _timing(eager: Stats, compiled: Stats) -> Timing:
    e25, e50, e75 = eager.ms
    c25, c50, c75 = compiled.ms
    return Timing(eager_ms=e50, compiled_ms=c50, speedup=e50 / c50 if c50 > 0 else float("nan"),
                  eager_iqr_ms=max(0.0, e75 - e25), compiled_iqr_ms=max(0.0, c75 - c25))


def _is_real(t: Timing) -> bool:
    """Faster by at least SPEEDUP_REAL and the interquartile ranges do not overlap."""
    return (t.speedup >= SPEEDUP_REAL
            and t.compiled_ms + t.compiled_iqr_ms / 2 < t.eager_ms - t.eager_iqr_ms / 2)


GUARD_SHARE = 0.1  # guard checks above this share of the compiled forward are worth saying


def _metric_notes(guard_us: Optional[float], forward: Timing, cache: Optional[dict[str, int]]) -> list[str]:
    """What torch's compilation metrics say that matters here: only then is it a note."""
    notes = []
    compiled_us = forward.compiled_ms * 1e3
    if guard_us is not None and compiled_us > 0 and guard_us > GUARD_SHARE * compiled_us:
        notes.append(f"guards: checking torch.compile's guards takes ≈ {guard_us:.0f} µs per call, "
                     f"{100 * guard_us / compiled_us:.0f}% of the compiled forward ({forward.compiled_ms:.3g} ms); "
                     "fewer graph breaks mean fewer guard sets to check")
    if cache and cache.get("misses"):
        notes.append(f"warm compile: Inductor's caches missed {cache['misses']} time(s) ({cache.get('hits', 0)} hits): "
                     "the warm compile time includes compiling again")
    return notes


def break_even(compile_s: Optional[float], t: Timing) -> Optional[int]:
    """Calls after which the compile time is paid back; None when compiled is not faster."""
    saved_s = (t.eager_ms - t.compiled_ms) / 1000.0
    if compile_s is None or not saved_s > 0:
        return None
    return max(1, math.ceil(compile_s / saved_s))


def verdict(device: str, forward: Timing, train: Optional[Timing], cold_s: Optional[float],
            calls: Optional[int], breaks: int, accuracy_ok: bool) -> str:
    t, what = (train, "train step") if train is not None else (forward, "forward")
    extras = []
    if breaks > FEW_BREAKS:
        extras.append(f"{breaks} graph breaks")
    elif breaks:
        extras.append(f"{breaks} graph break{'s' if breaks > 1 else ''}")
    if not accuracy_ok:
        extras.append("outputs differ beyond tolerance — check accuracy first")
    tail = ("; " + "; ".join(extras)) if extras else ""
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


def _round_seconds(budget_s: float, variants: int, rounds: int) -> float:
    # blocked_autorange also spends a little estimating the block size (a few block lengths)
    return min(MAX_ROUND_S, max(MIN_ROUND_S, budget_s / (variants * rounds * 1.25)))


def run_benchmark(
    target: BuiltTarget,
    *,
    path: str,
    root: str,
    device: str,
    mode: str = "default",
    max_seconds: float = 60.0,
    progress: Callable[[str], None] = lambda stage: None,
) -> Benchmark:
    """Eager vs `torch.compile(mode=mode)` for one built target on `device` ("cpu" | "cuda").

    Spends about `max_seconds` in all: the two fresh processes (cold and warm compile) take what
    compiling takes, the steady-state timings get what is left (at least a short round each).
    Raises TargetError for a target that cannot run, runs out of memory or whose compile fails.
    """
    device, device_note = resolve_device(device)
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


def _measure(target: BuiltTarget, path: str, root: str, device: str, mode: str, max_seconds: float,
             progress: Callable[[str], None], state: dict[str, str], cache_dir: str,
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

    # 2. compile times (and memory) in fresh processes
    child_job = {"path": os.path.abspath(path), "root": os.path.abspath(root),
                 "spec": asdict(target.spec), "device": device,
                 "mode": mode, "workloads": workloads, "step_begin": step_begin}
    progress(f"compiling {name} with Inductor (cold cache, fresh process)…")
    hard_limit = max(3 * max_seconds, 120.0)
    cold = run_child(dict(child_job, tasks=["compile"], what="cold compile"),
                     cache_dir=cache_dir, timeout=hard_limit)
    progress("measuring warm compile and peak memory in a fresh process…")
    warm = run_child(dict(child_job, tasks=["memory_eager", "compile", "memory_compiled"],
                          what="warm compile and memory"),
                     cache_dir=cache_dir, timeout=hard_limit)
    cold_s = cold["compile_s"].get(workloads[0])
    warm_s = warm["compile_s"].get(workloads[0])
    notes.extend(n for n in cold.get("notes", []) + warm.get("notes", []) if n not in notes)

    # 3. in this process, per workload: accuracy, warm-up, steady-state timings. Dynamo is reset
    # between workloads, so each is timed with only its own graphs cached (a second cache entry
    # adds guard checks to every call, which shows on a small model). Inductor's caches are warm.
    errors: dict[str, Any] = {"output_abs": None, "output_rel": None, "grad_abs": None,
                              "grad_rel": None, "exceeds": False}
    stats: dict[str, Stats] = {}
    late: list[str] = []
    timed: list[str] = []
    frames = 0
    guard_us: Optional[float] = None
    # Breaks counted as everywhere else: distinct breaks at distinct locations (graph_breaks.py),
    # from torch's graph_breaks log; not message texts, not frames (a library adds frames of its own).
    with graph_break_log() as break_log, inductor_cache(cache_dir):
        compiled_obj = _same_weights_copy(eager_obj, target, device) if is_module else eager_obj
        order = ["forward", "train"] if has_train else ["forward"]
        for i, wl in enumerate(order):
            label = "forward" if wl == "forward" else "train step"
            watch = DynamoWatch()
            fn = torch.compile(compiled_obj, **compile_kwargs(target, mode))
            compiled = Model(fn, compiled_obj if is_module else None, args, step_begin)
            state["stage"] = f"compiling the {label}"
            progress(f"compiling {name} {label} with Inductor (warm cache), checking accuracy…")
            if wl == "forward":
                _output_accuracy(eager, compiled, errors, notes)
            else:
                _grad_accuracy(eager, compiled, errors, notes)
            watch.expect()
            state["stage"] = f"warming up the {label}"
            for _ in range(2):  # calls 2 and 3 must not compile again
                compiled.run(wl)()
            eager.run(wl)()
            watch.unexpected(late, f"the {label} compiled again after its first call")

            left = max_seconds - (time.perf_counter() - started)
            variants = 2 * (len(order) - i)
            if i == 0 and left < 2 * len(order) * ROUNDS * MIN_ROUND_S * 2:
                notes.append(f"timing: the {max_seconds:.0f} s budget went into compiling; "
                             "timings are short rounds and noisier")
            round_s = _round_seconds(left, variants, ROUNDS)
            sides = {"eager": eager, "compiled": compiled}
            timers = {side: _timer(m.run(wl), f"{label} {side}") for side, m in sides.items()}
            for side in sides:
                stats[f"{wl} {side}"] = Stats()
            for _ in range(ROUNDS):
                for side in sides:  # alternate, so drift on a busy machine hits both
                    state["stage"] = f"timing {side} {label}"
                    progress(f"timing {side} {label}…")
                    stats[f"{wl} {side}"].add(timers[side].blocked_autorange(min_run_time=round_s))
            watch.unexpected(timed, f"recompiled while timing the {label} (the timing includes compiling)")
            frames = max(frames, len(watch.frames))
            if wl == "forward" and watch.guard_us:  # every call checks each compiled frame's guards
                guard_us = round(sum(watch.guard_us.values()), 1)
            eager.zero_grad()
            del fn, compiled, timers, sides

    busy = _busy()
    if busy:
        notes.append(f"timing: {busy}; figures are noisier than usual — measure again when it is idle")
    for key, st in stats.items():
        q1, med, q3 = st.ms
        if med > 0 and (q3 - q1) > NOISY_IQR * med:
            wl, side = key.split(" ")
            label = "forward" if wl == "forward" else "train step"
            notes.append(f"timing: the {side} {label} varied a lot (IQR {100 * (q3 - q1) / med:.0f}% of "
                         "the median): something else was probably competing for the machine")
    forward = _timing(stats["forward eager"], stats["forward compiled"])
    train = _timing(stats["train eager"], stats["train compiled"]) if has_train else None
    driver = train if train is not None else forward
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
    notes.extend(_metric_notes(guard_us, forward, warm.get("cache")))
    accuracy_ok = not errors["exceeds"]
    return Benchmark(
        device=device,
        device_name=device_name(device),
        mode=mode or "default",
        forward=forward,
        train_step=train,
        compile_s={"cold": cold_s, "warm": warm_s},
        guard_latency_us=guard_us,
        warm_cache=warm.get("cache"),
        break_even_calls=calls,
        peak_memory_bytes=warm.get("memory", {"eager": None, "compiled": None, "method": "not measured"}),
        max_abs_error={"output": errors["output_abs"], "grad": errors["grad_abs"]},
        max_rel_error={"output": errors["output_rel"], "grad": errors["grad_rel"]},
        verdict=verdict(device, forward, train, cold_s, calls, n_breaks, accuracy_ok),
        torch=torch.__version__,
        inputs=describe_inputs(target.args),
        measured_at=time.time(),
        notes=notes,
    )


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


def _output_accuracy(eager: Model, compiled: Model, errors: dict[str, Any], notes: list[str]) -> None:
    """Outputs of one forward (eval mode, no_grad, same seed) of eager vs compiled."""
    eager.use(False)
    compiled.use(False)
    out_e = [t.clone() for t in tensors_in(_seeded(eager.forward))]
    out_c = [t.clone() for t in tensors_in(_seeded(compiled.forward))]
    again = [t.clone() for t in tensors_in(_seeded(eager.forward, seed=1))]
    random_model = compare(out_e, again)["abs"] > 0
    _record(compare(out_e, out_c), "output", errors, notes, random_model)


def _grads(model: Model, seed: int) -> list[tuple[str, Optional[torch.Tensor]]]:
    assert model.module is not None
    model.zero_grad()
    _seeded(model.loss_backward, seed)
    grads = [(n, None if p.grad is None else p.grad.detach().clone()) for n, p in model.module.named_parameters()]
    model.zero_grad()
    return grads


def _grad_accuracy(eager: Model, compiled: Model, errors: dict[str, Any], notes: list[str]) -> None:
    """Parameter gradients after one backward (train mode, same weights and seed)."""
    eager.use(True)
    compiled.use(True)
    ge, gc_ = _grads(eager, 0), _grads(compiled, 0)
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
