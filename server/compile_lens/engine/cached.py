"""One file's targets in the result cache, phase by phase: what the cache holds for a target at a
phase (moved to the file's text of today) and storing a phase's result once it is settled. The
engine's `check` and the editor's scheduler both go through it, so both key a target one way
(`jobs.cache.run_keys`) and either one's results serve the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from ..jobs.cache import (
    ResultCache,
    ResultWriter,
    TargetKeys,
    read_bench,
    read_deployment,
    read_levers,
    read_result,
    read_sweep,
    read_trace,
    run_keys,
    with_deployment,
    with_recompiles,
    write_bench,
    write_deployment,
    write_levers,
    write_sweep,
    write_trace,
)
from ..jobs.levers import with_cached_levers
from ..protocol import Benchmark, Lever, Recompile, TargetResult
from ..settings import Settings


@dataclass
class FileCache:
    """The cache entries of one file's code (`source`, its fingerprints) under one run's settings.
    `path`: the file as its results name it (the path the worker was given); `key_path`: the path
    the keys are built from when it is another (the editor keys by the saved file's real path).
    `python`: the workers' interpreter when it is not this process's own (`check --compare-with`)."""

    cache: ResultCache
    path: str
    source: str
    fingerprint: str
    deps_fingerprint: str
    settings: Settings
    torch_version: Optional[str]
    python: Optional[str] = None
    key_path: str = ""
    _keys: dict[str, TargetKeys] = field(default_factory=dict, repr=False)

    def keys(self, spec: Any) -> TargetKeys:
        """The target's keys (built once per target: they read the project root off the disk)."""
        if spec.name not in self._keys:
            self._keys[spec.name] = run_keys(self.torch_version, self.key_path or self.path, self.fingerprint, self.deps_fingerprint,
                                             spec, self.settings, self.python)
        return self._keys[spec.name]

    def keys_of(self, specs: Iterable[Any]) -> dict[str, TargetKeys]:
        return {spec.name: self.keys(spec) for spec in specs}

    # --- what the cache holds, phase by phase ---------------------------------------------------

    def trace(self, spec: Any) -> Optional[TargetResult]:
        """The cached trace, in `source`'s positions (None: not cached, or other code)."""
        return read_trace(self.cache, self.keys(spec), self.source, self.path)

    def sweep(self, spec: Any) -> Optional[list[Recompile]]:
        """The cached recompile sweep's recompiles, in `source`'s positions."""
        return read_sweep(self.cache, self.keys(spec), self.source, self.path)

    def figures(self, spec: Any) -> Optional[Benchmark]:
        return read_bench(self.cache, self.keys(spec))

    def deployment(self, spec: Any) -> Optional[dict]:
        """The export and fallback answers measured with the figures (`jobs.cache.deployment_of`)."""
        return read_deployment(self.cache, self.keys(spec))

    def with_sweep(self, spec: Any, result: TargetResult) -> Optional[TargetResult]:
        """`result` with its cached sweep; None when the sweep is not cached."""
        recompiles = self.sweep(spec)
        return None if recompiles is None else with_recompiles(result, recompiles)

    def with_deployment(self, spec: Any, result: TargetResult) -> TargetResult:
        """`result` with its cached deployment answers, when there are any."""
        deployment = self.deployment(spec)
        return result if deployment is None else with_deployment(result, deployment)

    def whole(self, spec: Any, *, recompiles: bool, benchmark: bool) -> Optional[TargetResult]:
        """The whole answer, or None when any asked-for part is missing."""
        return read_result(self.cache, self.keys(spec), self.source, self.path, recompiles=recompiles,
                           benchmark=benchmark)

    def with_levers(self, spec: Any, result: TargetResult) -> Optional[TargetResult]:
        """`result` with the levers measured on the same code; None when they are not cached."""
        return with_cached_levers(self.cache, self.keys(spec), result)

    def levers(self, spec: Any) -> Optional[list[Lever]]:
        return read_levers(self.cache, self.keys(spec))

    # --- a phase's result stored (each only once it is settled: `jobs.cache`) ----------------------

    def store_trace(self, spec: Any, result: TargetResult) -> bool:
        return write_trace(self.cache, self.keys(spec), result, self.source)

    def store_sweep(self, spec: Any, result: TargetResult) -> bool:
        return write_sweep(self.cache, self.keys(spec), result, self.source)

    def store_measure(self, spec: Any, result: TargetResult) -> None:
        """The figures, then the deployment answers that follow them in the same phase."""
        keys = self.keys(spec)
        write_bench(self.cache, keys, result)
        write_deployment(self.cache, keys, result)

    def store_levers(self, spec: Any, result: TargetResult) -> bool:
        return write_levers(self.cache, self.keys(spec), result)

    def writer(self, specs: Iterable[Any]) -> ResultWriter:
        """Stores a running job's results as the worker sends them, every phase (`ResultWriter`)."""
        return ResultWriter(self.cache, self.keys_of(specs), self.source)


def cached_whole(cached: Optional[FileCache], specs: Iterable[Any], *, recompiles: bool, benchmark: bool,
                 levers: bool) -> tuple[dict[str, TargetResult], set[str]]:
    """The results the cache has whole, by target, and the targets among them whose levers it lacks
    (asked for, not cached: the levers phase runs alone, handed those figures)."""
    results: dict[str, TargetResult] = {}
    levers_todo: set[str] = set()
    if cached is None:
        return results, levers_todo
    for spec in specs:
        hit = cached.whole(spec, recompiles=recompiles, benchmark=benchmark)
        if hit is None:
            continue
        results[spec.name] = hit
        if levers and hit.status == "ok":
            with_levers = cached.with_levers(spec, hit)
            if with_levers is None:
                levers_todo.add(spec.name)
            else:
                results[spec.name] = with_levers
    return results, levers_todo


def cached_figures(cached: FileCache, specs: Iterable[Any]) -> dict[str, Benchmark]:
    """The figures the cache holds for the targets that have inputs, by target."""
    found = {}
    for spec in specs:
        if spec.inputs is not None:
            figures = cached.figures(spec)
            if figures is not None:
                found[spec.name] = figures
    return found
