"""The restart path: for a target that compiles to one graph, an `aot_compile` artifact (built once,
saved with `save_compiled_function`, loaded by `torch.compiler.load_compiled_function` in a fresh
process, then the first call) next to the other ways a process restarts, each measured in its own
fresh process from importing Dynamo and Inductor to the end of the first call (`restart_child`):

- cold: the default `torch.compile`, nothing cached (the lever's `before`);
- warm: the same process again after its in-memory caches are cleared: this machine's disk cache;
- mega_cache: an empty cache folder loaded with the default compile's Mega-Cache
  (`torch.compiler.save_cache_artifacts` / `load_cache_artifacts`);
- warm_remote: the measurement's own figure, a fresh process served by the team's remote cache
  (only where the measurement ran with one, and only when it measured the forward alone: a served
  train step is not the same first call, and stays apart as `warm_remote_train_step_s`);
- aot_artifact: an empty cache folder, the artifact loaded and called (the lever's `after`).

`fastest` names the quickest path measured: the GPU bill prices a restart at it (`cost.restart_line`).
A target with graph breaks is not a candidate (`aot_compile` needs one graph): the lever is dropped."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any, Callable, Optional

import torch

from ...protocol import Benchmark, Lever, TargetResult
from ..loader import BuiltTarget
from ..measure.workload.model import compile_kwargs
from .judge import compile_change
from .sides import compile_side

CHILD = "compile_lens.worker.levers.restart_child"
CHANGE = "torch.compile(..., fullgraph=True).aot_compile(...) saved once, loaded at each start"
PATHS = {"cold": "cold compile", "warm": "warm (this machine's disk cache)",
         "mega_cache": "Mega-Cache artifact", "warm_remote": "remote cache", "aot_artifact": "aot_compile artifact"}
ERROR_SAID = 1e-4  # the loaded artifact's output against eager, above which the lever says so
CHILDREN = 4  # fresh processes: default (+ its Mega-Cache), aot build, aot load, Mega-Cache load


def missing() -> Optional[str]:
    """None when this torch can build and load an `aot_compile` artifact, else why not."""
    from torch._dynamo import config

    if not callable(getattr(torch.compiler, "load_compiled_function", None)) or \
            not hasattr(config, "enable_aot_compile"):
        return (f"not measured: not on this torch (torch {torch.__version__} has no aot_compile / "
                "torch.compiler.load_compiled_function)")
    if not config.enable_aot_compile:
        return "not measured: torch._dynamo.config.enable_aot_compile is off in this environment"
    return None


def applies(result: TargetResult, obj: Any) -> bool:
    """The trace saw one graph and no break (a target not traced is not known to be one: not tried)."""
    return callable(obj) and not result.graph_breaks and result.graph_count == 1


def dropped(lever: Lever) -> bool:
    """The target broke the graph when traced whole: `aot_compile` does not apply to it."""
    return lever.lever == "aot_artifact" and bool(lever.data.get("graph_breaks"))


def fastest(paths: dict[str, Optional[float]]) -> Optional[str]:
    """The quickest restart path measured, by name, or None when none was."""
    measured = {k: v for k, v in paths.items() if v is not None}
    return min(measured, key=lambda k: measured[k]) if measured else None


def paths_words(paths: dict[str, Optional[float]]) -> str:
    """`cold compile 35.0 s, …, aot_compile artifact 4.8 s (fastest)`."""
    best = fastest(paths)
    return ", ".join(f"{PATHS.get(k, k)} {v:.1f} s" + (" (fastest)" if k == best else "")
                     for k, v in paths.items() if v is not None)


def restart_paths(default: dict[str, Any], mega: Optional[dict[str, Any]], loaded: dict[str, Any],
                  bench: Optional[Benchmark]) -> tuple[dict[str, Optional[float]], dict[str, float]]:
    """Seconds per restart path (None: not measured), and what was measured of another first call: the
    measurement's served compile is of its first workload, the forward only when it timed no train step."""
    remote = bench.compile_s.warm_remote if bench else None
    forward_remote = remote if bench is not None and bench.train_step is None else None
    paths = {"cold": default["cold_s"], "warm": default.get("warm_s"),
             "mega_cache": mega["cold_s"] if mega else None, "warm_remote": forward_remote,
             "aot_artifact": loaded["cold_s"]}
    apart = {"warm_remote_train_step_s": round(remote, 2)} if remote is not None and forward_remote is None else {}
    return {k: round(v, 2) if v is not None else None for k, v in paths.items()}, apart


def measure(result: TargetResult, target: BuiltTarget, *, path: str, root: str, device: str, mode: str,
            max_seconds: float, progress: Callable[..., None]) -> Lever:
    """The lever; one that `dropped` says of when the target does not trace to one graph (not shown)."""
    folder = tempfile.mkdtemp(prefix="compile-lens-restart-")
    files = {"aot": f"{folder}/fn.aot", "mega": f"{folder}/mega.bin",
             "compile_kwargs": compile_kwargs(target, mode)}

    def side(task: str, words: str) -> dict[str, Any]:
        progress(f"levers: {words} in a fresh process…")
        return compile_side(target, "default", path=path, root=root, device=device, mode=mode,
                            max_seconds=max_seconds, progress=progress, module=CHILD, extra={**files, "task": task})

    try:
        built = side("aot_save", "building the aot_compile artifact")
        if built.get("graph_breaks"):
            return Lever("aot_artifact", CHANGE, "not measured", data={"graph_breaks": built["graph_breaks"]})
        if built.get("unsaveable"):  # one graph, but torch cannot write it down: said, not dropped
            return Lever("aot_artifact", CHANGE, "not measured",
                         f"not measured: torch cannot save an aot_compile artifact of this model ({built['unsaveable']}; "
                         "a guard on an object's identity cannot be checked in another process)")
        default = side("default", "compiling the default way, then saving its Mega-Cache")
        loaded = side("aot_load", "loading the aot_compile artifact and calling it")
        mega = side("mega_load", "loading the Mega-Cache and compiling") if default.get("mega_bytes") else None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    paths, apart = restart_paths(default, mega, loaded, result.benchmark)
    best = fastest(paths)
    lever = Lever("aot_artifact", CHANGE, "no change",
                  compile_s={"before": paths["cold"], "after": paths["aot_artifact"],
                             "cpu_before": _r(default.get("cold_cpu_s")), "cpu_after": _r(loaded.get("cold_cpu_s"))},
                  data={"paths": paths, "fastest": best, "build_s": _r(built.get("cold_s")),
                        "artifact_bytes": built.get("bytes"), "mega_bytes": default.get("mega_bytes"),
                        "max_abs_error": loaded.get("max_abs_error"),
                        **({"mega_missing": default["mega_missing"]} if default.get("mega_missing") else {}),
                        **apart})
    ratio = compile_change(default, loaded, default.get("busy") or loaded.get("busy"))
    restart = f"restart {paths['cold']:.1f} s → {paths['aot_artifact']:.1f} s"
    every = f"restart paths (importing Dynamo to the first call): {paths_words(paths)}"
    if ratio is None:
        lever.verdict = "inconclusive"
        lever.why = f"{restart}, but {default.get('busy') or loaded.get('busy') or 'the wall and CPU clocks disagree'}; {every}"
    elif ratio <= 0.8:
        lever.verdict, lever.why = "better", f"{restart}; {every}"
        lever.action = f"Ship an aot_compile artifact: {restart} (measured)"
    elif ratio >= 1.25:
        lever.verdict, lever.why = "worse", f"{restart}; {every}"
    else:
        lever.why = f"{restart} (within the noise of one restart each); {every}"
    error = loaded.get("max_abs_error")
    if error is not None and error > ERROR_SAID:  # said whatever the clocks say; no edit offered on it
        lever.why += f"; the loaded artifact's first output differs from eager by up to {error:.2g}"
        lever.action = ""
    return lever


def _r(value: Any) -> Any:
    return round(value, 2) if isinstance(value, (int, float)) else value
