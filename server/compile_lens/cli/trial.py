"""`compile-lens trial [--steps N | --seconds S] [options] -- COMMAND ARGS...`

Runs COMMAND twice, unchanged, for N steps: eager, then with the workspace's outermost modules
compiled (see `hook`). The program's stdout and stderr pass through; the trial's summary goes to
stderr after both runs, and to `--json FILE`. Exit status: the eager run's when it failed (the trial
stops there, keeps the last good trial.json and writes trial-failed.json), else the compiled run's
(0 when the trial stopped it after N steps).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from typing import Any, Optional

from ..config import find_root, load_project_config
from ..cost import BILL_FIELDS, CostInputs
from ..remote_cache import parse as parse_remote
from ..remote_cache import remote_counts, unreachable
from ..render import trial_ranks_text, trial_text
from ..settings import Settings
from ..torch_text import cache_keys, guard_words
from ..trial import keep_record, rank_figures, runner, shapes, store, summary, torchrun
from .common import add_program, remote_address
from .common import program as program_of

DEFAULT_STEPS = 30


def add_trial_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "trial", help="run your training program eager and compiled for N steps and compare them",
        description="Run COMMAND unchanged twice for a bounded number of steps (a step is one optimizer.step(), "
                    "or with --step-on forward one call of the outermost workspace module): once eager, once with "
                    "the workspace's outermost nn.Modules compiled (torch.compile calls in the program keep their "
                    "own options). Reports time per step (warm-up apart, steady-state median and quartiles), peak "
                    "memory, the loss per step in both runs, graph breaks and recompiles that happened, compile "
                    "time, the step at which compiled pays back, and the GPU bill when its figures are given.",
        usage="compile-lens trial [--steps N | --seconds S] [options] -- COMMAND [ARGS...]")
    bound = parser.add_mutually_exclusive_group()
    bound.add_argument("--steps", type=int, help=f"steps per run (default {DEFAULT_STEPS})")
    bound.add_argument("--seconds", type=float,
                       help="run eager for this long (from the first step); the compiled run does as many steps")
    parser.add_argument("--step-on", choices=("optimizer", "forward"), default="optimizer",
                        help="what ends a step: optimizer.step() (default) or a call of the outermost module")
    parser.add_argument("--mode", help="torch.compile mode for the modules the trial compiles")
    parser.add_argument("--backend", help="torch.compile backend (default: torch's, inductor)")
    parser.add_argument("--dynamic", choices=("auto", "true", "false"), default="auto",
                        help="torch.compile dynamic= (auto: torch's default)")
    parser.add_argument("--cold", action="store_true", help="compile with empty Inductor caches (a fresh machine)")
    parser.add_argument("--cache-artifact", nargs="?", const="", default=None, metavar="FILE",
                        help="save torch's compile cache artifact after the compiled run (default file: "
                             "ROOT/.compile-lens/compile-cache.bin) and time a third, fresh run warmed by it only")
    parser.add_argument("--remote-cache", type=remote_address, default=None, metavar="redis://HOST:PORT",
                        help="time one more fresh compiled run with an empty local Inductor cache, served by the "
                             "team's Inductor remote cache (Redis) only: what a restart on a new machine pays")
    parser.add_argument("--repeat-eager", action="store_true",
                        help="run eager twice to tell whether the program is deterministic")
    parser.add_argument("--rtol", type=float, default=1e-3, help="loss tolerance, relative (default 1e-3)")
    parser.add_argument("--atol", type=float, default=1e-5, help="loss tolerance, absolute (default 1e-5)")
    parser.add_argument("--root", help="workspace root: modules defined under it are compiled (default: this folder)")
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON here")
    parser.add_argument("--hang-timeout", type=float, default=torchrun.DEFAULT_HANG_TIMEOUT, metavar="SECONDS",
                        help="under torchrun: end the run when no rank finishes a step for this long "
                             f"(default {torchrun.DEFAULT_HANG_TIMEOUT:g})")
    add_bill_arguments(parser)
    add_program(parser, run_trial)
    return parser


def add_bill_arguments(parser: argparse.ArgumentParser) -> None:
    """The bill's flags (`trial` and `report`); each overrides its `bill.*` setting in pyproject.toml."""
    bill = parser.add_argument_group("the GPU bill (figures from your team; defaults: [tool.compile-lens] bill.* "
                                     "in pyproject.toml; no money shown without a price)")
    for field in BILL_FIELDS:
        bill.add_argument("--" + field.flag.replace("_", "-"), type=field.kind, help=field.help,
                          **({"metavar": "PER_HOUR"} if field.flag == "gpu_price" else {}))


_FLAGS = {f.flag: f.cost for f in BILL_FIELDS}  # flag (argparse dest) -> CostInputs field


def bill_inputs(args: argparse.Namespace, settings: Settings) -> CostInputs:
    """The settings' bill, each flag given on the command line in place of its setting."""
    inputs = CostInputs.from_settings(settings)
    for flag, field in _FLAGS.items():
        value = getattr(args, flag, None)
        if value is not None:
            setattr(inputs, field, value)
    return inputs


def bill_flag_error(args: argparse.Namespace) -> Optional[str]:
    """What is wrong with the bill's flags, as the settings would say it; None when they are fine."""
    for flag in _FLAGS:
        value = getattr(args, flag, None)
        if value is None:
            continue
        _, problems = Settings.from_client({_SETTING[flag]: value})
        if problems:
            why = problems[0].split(" must ", 1)[-1].removesuffix("; it is not used")
            return f"--{flag.replace('_', '-')} {value:g}: must {why}"
    return None


_SETTING = {f.flag: f.key for f in BILL_FIELDS}  # flag -> setting key


def _settings(folder: str, root: str) -> Settings:
    """[tool.compile-lens] of the pyproject.toml nearest `folder` up to the workspace `root`; its
    mistakes are said with their file and line."""
    config = load_project_config(folder, root)
    for problem in config.problems:
        where = f"{os.path.relpath(problem.path)}:{problem.line}: " if problem.path else ""
        print(f"compile-lens: {where}{problem.message}" + (f" ({problem.hint})" if problem.hint else ""), file=sys.stderr)
    settings, problems = Settings.from_client(config.settings)
    for message in problems:
        print(f"compile-lens: {message}", file=sys.stderr)
    return settings


def run_trial(args: argparse.Namespace) -> int:
    if (program := program_of(args, "compile-lens trial --steps 50 -- python train.py")) is None:
        return 2
    if (args.steps is not None and args.steps <= 0) or (args.seconds is not None and args.seconds <= 0):
        print("compile-lens trial: --steps and --seconds must be positive", file=sys.stderr)
        return 2
    problem = bill_flag_error(args)
    if problem:
        print(f"compile-lens trial: {problem}", file=sys.stderr)
        return 2
    if (problem := _torchrun_error(program, args)) is not None:
        print(f"compile-lens trial: {problem}", file=sys.stderr)
        return 2
    root = os.path.abspath(args.root or os.getcwd())
    steps = args.steps or (0 if args.seconds else DEFAULT_STEPS)
    options: dict = {}
    if args.mode:
        options["mode"] = args.mode
    if args.backend:
        options["backend"] = args.backend
    if args.dynamic != "auto":
        options["dynamic"] = args.dynamic == "true"
    common = {"root": root, "step_on": args.step_on, "hang_timeout": args.hang_timeout}
    load_before = _load()
    with tempfile.TemporaryDirectory(prefix="compile-lens-trial-") as scratch:
        _say("eager run")
        eager_code, eager = runner.run_once(program, mode="eager", scratch=scratch, steps=steps,
                                            seconds=args.seconds or 0.0, **common)
        if eager_code in (126, 127) and eager is None:  # the command itself was not found or not runnable
            return eager_code
        kept = keep_record.keep(scratch, root)
        if eager_code != 0:  # the program failed by itself (a run the trial stops exits 0)
            return _eager_failed(args, program, root, eager, eager_code, kept, load_before)
        if not steps:  # --seconds: the compiled run does as many steps as eager did
            steps = len((eager or {}).get("steps") or []) or 0
        repeat = None
        if args.repeat_eager:
            _say("eager run, again (determinism)")
            _, repeat = runner.run_once(program, mode="eager", scratch=scratch, steps=steps,
                                        seconds=0.0 if steps else (args.seconds or 0.0), tag="-2", **common)
        _say("compiled run" + (f" ({', '.join(f'{k}={v}' for k, v in options.items())})" if options else ""))
        compiled_code, compiled = runner.run_once(
            program, mode="compiled", scratch=scratch, steps=steps, seconds=0.0 if steps else (args.seconds or 0.0),
            options=options, cold_cache=args.cold, save_artifact=_artifact_path(args, root),
            fx_keys=args.cache_artifact is not None or args.remote_cache is not None, **common)
        artifact = None
        if args.cache_artifact is not None:
            artifact = _artifact_run(program, args, root, scratch, options, compiled, common)
        served = None
        if args.remote_cache is not None:
            served = _remote_run(program, args.remote_cache, scratch, options, compiled, common)
    figures = summary.summarize(eager, eager_code, compiled, compiled_code, rtol=args.rtol, atol=args.atol,
                                repeat_run=repeat, command=shlex.join(program))
    add_what_it_saw(figures, compiled, kept)
    figures["artifact"] = artifact
    figures["remote_cache"] = served
    figures["ranks"] = rank_figures.per_rank(eager, compiled)
    figures["rank_divergence"] = rank_figures.divergence(compiled)
    figures["cold"] = args.cold
    figures["machine"] = {"cpus": os.cpu_count(), "load_before": load_before, "load_after": _load()}
    figures["cost"] = summary.bill(figures, bill_inputs(args, _settings(root, find_root(root))))
    print(trial_text.render_text(figures), file=sys.stderr)
    if figures["ranks"]:
        print(trial_ranks_text.render_text(figures), file=sys.stderr)
    saved = store.write(find_root(root), figures, command=shlex.join(program), base=root)
    if saved:
        _say(f"figures saved in {os.path.relpath(saved)} (the report and the editor's hover card read them)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=1)
            f.write("\n")
    return eager_code if eager_code != 0 else compiled_code


def _eager_failed(args: argparse.Namespace, program: list[str], root: str, eager: Optional[dict], code: int,
                  kept: Optional[tuple[str, list[str]]], load_before: Optional[float]) -> int:
    """The eager run failed: the compiled run would only repeat the failure, so the trial stops with
    the program's status. What ran is said and written beside the last good trial
    (`trial-failed.json`), which stays what the report and the editor show."""
    _say(f"the eager run failed (exit status {code}): the compiled run would only repeat the failure; "
         "fix the program, then run the trial again")
    figures = summary.summarize(eager, code, None, None, rtol=args.rtol, atol=args.atol, command=shlex.join(program))
    figures["compiled"]["failure"] = {"kind": "not-run", "step": None, "where": None,
                                      "message": f"not run: the eager run failed (exit status {code})"}
    add_what_it_saw(figures, None, kept)
    figures["ranks"] = rank_figures.per_rank(eager, None)
    figures["rank_divergence"] = []
    figures["machine"] = {"cpus": os.cpu_count(), "load_before": load_before, "load_after": _load()}
    print(trial_text.render_text(figures), file=sys.stderr)
    if figures["ranks"]:
        print(trial_ranks_text.render_text(figures), file=sys.stderr)
    saved = store.write(find_root(root), figures, command=shlex.join(program), base=root, failed=True)
    if saved:
        _say(f"this failed run is saved in {os.path.relpath(saved)}; the last good trial stays in "
             f"{os.path.relpath(store.default_path(find_root(root)))}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=1)
            f.write("\n")
    return code if code > 0 else 128 - code  # died of a signal: the shell's status for it


def add_what_it_saw(figures: dict, compiled_run: Optional[dict], kept: Optional[tuple[str, list[str]]]) -> None:
    """The recompiles in the user's terms, the run per input shape, and the record kept for the editor."""
    figures["recompiles"] = [guard_words.say(r) for r in figures.get("recompiles") or []]
    rows = shapes.by_shape(figures["eager"], figures["compiled"], compiled_run, figures["recompiles"])
    figures["by_shape"] = rows
    whole = (figures.get("speedup") or {}).get("wall")
    figures["shape_findings"] = shapes.findings(rows, whole, figures["compiled"], figures["eager"])
    figures["recorded"] = {"path": kept[0], "targets": kept[1]} if kept else None
    if kept:
        _say(f"the eager run's record of {len(kept[1])} target{'s' if len(kept[1]) != 1 else ''} merged into "
             f"{os.path.relpath(kept[0])} (check, report and the editor trace them with these inputs)")


def _torchrun_error(program: list[str], args: argparse.Namespace) -> Optional[str]:
    """What the trial cannot do with this torchrun run; None when it can (or it is no torchrun run)."""
    if not torchrun.is_torchrun(program):
        return None
    if args.seconds is not None:
        return ("--seconds cannot bound a torchrun run: each rank would stop at its own step and the others "
                "would wait for it in a collective; give --steps N instead (every rank stops after step N)")
    if args.hang_timeout <= 0:
        return "--hang-timeout must be positive"
    return None


def _artifact_path(args: argparse.Namespace, root: str) -> str:
    if args.cache_artifact is None:
        return ""
    path = os.path.abspath(args.cache_artifact or os.path.join(root, ".compile-lens", "compile-cache.bin"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def _artifact_run(program: list[str], args: argparse.Namespace, root: str, scratch: str, options: dict,
                  compiled: Any, common: dict) -> dict:
    """A fresh process with empty Inductor caches and the saved artifact loaded, up to the last compile step."""
    saved = (compiled or {}).get("artifact_saved") or {}
    if not saved.get("saved"):
        return {"path": None, "note": saved.get("error") or "the compiled run saved no artifact"}
    compile_steps = (summary.compile_time(compiled) or {}).get("steps") or []
    steps = max(compile_steps) + 1 if compile_steps else 1
    _say(f"compiled run warmed by the cache artifact only ({steps} steps)")
    code, run = runner.run_once(program, mode="compiled", scratch=scratch, steps=steps, options=options,
                                cold_cache=True, load_artifact=saved["saved"], tag="-artifact", fx_keys=True,
                                **common)
    loaded = (run or {}).get("artifact_loaded") or {}
    return {"path": saved["saved"], "bytes": saved.get("bytes"), "steps": steps, "exit_code": code,
            "loaded": bool(loaded.get("loaded")), "note": loaded.get("error"),
            "compile_time": summary.compile_time(run),
            "miss_reasons": _miss_reasons(compiled, run) if loaded.get("loaded") else []}


def _remote_run(program: list[str], url: str, scratch: str, options: dict, compiled: Any, common: dict) -> dict:
    """A fresh process with an empty local Inductor cache, served by the team's remote cache only, up to
    the last compile step. torch's Redis client has no timeout: an address that does not answer
    within 1 s is not run against, and the figures say so."""
    remote = parse_remote(url)
    problem = unreachable(remote)
    if problem:
        _say(f"remote cache {url} {problem}: no remote-cache run")
        return {"url": url, "note": f"{url} {problem}; check the address, or that the Redis server runs"}
    compile_steps = (summary.compile_time(compiled) or {}).get("steps") or []
    steps = max(compile_steps) + 1 if compile_steps else 1
    _say(f"compiled run served by the remote cache {url}, empty local cache ({steps} steps)")
    code, run = runner.run_once(program, mode="compiled", scratch=scratch, steps=steps, options=options,
                                cold_cache=True, remote=remote, tag="-remote", fx_keys=True, **common)
    counts = remote_counts((run or {}).get("compiles") or [], (run or {}).get("device") or "cpu")
    hits = sum(c["hits"] for c in (counts or {}).values() if isinstance(c, dict))
    note = None
    if counts is None:
        note = "torch recorded no remote-cache lookup (is the `redis` package installed in the program's environment?)"
    elif not hits:
        note = "the remote cache held none of this program's compiles: this run filled it; a next trial is served by it"
    return {"url": url, "steps": steps, "exit_code": code, "remote": counts, "served": bool(hits), "note": note,
            "compile_time": summary.compile_time(run), "miss_reasons": _miss_reasons(compiled, run)}


def _miss_reasons(compiled: Any, run: Any) -> list[str]:
    """What differed in the FX-graph cache keys `run` missed from the compiled run's (whose graphs the
    artifact holds, and the remote cache holds when an earlier trial filled it): [] when every miss had
    a key the compiled run had too (not in the cache, not different), or torch logged no keys."""
    return cache_keys.reasons((compiled or {}).get("fx_keys") or [], (run or {}).get("fx_keys") or [])


def _load() -> float | None:
    """The 1-minute load average: other work on the machine makes step times noisy, and the text says so."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _say(message: str) -> None:
    print(f"compile-lens trial: {message}", file=sys.stderr, flush=True)
