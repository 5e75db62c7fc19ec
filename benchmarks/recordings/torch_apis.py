"""Which torch release first has each torch API the worker reads (docs/torch-apis.md).

Reads torch's own sources from wheels, nothing is imported:
    for v in 2.4.0 2.5.0 ... 2.13.0; do pip download torch==$v --no-deps -d WHEELS; done
    python -m benchmarks.recordings.torch_apis WHEELS
(PyPI's CUDA wheels, about 0.8 GB each; only the Python files named below are read from them.)
`--installed` reads the installed torch's sources instead (the `torch_apis` unit: every API the
worker reads, present on this torch or its fallback named) and prints the figures as JSON too.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import zipfile
from pathlib import Path


def _has(path: str, *patterns: str):
    """True where the file exists and every regular expression matches somewhere in it."""
    return (path, patterns)


# (what the worker uses, where it is used, the check, what it does on a torch without it)
APIS = [
    ("logger artifacts `graph_breaks`, `recompiles` (`torch._logging.set_logs`)", "collector",
     _has("torch/_logging/_registrations.py", r"register_artifact\(\s*\"graph_breaks\"", r"register_artifact\(\s*\"recompiles\""),
     "nothing from the log: explain's reasons only"),
    ("`InstructionTranslator.log_graph_break` locals `frame_loc`, `reason`, `user_stack`, `exc`", "collector",
     _has("torch/_dynamo/symbolic_convert.py", r"def log_graph_break\(", r"frame_loc = ", r"user_stack = "),
     "2.4–2.5: the same locals in `wrapper` (`excp`, the reason from the record's exception); else the record's text"),
    ("a repeated break logged with args (file, line, reason)", "collector",
     _has("torch/_dynamo/symbolic_convert.py", r"user stack suppressed due to duplicate graph break"),
     "the record's text"),
    ("`Unsupported.gb_type`", "collector, graph_breaks",
     _has("torch/_dynamo/exc.py", r"self\.gb_type"),
     "the type from the message (the line before \"Explanation:\")"),
    ("`Unsupported.skip_frame`", "collector",
     _has("torch/_dynamo/exc.py", r"self\.skip_frame = "),
     "the INFO record \"Skipping frame because there is a graph break in a for/while loop\" (the translator's `f_code`)"),
    ("`exc.format_graph_break_message(gb_type, context, explanation, hints)`", "collector",
     _has("torch/_dynamo/exc.py", r"def format_graph_break_message\("),
     "explanation and hints from the message's \"Explanation:\"/\"Hint:\" fields"),
    ("break type \"graph break in loop\" (GB7000)", "graph_breaks",
     _has("torch/_dynamo/symbolic_convert.py", r"gb_type=\"graph break in loop\""),
     "the INFO loop-skip record; no GB id"),
    ("graph-break registry `graph_break_registry.json`, `_load_gb_type_to_gb_id_map`", "dynamo",
     _has("torch/_dynamo/exc.py", r"def _load_gb_type_to_gb_id_map"),
     "no GB ids"),
    ("`exc.get_gbid_documentation_link`, `GRAPH_BREAK_SITE_URL`", "dynamo",
     _has("torch/_dynamo/exc.py", r"def get_gbid_documentation_link", r"GRAPH_BREAK_SITE_URL"),
     "no links to torch's page"),
    ("`get_and_maybe_log_recompilation_reasons` locals `code`, `reasons`", "collector",
     _has("torch/_dynamo/guards.py", r"def get_and_maybe_log_recompilation_reasons\("),
     "the record's text"),
    ("limit warning \"torch._dynamo hit config.%s (%s)\" with args", "collector",
     _has("torch/_dynamo/convert_frame.py", r"torch\._dynamo hit config\.%s \(%s\)"),
     "the warning's first line"),
    ("limit break type \"Dynamo recompile limit exceeded\" (GB0039)", "recompiles",
     _has("torch/_dynamo/convert_frame.py", r"gb_type=\"Dynamo recompile limit exceeded\""),
     "the words of the metrics' failure"),
    ("`config.recompile_limit` (older: `cache_size_limit`)", "dynamo",
     _has("torch/_dynamo/config.py", r"^recompile_limit\b"),
     "`cache_size_limit`"),
    ("`CompileContext.current_trace_id()`", "dynamo",
     _has("torch/_guards.py", r"def current_trace_id\("),
     "no compile ids"),
    ("`utils.get_compilation_metrics()` / `clear_compilation_metrics()`", "dynamo, recompiles",
     _has("torch/_dynamo/utils.py", r"def get_compilation_metrics\(", r"def clear_compilation_metrics\("),
     "no compile times per recompile, guard latency or cache counts"),
    ("metrics `compile_id`, `co_name`, `entire_frame_compile_time_s`, `fail_reason`", "recompiles",
     _has("torch/_dynamo/utils.py", r"compile_id: ", r"co_name: ", r"entire_frame_compile_time_s: ", r"fail_reason: "),
     "no compile time per recompile"),
    ("metrics `recompile_reason`", "recompiles",
     _has("torch/_dynamo/utils.py", r"recompile_reason: "),
     "recompiles matched to metrics by compile id only"),
    ("metrics `guard_latency_us`", "compile/dynamo_watch",
     _has("torch/_dynamo/utils.py", r"guard_latency_us: "),
     "no guard latency shown"),
    ("metrics `inductor_fx_local_cache_hit_count`, `aotautograd_local_cache_hit_count`", "compile/dynamo_watch",
     _has("torch/_dynamo/utils.py", r"inductor_fx_local_cache_hit_count", r"aotautograd_local_cache_hit_count"),
     "the older counters below"),
    ("`counters[\"inductor\"][\"fxgraph_cache_hit\"]` (the older cache count)", "compile/dynamo_watch",
     _has("torch/_inductor/codecache.py", r"counters\[\"inductor\"\]\[\"fxgraph_cache_hit\"\]"),
     "no proof of the warm compile's cache hits"),
    ("`utils.reset_graph_break_dup_checker()`", "dynamo",
     _has("torch/_dynamo/utils.py", r"def reset_graph_break_dup_checker"),
     "a repeated break is logged without its stack"),
    ("`torch._dynamo.explain` (`break_reasons`)", "graph_breaks",
     _has("torch/_dynamo/eval_frame.py", r"def explain\("),
     "required"),
    ("`torch._logging._internal.LazyTraceHandler`, `LOG_PREFIX` (TORCH_TRACE folder)", "torch_trace",
     _has("torch/_logging/_internal.py", r"class LazyTraceHandler", r"^LOG_PREFIX"),
     "its own handler and torch's file prefix (`--trace-dir`)"),
    ("`torch.compiler.save_cache_artifacts` / `load_cache_artifacts`", "compile/cold",
     _has("torch/compiler/__init__.py", r"def save_cache_artifacts\(", r"def load_cache_artifacts\("),
     "no warm-from-artifact compile time (the card says why)"),
    ("`torch._inductor.utils.fresh_cache` (older: `fresh_inductor_cache`)", "compile/cold",
     _has("torch/_inductor/utils.py", r"def fresh_cache\("),
     "`fresh_inductor_cache`"),
    ("`torch._inductor.utils.fresh_inductor_cache`", "compile/cold",
     _has("torch/_inductor/utils.py", r"def fresh_inductor_cache\("),
     "`fresh_cache`"),
    ("`eval_frame.set_eval_frame`, `eval_frame.skip_code`", "record hook",
     _has("torch/_dynamo/eval_frame.py", r"\bset_eval_frame\b", r"\bskip_code\b"),
     "`record` cannot record (says why)"),
    ("`symbolic_convert.graph_break_log`", "collector",
     _has("torch/_dynamo/symbolic_convert.py", r"^graph_break_log = "),
     "the logger by its name"),
    ("`torch.compiler.is_compiling`", "record hook",
     _has("torch/compiler/__init__.py", r"def is_compiling\("),
     "required"),
    ("`torch._dynamo.maybe_mark_dynamic`", "variations",
     _has("torch/_dynamo/decorators.py", r"def maybe_mark_dynamic\("),
     "required"),
    ("`_inductor.config.trace.provenance_tracking_level` and its artifacts `inductor_provenance_tracking_*`",
     "lines/costs, lines/provenance",
     _has("torch/_inductor/config.py", r"provenance_tracking_level"),
     "the compiled column of the line costs says \"not on this torch\"; the eager column stands"),
    ("`inductor_output_code`'s `file_path` and `codecache.PyCodeCache.modules` (a graph's loaded output code)",
     "lines/provenance",
     _has("torch/_inductor/graph.py", r'"file_path"'),
     "C++ kernels unnamed in the profile: their time is \"kernels without provenance\""),
    ("metrics `dynamo_/aot_autograd_/inductor_/inductor_code_gen_cumulative_compile_time_us`", "compile/per_frame",
     _has("torch/_dynamo/utils.py", r"aot_autograd_cumulative_compile_time_us", r"inductor_code_gen_cumulative_compile_time_us"),
     "the older `*_time_s` fields; without them, the frame's total only"),
]


def _version(wheel: Path) -> tuple[int, ...]:
    return tuple(int(p) for p in re.match(r"torch-(\d+)\.(\d+)\.(\d+)", wheel.name).groups())


def installed() -> int:
    """The installed torch (found, not imported): which of the APIs its sources have."""
    spec = importlib.util.find_spec("torch")
    root = Path(spec.origin).parent.parent if spec and spec.origin else None
    if root is None:
        print("no torch installed")
        return 2
    version = next(iter(root.glob("torch-*.dist-info")), None)
    missing = []
    for name, _, (path, patterns), without in APIS:
        file = root / path
        text = file.read_text(encoding="utf-8") if file.is_file() else None
        if text is None or not all(re.search(p, text, re.M) for p in patterns):
            missing.append(name)
            print(f"missing: {name} (then: {without})")
    # a missing API whose fallback is another API this torch has (an old name, a new one) is handled
    present = " ".join(name for name, _, _, _ in APIS if name not in missing)
    fallback = {name: re.findall(r"`([^`]+)`", without) for name, _, _, without in APIS}
    unhandled = [m for m in missing if not any(f"`{t}`" in present or t in present for t in fallback[m])]
    print(json.dumps({"torch": version.name.removesuffix(".dist-info") if version else None, "apis": len(APIS),
                      "present": len(APIS) - len(missing), "missing": missing, "missing_without_a_fallback": unhandled}))
    return 0


def main(folder: str) -> None:
    wheels = sorted(Path(folder).glob("torch-*.whl"), key=_version)
    versions = [".".join(map(str, _version(w)[:2])) for w in wheels]
    seen: dict[str, list[bool]] = {name: [] for name, _, _, _ in APIS}
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            names = set(zf.namelist())
            for name, _, (path, patterns), _ in APIS:
                text = zf.read(path).decode() if path in names else None
                seen[name].append(text is not None and all(re.search(p, text, re.M) for p in patterns))
    print(f"checked: torch {', '.join(versions)}\n")
    print("| torch API | used by | first in | gone in | on a torch without it |\n|---|---|---|---|---|")
    for name, used, _, without in APIS:
        has = seen[name]
        first = next((v for v, h in zip(versions, has) if h), None)
        gone = next((v for i, (v, h) in enumerate(zip(versions, has)) if not h and any(has[:i])), None)
        since = "not in any" if first is None else (f"≤ {first}" if first == versions[0] else first)
        print(f"| {name} | {used} | {since} | {gone or ''} | {without} |")


if __name__ == "__main__":
    if sys.argv[1:] == ["--installed"]:
        sys.exit(installed())
    main(sys.argv[1] if len(sys.argv) > 1 else "wheels")
