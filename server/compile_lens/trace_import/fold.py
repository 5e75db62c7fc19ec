"""One log's records → what torch recorded for one rank: the compiled frames (named as the user
wrote them: a resume function is its user function), each with its graph breaks, recompiles (the
guard that failed), compile time and cache hits/misses.

Record shapes (torch 2.13, `torch/_logging/_internal.py` `trace_structured` and the callers):
`str` [path, id] interns a file name that stacks name by id; `dynamo_start` {"stack": [{line, name,
filename: id}]} opens a compile (its last frame is the compiled one); `artifact`
`dynamo_graph_break_reason` (payload: torch's graph-break message, "Graph break in user code at
FILE:LINE …"); `artifact` `recompile_reasons` (payload: a JSON list of guard failures — or, trap, one
bare string); `compilation_metrics` (compile_id, co_name, co_filename, co_firstlineno,
entire_frame_compile_time_s, fail_type, …); `bwd_compilation_metrics` (the backward's
inductor_compile_time_s); `artifact` `fx_graph_cache_hit|miss`, `aotautograd_cache_hit|miss`;
with provenance tracking on (`INDUCTOR_PROVENANCE=1`), `artifact`
`inductor_provenance_tracking_node_mappings` then `..._kernel_stack_traces` per compiled graph
(`torch_text.kernel_provenance`): each kernel and the user stack traces of the nodes it came from.
An older torch writes `inductor_triton_kernel_to_post_grad_nodes` and `inductor_post_to_pre_grad_nodes`
instead, and the pre-grad graph (`artifact` `before_pre_grad_graph`, FX's `# File: …:LINE` above
each node: `torch_text.fx_graph_text`). Each graph's `inductor_output_code` (or AOTInductor's
`graph_dump` `inductor_aot_wrapper_code`) comes before its provenance: its kernels' sources
(`torch_text.output_code`). A compile id's second graph is its backward (AOTAutograd compiles the
forward, then the backward). An AOTInductor compile (`torch.export`, no Dynamo frame) has no
compile id: its kernels belong to the user's call that compiled it (the records' `stack`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import IO, Optional

from ..torch_text import compile_settings, fx_graph_text, kernel_provenance
from ..torch_text.frames import frame_name, is_recorded_library_file
from ..torch_text.output_code import kernel_sources
from .reader import ReadStats, Record, is_int, read_records, torch_version_of

BREAK_AT_RE = re.compile(r"Graph break in user code at (.+):(\d+)\s*$", re.M)
GB_URL_RE = re.compile(r"(https?://\S+?/(gb\d{4})\.html)", re.I)
REASON_ID_RE = re.compile(r"^\s*(\d+/\d+):\s*")
STACK_FILE_RE = re.compile(r'File "(.+)", line (\d+), in (\S+)')
COMMENT_LOC_RE = re.compile(r"#\s(\S+):(\d+) in (\S+)\s*$")
RANK_IN_NAME_RE = re.compile(r"_rank_(\d+)_")
MAX_LINE = 2**31 - 1  # a line number the editor's positions can hold (LSP's uinteger)
CACHE_ARTIFACTS = {"fx_graph_cache_hit": "hits", "aotautograd_cache_hit": "hits",
                   "fx_graph_cache_miss": "misses", "aotautograd_cache_miss": "misses"}


@dataclass
class SeenBreak:
    path: str
    line: int
    gb_id: Optional[str]
    gb_type: str
    explanation: str
    hints: list[str]
    url: Optional[str]
    reason: str  # torch's message, untouched
    compile_ids: list[str] = field(default_factory=list)  # every compile that broke here
    stack: list[tuple[str, int, str]] = field(default_factory=list)  # (path, line, function), outermost first


@dataclass
class SeenRecompile:
    compile_id: str  # the compile this recompile made ("0/1")
    failed: str  # the cache entry whose guard failed ("0/0")
    guard: str  # the guard's text ("tensor 'idx' size mismatch at index 0. expected 4, actual 2")
    reasons: list[str]  # every guard failure torch wrote, untouched
    path: Optional[str]  # the user line the guard names, when torch gives one
    line: Optional[int]
    kind: str  # "automatic-dynamic" | "specialization" | "limit"
    changed: str  # which input or value ("idx", "___stack0")


@dataclass
class SeenKernel:
    """A kernel of one compiled graph, as its provenance names it (no time: a trace has no profile)."""

    name: str  # "cpp_fused_mul_relu_0", "triton_poi_fused_add_0", "extern_kernels.addmm", "aten._fft_r2c"
    kind: str  # "generated" | "extern" | "fallback" (`kernel_provenance.kind`)
    compile_id: str
    backward: bool  # the compile's backward graph: the gradient of the lines it names
    stacks: list[list[tuple[str, int]]]  # per FX node: (path, line), outermost first
    source: Optional[str] = None  # a generated kernel's source, from the graph's output code


@dataclass
class CompiledFunction:
    """A user function torch compiled (its resume functions folded in), on one rank."""

    name: str  # as the user wrote it ("forward")
    path: str  # as the run saw it (the remote path)
    line: int  # its first line (the `def`, when torch compiled the function itself)
    frames: list[int] = field(default_factory=list)  # torch's frame ids
    compile_ids: list[str] = field(default_factory=list)
    compile_s: float = 0.0  # forward frame compiles + their backward compiles, seconds
    cache: dict[str, int] = field(default_factory=lambda: {"hits": 0, "misses": 0})
    graph_breaks: list[SeenBreak] = field(default_factory=list)
    recompiles: list[SeenRecompile] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # compiles that failed: "0/2: fail_type: reason"
    kernels: list[SeenKernel] = field(default_factory=list)  # from the provenance artifacts, when the run had them on
    # the settings off torch's defaults, per distinct set: (compile ids, settings, where read) (`compile_settings`)
    settings: list[tuple[list[str], dict[str, str], str]] = field(default_factory=list)
    inductor: bool = False  # an Inductor graph was compiled (a runnable was written): the backend was Inductor

    def add_settings(self, cid: str, found: dict[str, str], source: str) -> None:
        for ids, values, _ in self.settings:
            if values == found:
                if cid not in ids:
                    ids.append(cid)
                return
        self.settings.append(([cid], found, source))


@dataclass
class _Graph:
    """One compiled graph's provenance records, held until the graph's last one (no payload kept
    beyond its kernels' sources and the maps)."""

    frame: Optional[int]
    stack: object = None  # the records' `stack` (an AOTInductor compile's only pointer to its caller)
    sources: dict[str, str] = field(default_factory=dict)
    maps: object = None  # `inductor_provenance_tracking_node_mappings`
    kernel_to_post: object = None  # `inductor_triton_kernel_to_post_grad_nodes`
    history: object = None  # `inductor_post_to_pre_grad_nodes`
    post_ops: dict[str, str] = field(default_factory=dict)  # the post-grad graph's nodes' ops

    def has_kernels(self) -> bool:
        return self.kernel_to_post is not None or isinstance(self.maps, dict) and "cppCodeToPost" in self.maps


@dataclass
class RankTrace:
    """What one log (one process, one rank) recorded."""

    file: str
    rank: Optional[int]
    stats: ReadStats
    functions: list[CompiledFunction] = field(default_factory=list)
    events: list[tuple[str, str, str, Optional[str]]] = field(default_factory=list)  # (compile id, function, what, guard)
    torch_version: Optional[str] = None


class WrongShape(ValueError):
    """A record of a known kind whose fields are not what torch writes there: skipped, counted."""


ERRORS = (WrongShape, TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError, RecursionError)


def _line(value: object) -> int:
    """A line number as torch writes it (absent: 0); WrongShape for anything else."""
    if value is None:
        return 0
    if not is_int(value) or not 0 <= value <= MAX_LINE:  # type: ignore[operator]
        raise WrongShape(f"line {value!r}")
    return value  # type: ignore[return-value]


def _seconds(value: object) -> float:
    """A duration in seconds as torch writes it (absent: 0); WrongShape for a negative, infinite or non-number."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e9:
        raise WrongShape(f"seconds {value!r}")
    return float(value)


def _text(value: object, default: str = "?") -> str:
    if value is None:
        return default
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise WrongShape(f"text {value!r}")
    return str(value)


def parse_break(payload: str) -> Optional[SeenBreak]:
    """torch's graph-break message (the `dynamo_graph_break_reason` artifact) as its parts."""
    at = BREAK_AT_RE.search(payload)
    if at is None:
        return None
    lines = payload.splitlines()
    stack = []  # "User code traceback:" (outermost first), up to torch's own traceback
    if "User code traceback:" in lines:
        for text in lines[lines.index("User code traceback:") + 1:]:
            if text.startswith("Traceback"):
                break
            frame = STACK_FILE_RE.search(text)
            if frame:
                stack.append((frame.group(1), int(frame.group(2)), frame.group(3)))
    end = next((i for i, t in enumerate(lines) if "For more details about this graph break" in t), len(lines))
    lines = lines[:end]  # then the user traceback and torch's exception, which says it all again
    url = GB_URL_RE.search(payload)
    explanation, hints, gb_type = "", [], ""
    for i, text in enumerate(lines):
        stripped = text.strip()
        if stripped.startswith("Explanation:") and not explanation:
            explanation = stripped.partition(":")[2].strip()
            gb_type = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        elif stripped.startswith("Hint:"):
            hints.append(stripped.partition(":")[2].strip())
    if not gb_type:
        reason = next((t for t in lines if t.startswith("Graph Break Reason:")), "")
        gb_type = reason.partition(":")[2].strip()
    line = int(at.group(2)) if len(at.group(2)) <= 10 else MAX_LINE + 1
    if line > MAX_LINE:
        return None
    return SeenBreak(at.group(1), line, url.group(2).upper() if url else None, gb_type, explanation,
                     hints, url.group(1) if url else None, payload, stack=stack)


def reasons_of(payload: Optional[str]) -> list[str]:
    """`recompile_reasons`: a JSON list of guard failures, or one bare string though it says JSON."""
    if not payload:
        return []
    try:
        found = json.loads(payload)
    except ValueError:
        return [payload]
    if isinstance(found, list):
        return [str(r) for r in found]
    return [str(found)]


def _changed(guard: str) -> str:
    tensor = re.match(r"^tensor '(.+?)'", guard)
    if tensor:
        return re.sub(r"\b[LG]\['([^']+)'\]", r"\1", tensor.group(1))
    name = re.match(r"^([\w.\[\]'\"]+?)\s*(?:==|!=|is|<|>)", guard)
    return re.sub(r"\b[LG]\['([^']+)'\]", r"\1", name.group(1)) if name else guard.split()[0] if guard else "?"


def parse_recompile(compile_id: str, reasons: list[str], limit: bool) -> SeenRecompile:
    first = reasons[0] if reasons else ""
    failed_id = REASON_ID_RE.match(first)
    body = first[failed_id.end():] if failed_id else first
    head = body.splitlines()[0] if body else ""
    guard = re.split(r"\s{2,}#\s|\s#\s", head, maxsplit=1)[0].strip()
    path = line = None
    stack = STACK_FILE_RE.findall(body)
    if stack:
        path, line = stack[-1][0], int(stack[-1][1])
    if limit:
        kind = "limit"
    elif "size mismatch" in guard or "stride mismatch" in guard:
        kind = "automatic-dynamic"  # a size change: torch then marks the dimension dynamic
    else:
        kind = "specialization"
    return SeenRecompile(compile_id, failed_id.group(1) if failed_id else "", guard, reasons, path, line, kind,
                         _changed(guard))


class _Folder:
    def __init__(self, trace: RankTrace):
        self.trace = trace
        self.strings: dict[int, str] = {}
        self.by_frame: dict[int, CompiledFunction] = {}
        self.by_name: dict[tuple[str, str], CompiledFunction] = {}
        self.pending_reasons: dict[str, list[str]] = {}
        self.graphs: dict[Optional[str], _Graph] = {}  # per compile id, the graph whose provenance is coming
        self.pre_grad: dict[Optional[str], dict[str, tuple[str, int]]] = {}  # per compile id: pre-grad node -> line
        self.pre_grad_id: dict[Optional[str], Optional[int]] = {}  # per compile id: the pre-grad graph's id
        self.callers: dict[tuple[str, int], CompiledFunction] = {}  # AOTInductor compiles, by the user's call
        self.graphs_of: dict[str, int] = {}  # provenance graphs seen per compile id: the second is the backward
        self.stale: set[str] = set()  # kernel keys earlier backward graphs listed (`kernel_provenance`: stale entries)

    def function(self, frame: int, name: str, path: str, line: int) -> CompiledFunction:
        if frame in self.by_frame:
            return self.by_frame[frame]
        user = frame_name(name)
        key = (path, user)
        found = self.by_name.get(key)
        if found is None:
            found = self.by_name[key] = CompiledFunction(user, path, line)
            self.trace.functions.append(found)
        elif user == name:  # the function itself: its line is the def's (a resume function's is the break's)
            found.line = line
        found.frames.append(frame)
        self.by_frame[frame] = found
        return found

    def add(self, record: Record) -> None:
        kind, meta, cid = record.kind, record.meta, record.compile_id
        frame = record.context.get("frame_id")
        if self.trace.rank is None and is_int(record.context.get("rank")):
            self.trace.rank = record.context["rank"]
        if kind == "str":
            if not (isinstance(meta, list) and len(meta) == 2 and is_int(meta[1])):
                raise WrongShape("str")
            self.strings[meta[1]] = _text(meta[0])
        elif kind == "dynamo_start" and isinstance(meta, dict) and frame is not None:
            stack = meta.get("stack") or []
            if not isinstance(stack, list):
                raise WrongShape("stack")
            top = stack[-1] if stack and isinstance(stack[-1], dict) else {}
            name, line = _text(top.get("name")), _line(top.get("line"))
            filename = top.get("filename")
            path = self.strings.get(filename, _text(filename)) if is_int(filename) else _text(filename)
            self.function(frame, name, path, line)
        elif kind == "artifact" and isinstance(meta, dict):
            self.artifact(str(meta.get("name")), record, frame, cid)
        elif kind == "compilation_metrics" and isinstance(meta, dict):
            self.metrics(meta, frame, cid)
        elif kind in ("inductor_output_code", "graph_dump") and record.payload:
            if kind == "graph_dump" and not (isinstance(meta, dict) and meta.get("name") == "inductor_aot_wrapper_code"):
                return
            graph = self.graphs.get(cid)
            if graph is not None and graph.has_kernels():  # the graph before it had no stack traces: the older maps
                self.finish_graph(cid)
            self.graph(record).sources = kernel_sources(record.payload)
        elif kind == "bwd_compilation_metrics" and isinstance(meta, dict):
            if isinstance(meta.get("compile_id"), str):
                self.finish_graph(meta["compile_id"])
            fn = self._of_compile(meta.get("compile_id"))
            if fn is not None:
                fn.compile_s += _seconds(meta.get("inductor_compile_time_s"))

    def _of_compile(self, compile_id: object) -> Optional[CompiledFunction]:
        if not isinstance(compile_id, str) or "/" not in compile_id:
            return None
        head = compile_id.split("/")[0].lstrip("!")
        return self.by_frame.get(int(head)) if head.isascii() and head.isdigit() and len(head) < 12 else None

    def artifact(self, name: str, record: Record, frame: Optional[int], cid: Optional[str]) -> None:
        if name == "torch_version":
            self.trace.torch_version = torch_version_of(record) or self.trace.torch_version
            return
        fn = self.by_frame.get(frame) if frame is not None else None
        if name in CACHE_ARTIFACTS and fn is not None:
            fn.cache[CACHE_ARTIFACTS[name]] += 1
        elif name == "dynamo_graph_break_reason" and fn is not None and record.payload:
            seen = parse_break(record.payload)
            if seen is None:
                return
            same = next((b for b in fn.graph_breaks if (b.path, b.line, b.gb_type) == (seen.path, seen.line, seen.gb_type)), None)
            if same is None:
                fn.graph_breaks.append(seen)
                same = seen
                self.trace.events.append((cid or "?", fn.name, f"graph break at {os.path.basename(seen.path)}:{seen.line}",
                                          None))
            if cid and cid not in same.compile_ids:
                same.compile_ids.append(cid)
        elif name == kernel_provenance.NODE_MAPPINGS:
            self.graph(record).maps = json.loads(record.payload or "{}")
        elif name == kernel_provenance.KERNEL_TO_POST:
            self.graph(record).kernel_to_post = json.loads(record.payload or "{}")
        elif name == kernel_provenance.POST_TO_PRE:
            self.graph(record).history = json.loads(record.payload or "{}")
        elif name in kernel_provenance.POST_GRAD_GRAPHS and record.payload:
            self.graph(record).post_ops = fx_graph_text.node_ops(record.payload)
        elif name in kernel_provenance.PRE_GRAD_GRAPHS and record.payload:
            lines = fx_graph_text.node_frames(record.payload)  # before and after the pre-grad passes: both
            self.pre_grad[cid] = {**lines, **self.pre_grad.get(cid, {})}
            self.pre_grad_id[cid] = self.pre_grad_id.get(cid) or fx_graph_text.graph_id(record.payload)
        elif name == kernel_provenance.STACK_TRACES:
            graph = self.graphs.pop(cid, None) or _Graph(frame)
            owner = self.owner(frame, graph.stack or record.context.get("stack"))
            backward = self.graphs_of.get(cid or "", 0) > 0
            self.graphs_of[cid or ""] = self.graphs_of.get(cid or "", 0) + 1
            payload = json.loads(record.payload or "{}")
            for kname, kind, _, stacks in kernel_provenance.kernels(payload, graph.maps, self.stale if backward else ()):
                if owner is not None:
                    owner.kernels.append(SeenKernel(kname, kind, cid or "", backward, stacks, graph.sources.get(kname)))
            if backward:
                self.stale.update(kernel_provenance.keys(payload, graph.maps))
        elif name == "fx_graph_runnable" and fn is not None and record.payload:
            # torch's own list of the settings off their defaults, inside the compile (mode's patches in force)
            fn.inductor = True
            fn.add_settings(cid or "?", compile_settings.non_default(compile_settings.read_codegen(record.payload)),
                            "fx_graph_runnable")
        elif name == "recompile_reasons" and cid is not None:
            self.pending_reasons[cid] = reasons_of(record.payload)

    def graph(self, record: Record) -> _Graph:
        """The graph of this compile id whose provenance is coming (a new one after the last finished)."""
        cid = record.compile_id
        if cid not in self.graphs:
            self.graphs[cid] = _Graph(record.context.get("frame_id"))
        graph = self.graphs[cid]
        graph.stack = graph.stack or record.context.get("stack")
        return graph

    def owner(self, frame: Optional[int], stack: object) -> Optional[CompiledFunction]:
        """The compiled function a graph's kernels belong to: its Dynamo frame's, else (AOTInductor:
        no frame) the innermost call of the records' stack in the user's code, as a function of its own."""
        if frame is not None:
            return self.by_frame.get(frame)
        calls = [f for f in stack if isinstance(f, dict)] if isinstance(stack, list) else []
        for call in reversed(calls):
            name, line, file = call.get("name"), call.get("line"), call.get("filename")
            path = self.strings.get(file) if is_int(file) else file if isinstance(file, str) else None
            if path and isinstance(name, str) and is_int(line) and not is_recorded_library_file(path):
                key = (path, _line(line))
                if key not in self.callers:
                    self.callers[key] = CompiledFunction(frame_name(name), path, key[1])
                    self.trace.functions.append(self.callers[key])
                return self.callers[key]
        return None

    def finish_graph(self, cid: Optional[str]) -> None:
        """A graph whose provenance is the older maps (no stack traces came): its kernels, on the
        pre-grad graph's lines."""
        graph = self.graphs.pop(cid, None)
        if graph is None or not graph.has_kernels():
            return
        try:
            self._older_kernels(cid, graph)
        except ERRORS:  # maps of a shape torch does not write: the graph's kernels are left out
            pass

    def _older_kernels(self, cid: Optional[str], graph: _Graph) -> None:
        owner = self.owner(graph.frame, graph.stack)
        backward = self.graphs_of.get(cid or "", 0) > 0
        self.graphs_of[cid or ""] = self.graphs_of.get(cid or "", 0) + 1
        maps = graph.maps if isinstance(graph.maps, dict) else {}
        kernel_to_post = graph.kernel_to_post if graph.kernel_to_post is not None else maps.get("cppCodeToPost")
        post_pre = kernel_provenance.post_to_pre(maps, graph.history, self.pre_grad_id.get(cid))
        for kname, kind, _, stacks in kernel_provenance.older_kernels(kernel_to_post, post_pre, self.pre_grad.get(cid, {}),
                                                                        graph.post_ops):
            if owner is not None:
                owner.kernels.append(SeenKernel(kname, kind, cid or "", backward, stacks, graph.sources.get(kname)))

    def metrics(self, meta: dict, frame: Optional[int], cid: Optional[str]) -> None:
        self.finish_graph(cid)  # a forward's provenance comes before its compile's metrics
        cid = _text(meta.get("compile_id") or cid or "?")
        seconds = _seconds(meta.get("entire_frame_compile_time_s"))  # checked before anything is kept
        first_line = _line(meta.get("co_firstlineno"))
        fn = self.by_frame.get(frame) if frame is not None else self._of_compile(cid)
        if fn is None and meta.get("co_name"):
            fn = self.function(frame if frame is not None else -1, _text(meta["co_name"]),
                               _text(meta.get("co_filename")), first_line)
        if fn is None:
            return
        if cid not in fn.compile_ids:
            fn.compile_ids.append(cid)
        fn.compile_s += seconds
        if not any(cid in ids for ids, _, _ in fn.settings) and meta.get("dynamo_config"):  # no Inductor graph
            fn.add_settings(cid, compile_settings.from_dynamo_config(meta.get("dynamo_config")), "compilation_metrics")
        fail_type = meta.get("fail_type")
        limit = bool(fail_type) and "RecompileLimit" in str(fail_type) or "recompile_limit" in str(meta.get("fail_reason"))
        if fail_type:
            fn.failures.append(f"{cid}: {fail_type}: {str(meta.get('fail_reason') or '').splitlines()[0:1]}")
        reasons = self.pending_reasons.pop(cid, None)
        if reasons is not None or limit:
            seen = parse_recompile(cid, reasons or [str(meta.get("fail_reason") or "")], limit)
            values = next((v for ids, v, _ in fn.settings if cid in ids), {})
            if seen.kind == "automatic-dynamic" and values.get(compile_settings.DYNAMO + "automatic_dynamic_shapes") == "False":
                seen.kind = "specialization"  # automatic dynamic shapes off (`dynamic=False`): every new size recompiles
            fn.recompiles.append(seen)
            self.trace.events.append((cid, fn.name, f"recompile of `{fn.name}`", seen.guard))


def fold(stream: IO[str], file: str) -> RankTrace:
    """Read one log; never raises on its content (what could not be read is in `trace.stats`: a
    record of the wrong shape is skipped there with its line)."""
    match = RANK_IN_NAME_RE.search(os.path.basename(file))
    trace = RankTrace(file, int(match.group(1)) if match else None, ReadStats())
    folder = _Folder(trace)
    for record in read_records(stream, trace.stats):
        try:
            folder.add(record)
        except ERRORS:  # a field of a shape torch does not write: the record is skipped, counted
            trace.stats.skip_wrong_shape(record.line)
    for cid in list(folder.graphs):  # graphs the log ends on (an AOTInductor compile has no metrics of its own)
        folder.finish_graph(cid)
    for cid, reasons in folder.pending_reasons.items():  # a recompile whose compile the log does not finish
        fn = folder._of_compile(cid)
        if fn is not None:
            fn.recompiles.append(parse_recompile(cid, reasons, False))
            trace.events.append((cid, fn.name, f"recompile of `{fn.name}`", fn.recompiles[-1].guard))
    return trace
