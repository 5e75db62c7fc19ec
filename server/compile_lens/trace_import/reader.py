"""Stream the records of one structured-trace log (what `TORCH_TRACE=DIR` writes).

Each record is one line, a glog prefix then JSON: `V1203 22:51:49.123000 7406 torch/_dynamo/x.py:12] {...}`
(torchrun may prefix `[rank1]:`); a record whose JSON has `has_payload` is followed by its payload,
one tab-indented line per payload line (torch's `TorchLogsFormatter(trace=True)`). Read one line at a
time: memory stays flat however large the log. What cannot be read is counted, never fatal: a line
that is not a record, a record cut short (a log still being written, or a job that was killed),
and kinds this reader does not know (a newer torch's), which are counted by name and skipped. A
record of a known kind whose fields have the wrong shape (a context id that is not a number, a
string id that is a list) is counted with its line and skipped too (`ReadStats.wrong_shape`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import IO, Any, Iterator, Optional

PREFIX_RE = re.compile(r"^(?:\[rank\d+\]:)?[VIWEC]\d{4} [\d:.]+\s+\d+ [^\]]*\] ")

# The record kinds torch 2.13 writes (`trace_structured(name, …)` calls in its source); `fold`
# reads the first group, the rest are known and not needed here.
READ_KINDS = {"str", "dynamo_start", "artifact", "compilation_metrics", "bwd_compilation_metrics",
              "inductor_output_code", "graph_dump"}  # the last two: the kernels' sources
KNOWN_KINDS = READ_KINDS | {
    "aot_backward_graph", "aot_forward_graph", "aot_inference_graph", "aot_joint_graph", "chromium_event",
    "compiled_autograd_graph", "create_symbol", "create_unbacked_symbol", "describe_source", "describe_storage",
    "describe_tensor", "dump_file", "dynamo_cpp_guards_str", "dynamo_guards", "dynamo_output_graph",
    "expression_created", "graph_dump", "guard_added", "guard_added_fast", "guard_on_data_dependent_error",
    "inductor_output_code", "inductor_post_grad_graph", "link", "mismatched_fake_kernel", "missing_fake_kernel",
    "optimize_ddp_split_child", "optimize_ddp_split_graph", "propagate_real_tensors",
    "propagate_real_tensors_provenance", "symbolic_shape_specialization", "export", "exported_program",
    "inductor_input_graph", "aot_autograd_backward_compilation_metrics", "compilation_metrics_runtime",
}
# what a record carries beside its kind (torch's `reserved_names`, and the payload's hash)
CONTEXT_KEYS = {"rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "severity",
                "timestamp", "pathname", "thread", "subgraph_name", "has_payload", "stack"}


@dataclass
class Record:
    kind: str
    meta: Any  # the kind's own metadata (a dict; for `str`, [path, id])
    context: dict[str, Any]  # rank, frame_id, frame_compile_id, attempt, ...
    payload: Optional[str]  # None: the record has none; "" when it was cut short
    line: int  # 1-based line of the record in the log

    @property
    def compile_id(self) -> Optional[str]:
        """torch's "frame/compile" id ("0/1"), as its logs and tlparse show it; None outside a compile."""
        frame, compile_ = self.context.get("frame_id"), self.context.get("frame_compile_id")
        if frame is None or compile_ is None:
            return None
        return f"{frame}/{compile_}"


@dataclass
class ReadStats:
    """What one log held beside the records that were read."""

    lines: int = 0
    records: int = 0
    bytes: int = 0
    not_records: int = 0  # lines that are neither a record nor a payload line
    first_bad_line: Optional[int] = None
    truncated: bool = False  # the last record was cut short (no newline, bad JSON, or a payload cut)
    unknown_kinds: Counter = field(default_factory=Counter)  # kind -> records skipped
    wrong_shape: int = 0  # records whose fields are not what their kind holds: skipped
    wrong_shape_lines: list[int] = field(default_factory=list)  # the first few of them

    def skip_wrong_shape(self, line: int) -> None:
        self.wrong_shape += 1
        if len(self.wrong_shape_lines) < WRONG_SHAPE_LINES_KEPT:
            self.wrong_shape_lines.append(line)


WRONG_SHAPE_LINES_KEPT = 5
# context fields that torch writes as integers (a frame id, a rank): anything else is a wrong shape
INT_CONTEXT = ("rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt")


def is_int(value: Any) -> bool:
    """A JSON integer (a bool is not one, though Python says it is)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _parse(text: str) -> Optional[dict[str, Any]]:
    match = PREFIX_RE.match(text)
    if match is None:
        return None
    try:
        found = json.loads(text[match.end():])
    except (ValueError, RecursionError):  # bad JSON, a number over Python's digit limit, deep nesting
        return None
    return found if isinstance(found, dict) else None


def _record(data: dict[str, Any], line: int, stats: ReadStats) -> Optional[Record]:
    kinds = [k for k in data if k not in CONTEXT_KEYS]
    if len(kinds) != 1:
        stats.not_records += 1
        return None
    kind = kinds[0]
    stats.records += 1
    if kind not in KNOWN_KINDS:
        stats.unknown_kinds[kind] += 1
    context = {k: v for k, v in data.items() if k in CONTEXT_KEYS}
    if any(context.get(k) is not None and not is_int(context[k]) for k in INT_CONTEXT):
        stats.skip_wrong_shape(line)
        return None
    return Record(kind, data[kind], context, None, line)


def read_records(stream: IO[str], stats: ReadStats) -> Iterator[Record]:
    """The records of the kinds `fold` reads (`READ_KINDS`), in order, with their payloads; every
    other line is only counted in `stats`. Holds one record (and its payload) at a time."""
    pending: Optional[Record] = None  # a record that has a payload, still collecting it
    payload: list[str] = []
    wants_payload = False
    for number, raw in enumerate(stream, 1):
        stats.lines = number
        stats.bytes += len(raw)
        cut = not raw.endswith("\n")
        text = raw.rstrip("\n")
        if text.startswith("\t"):
            if pending is not None:
                payload.append(text[1:])
            elif not wants_payload:
                stats.not_records += 1
            stats.truncated = cut
            continue
        if pending is not None:
            pending.payload = "\n".join(payload)
            yield pending
        pending, payload, wants_payload = None, [], False
        data = _parse(text) if text.strip() else None
        if data is None:
            if text.strip():
                if cut:
                    stats.truncated = True
                else:
                    stats.not_records += 1
                    stats.first_bad_line = stats.first_bad_line or number
            continue
        record = _record(data, number, stats)
        stats.truncated = False
        if record is None:
            wants_payload = "has_payload" in data  # skipped with it
            continue
        if record.kind not in READ_KINDS:
            wants_payload = "has_payload" in data  # skipped with it
            continue
        if "has_payload" in data:
            pending = record
        else:
            yield record
    if pending is not None:
        pending.payload = "\n".join(payload)
        yield pending


def torch_version_of(record: Record) -> Optional[str]:
    """The `torch_version` artifact's version ("2.13.0+cpu"), if this is it."""
    if record.kind != "artifact" or not isinstance(record.meta, dict) or record.meta.get("name") != "torch_version":
        return None
    try:
        version = json.loads(record.payload or "").get("pytorch_version")
    except (ValueError, AttributeError, RecursionError):
        return None
    return version if isinstance(version, str) else None
