"""The measurement's units: the speedup truth, the line-costs truth, the cold compile and the time to
the first figure, each against torch's own compile + timing (`common.fresh_torch`); and the costs of
the measurement's parts (`more`: the A/B, the line-cost step, the guard cost, the levers, memory)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from .. import REPO, Context, unit
from ..common import MODELS, SHARED, env, fresh_torch, module_figures, py, run, tail

TOLERANCE = 0.10


def _models(ctx: Context) -> tuple[str, ...]:
    return SHARED[:1] if ctx.dry else SHARED


@unit("speedup_truth", "the tool's forward speedup within 10% of an independent timing, per shared model",
      "a fresh process's eager vs torch.compile forward (torch.utils.benchmark; alternating pairs)",
      timeout_s=210)
def speedup_truth(ctx: Context) -> dict[str, Any]:
    # one child per model, each given its share of what is left: a slow model costs its own figure only
    figures: dict[str, Any] = {}
    started = time.perf_counter()
    names = _models(ctx)
    for i, name in enumerate(names):
        share = (ctx.timeout_s - (time.perf_counter() - started)) / (len(names) - i)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "check.json"
            args = py("measure.speedup_check", f"{MODELS}:{name}", "--device", ctx.device,
                      "--json", str(out), "--max-seconds", "5" if ctx.dry else "15",
                      "--repeats", "2" if ctx.dry else "8", "--retries", "0")
            proc = run(ctx, args, timeout=max(share, 10))
            if not out.exists():
                figures[name] = {"agree": False, "error": f"rc {proc.returncode}: {tail(proc, 300)}"}
                continue
            r = json.loads(out.read_text())[0]
        if "error" in r:  # the tool's side gave no figure (the row says why)
            figures[name] = {"agree": False, "error": r["error"]}
            continue
        figures[name] = {"tool": round(r["benchmark"]["forward"]["speedup"], 3),
                         "independent": round(r["independent"]["speedup"], 3), "ratio": round(r["ratio"], 3),
                         "agree": r["agree"], "busy": r["independent"]["busy"]}
    return {"ok": all(f["agree"] for f in figures.values()), "models": figures}


_RATIO = re.compile(r"== (.+?): eager .*|compiled lines / timed compiled call = ([0-9.]+|nan)")


@unit("line_costs", "compiled lines' time within 10% of the compiled call timed apart (forward and train step)",
      "the compiled call timed on its own (torch.utils.benchmark)", timeout_s=150)
def line_costs_truth(ctx: Context) -> dict[str, Any]:
    args = [sys.executable, str(MODELS.parent / "line_costs_models.py"), "--device", ctx.device, "--models", "shared",
            "--train"]
    if ctx.dry:
        args += ["--only", "MLPStack"]
    proc = run(ctx, args)
    ratios: dict[str, Optional[float]] = {}
    label = None
    for m in _RATIO.finditer(proc.stdout or ""):
        if m.group(1):
            label = m.group(1)
        elif label:
            ratios[label] = None if m.group(2) == "nan" else float(m.group(2))
    if proc.returncode != 0 or not ratios:
        return {"ok": False, "error": f"rc {proc.returncode}: {tail(proc)}", "ratios": ratios}
    # on a shared CPU the profile is not held to the limit (the caveat says so there); on a GPU it is
    ok = all(r is not None and abs(r - 1) <= TOLERANCE for r in ratios.values()) if ctx.device.startswith("cuda") else None
    return {"ok": ok, "ratios": ratios}


def _check_stream(ctx: Context, name: str) -> dict[str, Any]:
    """`compile-lens check --stream` on one shared model: seconds to the first forward figure and
    to the end, and the cold compile it reports."""
    args = [sys.executable, "-m", "compile_lens.cli", "check", str(MODELS), "--target", name, "--stream",
            "--format", "json", "--device", ctx.device, "--no-cache", "-q", "--no-recompiles"]
    if ctx.dry:
        args += ["--max-seconds", "5"]
    started = time.perf_counter()
    first: Optional[float] = None
    cold: Optional[float] = None
    lines: list[str] = []
    proc = subprocess.Popen(args, cwd=REPO, env=env(ctx), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            lines.append(raw)
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("part") == "forward" and first is None:
                first = time.perf_counter() - started
            cold = cold or _find_cold(rec)
            if time.perf_counter() - started > ctx.timeout_s:
                proc.kill()
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    whole = time.perf_counter() - started
    return {"rc": rc, "first_forward_s": round(first if first is not None else whole, 2),
            "first_from": "stream" if first is not None else "end", "whole_s": round(whole, 2),
            "tool_cold_compile_s": cold, "out": "".join(lines)}


def _find_cold(rec: Any) -> Optional[float]:
    if isinstance(rec, dict):
        cs = rec.get("compile_s")
        if isinstance(cs, dict) and isinstance(cs.get("cold"), (int, float)):
            return round(cs["cold"], 2)
        for v in rec.values():
            got = _find_cold(v)
            if got is not None:
                return got
    elif isinstance(rec, list):
        for v in rec:
            got = _find_cold(v)
            if got is not None:
                return got
    return None


_PAIRED: dict[tuple[str, str], dict[str, Any]] = {}
# the block stack, the nanoGPT-style GPT and a transformers GPT-2 (issue 43's three)
FIRST_FIGURE_MODELS = ("MLPStack", "GPT", "TinyGPT2")


def _paired(ctx: Context, name: str) -> dict[str, Any]:
    """The tool's check and torch's own fresh compile + timing of one model, measured once for both units."""
    key = (ctx.device, name)
    if key not in _PAIRED:
        _PAIRED[key] = {"tool": _check_stream(ctx, name), "torch": fresh_torch(ctx, name)}
    return _PAIRED[key]


@unit("time_to_first_figure", "compile-lens check's first forward figure within 1.5× torch's own cold compile + "
      "timing of the same model, the whole measurement within 3× (issue 43 item 4)",
      "a fresh process: torch.compile + first call + alternating timing pairs", timeout_s=420)
def time_to_first_figure(ctx: Context) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name in _models(ctx)[:1] if ctx.dry else FIRST_FIGURE_MODELS:
        p = _paired(ctx, name)
        tool, torch_ = p["tool"], p["torch"]
        if name == "MLPStack":  # the CLI JSON a GPU check brings back
            (ctx.out / "check.jsonl").write_text(tool["out"], encoding="utf-8")
        if "error" in torch_ or tool["rc"] not in (0, 1):
            figures[name] = {"error": torch_.get("error") or f"check rc {tool['rc']}: {tool['out'][-400:]}"}
            continue
        figures[name] = {"first_forward_s": tool["first_forward_s"], "first_from": tool["first_from"],
                         "whole_s": tool["whole_s"], "torch_whole_s": round(torch_["process_s"], 2),
                         "first_x": round(tool["first_forward_s"] / torch_["process_s"], 2),
                         "whole_x": round(tool["whole_s"] / torch_["process_s"], 2)}
    ok = all("error" not in f and f["first_x"] <= 1.5 and f["whole_x"] <= 3 for f in figures.values())
    return {"ok": ok, "models": figures}


@unit("cold_compile", "the tool's cold compile within 25% of torch's own first compiled call",
      "a fresh process's first torch.compile(model) call", timeout_s=420)
def cold_compile(ctx: Context) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name in _models(ctx)[:1] if ctx.dry else FIRST_FIGURE_MODELS:
        p = _paired(ctx, name)
        ours, theirs = p["tool"]["tool_cold_compile_s"], p["torch"].get("cold_compile_s")
        figures[name] = {"tool_s": ours, "torch_s": round(theirs, 2) if theirs else None,
                         "ratio": round(ours / theirs, 2) if ours and theirs else None}
    ok = all(f["ratio"] is not None and abs(f["ratio"] - 1) <= 0.25 for f in figures.values())
    return {"ok": ok, "models": figures}


from . import more  # noqa: E402,F401 - registers the measurement parts' units


@unit("compile_lines_sum", "a frame's compile lines add up to its Dynamo time within 10% (issue 53, item 1)",
      "torch's compilation metrics (the frame's Dynamo time) and Dynamo's bytecode_tracing timer", timeout_s=900,
      devices=("cpu",))
def compile_lines_sum(ctx: Context) -> dict[str, Any]:
    return {"ok": None, **module_figures(ctx, "measure.compile_lines_sum", *(["--only", "Stack"] if ctx.small else []))}


@unit("budget_bound", "a target's measurement ends within max(--max-seconds, time to the forward's figure) × 1.1 + 5 s "
      "(issue 51, item 2)", "the same check on main before the bound (--server)", timeout_s=900, devices=("cpu",))
def budget_bound(ctx: Context) -> dict[str, Any]:
    budgets = "15" if ctx.small else "15,30,60"
    proc = run(ctx, py("measure.budget_bound", str(REPO / "examples" / "tiny_measure.py"), "--budgets", budgets))
    rows = [json.loads(line) for line in (proc.stdout or "").splitlines() if line.startswith("{")]
    return {"ok": proc.returncode == 0 and bool(rows), "rows": rows} if rows else {"ok": False, "error": tail(proc)}
