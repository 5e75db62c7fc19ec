"""`compile-lens trial [--steps N | --seconds S] [options] -- COMMAND ARGS...`

Runs COMMAND twice, unchanged, for N steps: eager, then with the workspace's outermost modules
compiled (see `trial.hook`); `trial.session` owns which runs happen, this module the flags, the
printing and the saving. The program's stdout and stderr pass through; the trial's summary goes to
stderr after both runs, and to `--json FILE`. Exit status: the eager run's when it failed (the trial
stops there, keeps the last good trial.json and writes trial-failed.json), else the compiled run's
(0 when the trial stopped it after N steps).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Optional

from ..config import find_root, load_project_config
from ..cost import BILL_FIELDS, CostInputs
from ..render import trial_ranks_text, trial_text
from ..settings import Settings
from ..trial import session, store, torchrun
from .common import add_program, remote_address
from .common import program as program_of


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
    bound.add_argument("--steps", type=int, help=f"steps per run (default {session.DEFAULT_STEPS})")
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
    options: dict = {}
    if args.mode:
        options["mode"] = args.mode
    if args.backend:
        options["backend"] = args.backend
    if args.dynamic != "auto":
        options["dynamic"] = args.dynamic == "true"
    plan = session.TrialPlan(
        program=program, root=root, steps=args.steps or (0 if args.seconds else session.DEFAULT_STEPS),
        seconds=args.seconds or 0.0, step_on=args.step_on, options=options, cold=args.cold,
        cache_artifact=args.cache_artifact, remote_cache=args.remote_cache, repeat_eager=args.repeat_eager,
        rtol=args.rtol, atol=args.atol, hang_timeout=args.hang_timeout,
        bill=bill_inputs(args, _settings(root, find_root(root))))
    outcome = session.run(plan, _say)
    figures = outcome.figures
    if figures is None:
        return outcome.exit_code
    print(trial_text.render_text(figures), file=sys.stderr)
    if figures.ranks:
        print(trial_ranks_text.render_text(figures), file=sys.stderr)
    saved = store.write(find_root(root), figures, command=plan.command, base=root, failed=outcome.eager_failed)
    if saved and outcome.eager_failed:
        _say(f"this failed run is saved in {os.path.relpath(saved)}; the last good trial stays in "
             f"{os.path.relpath(store.default_path(find_root(root)))}")
    elif saved:
        _say(f"figures saved in {os.path.relpath(saved)} (the report and the editor's hover card read them)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures.to_dict(), f, indent=1)
            f.write("\n")
    return outcome.exit_code


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


def _say(message: str) -> None:
    print(f"compile-lens trial: {message}", file=sys.stderr, flush=True)
