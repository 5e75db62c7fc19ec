"""The cold child's job and result (`bench_child`, started by `cold.Child`), typed: JSON only at the
process boundary (`json()` of the job on the child's command line, its result file read back with
`from_json`), which names a missing field instead of failing later on a key."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Optional, TypeVar

from ....protocol import CompileTime, ContentionReport, Problem, TargetSpec, from_dict
from ..timing.rounds import Paired

R = TypeVar("R")


def strict_from_json(cls: type[R], data: dict[str, Any], who: str) -> R:
    """`cls` from a JSON object that must carry every one of its fields (this version's child wrote them all)."""
    missing = [f.name for f in fields(cls) if f.name not in data]  # type: ignore[arg-type]
    if missing:
        raise ValueError(f"{who} lacks {', '.join(missing)} (written by another version of Compile Lens?)")
    return from_dict(cls, data)


@dataclass
class ColdJob:
    """What one cold child is asked (`children.child_job`): the user's file, the target, the device,
    the compile mode, the workloads (the first is the one measured for memory) and the tasks, in order."""

    path: str
    root: str
    spec: TargetSpec
    device: str
    mode: str
    workloads: list[str]
    step_begin: bool
    tasks: list[str]  # "compile", "first_look", "memory_eager", "memory_compiled" (`bench_child`)
    max_seconds: float
    what: str  # the stage in words, for heartbeats and a timeout: "the forward's cold compile (fresh process)"
    result_path: str = ""  # set by `cold.Child`: where the child writes its result
    gated: bool = False  # set by `cold.Child`: build, then wait for "go" on stdin

    def json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ColdJob:
        return strict_from_json(cls, data, "the cold child's job")


@dataclass
class FirstLook:
    """The forward's first paired rounds, taken in its cold child right after the compile
    (`timing.per_workload.first_look`); `why` set: none stand (the parent times the forward)."""

    pairs: Optional[Paired] = None
    busy: Optional[ContentionReport] = None  # the busy reading over them
    unmeasured: dict[str, str] = field(default_factory=dict)  # parts not measurable, and why
    s: float = 0.0  # their seconds
    warmup_compiles: int = 0  # frames calls 2 and 3 compiled again (none, unless the user's code recompiles)
    why: Optional[str] = None


@dataclass
class ChildPeaks:
    """The allocator peak of one call of the first workload, per side (the `memory_*` tasks; None: not run)."""

    eager: Optional[int] = None
    compiled: Optional[int] = None
    method: str = ""


@dataclass
class ColdResult:
    """What one cold child reports (`bench_child.run`); `error` set: it failed, the rest is partial."""

    compile_s: dict[str, float] = field(default_factory=dict)  # per workload, the first's with `import_s`
    import_s: float = 0.0  # Dynamo and Inductor's import in that process
    notes: list[str] = field(default_factory=list)
    memory: ChildPeaks = field(default_factory=ChildPeaks)
    cache: Optional[dict[str, int]] = None  # Inductor's and AOTAutograd's {"hits", "misses"}; None: not recorded
    # `remote_cache.remote_counts`: torch's remote-cache counters as this torch names them
    remote_cache: Optional[dict[str, Any]] = None
    # the FX-graph cache lookups (`torch_text.cache_keys`, as the trial's hook records them): why a later compile missed
    fx_keys: list[dict[str, Any]] = field(default_factory=list)
    compile_time: Optional[CompileTime] = None  # the cold compile per frame (`per_frame.collect`)
    first_look: Optional[FirstLook] = None  # the forward's child only
    error: Optional[Problem] = None
    stopped: bool = False  # a gated child whose parent closed its stdin without a word

    def json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ColdResult:
        return strict_from_json(cls, data, "the cold child's result")
