"""What the subcommands share: argument checks, settings from pyproject and flags, `-- PROGRAM`,
the result cache, and the last touches on findings (ignore comments, the terminal's words)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Callable, Optional, Union

from ..config import find_root, load_project_config, python_files
from ..jobs.cache import ResultCache, cache_dir
from ..protocol import OPT_IN, Benchmark, FileReport, Problem
from ..remote_cache import parse as parse_remote
from ..render import findings as fnd
from ..render.cli_output import cli_words
from ..settings import Settings, opt_in_parts


def say(message: str) -> None:
    print(f"compile-lens: {message}", file=sys.stderr, flush=True)


def write_output(path: Optional[str], text: str) -> bool:
    """The report to `path` (its folders made as needed), else to stdout; False, said on stderr, when
    the file cannot be written (`preflight` checked it before the work: this is the rare late case)."""
    if not path:
        print(text)
        return True
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    except OSError as exc:
        say(f"cannot write {path}: {exc.strerror or exc}")
        return False
    return True


def workspace_root(files: list[str], override: Optional[str] = None) -> str:
    """The root the output's paths are relative to: `--root`, else the first file's (found like ruff)."""
    if override:
        return os.path.abspath(override)
    return find_root(files[0]) if files else os.getcwd()


def files_and_root(args: argparse.Namespace) -> Union[int, tuple[list[str], str]]:
    """The Python files under `args.paths` and their root, or 2 (said on stderr) for a usage error."""
    if args.root and not os.path.isdir(args.root):
        say(f"--root {args.root} is not a folder")
        return 2
    missing = [p for p in args.paths if not os.path.exists(p)]
    if missing:
        say(f"no such file or folder: {', '.join(missing)}")
        return 2
    files = python_files(args.paths)
    if not files:
        say(f"no Python files in {', '.join(args.paths)}")
        return 2
    return files, workspace_root(files, args.root)


def project_settings(files: list[str], root: str) -> Settings:
    """[tool.compile-lens] in the root's pyproject.toml: the defaults that flags override."""
    settings, problems = Settings.from_client(load_project_config(files[0], root).settings)
    for problem in problems:
        print(f"compile-lens: {problem}", file=sys.stderr)
    return settings


# flag (argparse dest) -> the setting it overrides; a subcommand without the flag leaves it be
FLAG_SETTINGS = {"device": "device", "mode": "mode", "timeout": "timeout_s", "max_seconds": "max_seconds",
                 "memory_limit": "memory_limit_mb", "remote_cache": "remote_cache", "precision": "precision",
                 "opt_in": "opt_in"}
WITH_HELP = (f"parts to measure whatever --max-seconds leaves them, comma-separated: {', '.join(OPT_IN)} "
             "(benchmark.optIn; replaces pyproject's list)")


def add_with_argument(parser: argparse.ArgumentParser) -> None:
    """`--with strict_export,batch_sweep`: parts run whatever the budget (checked by `preflight`)."""
    parser.add_argument("--with", dest="opt_in", metavar="PARTS", default=None, help=WITH_HELP)


def remote_address(text: str) -> str:
    """`--remote-cache`'s value: `redis://HOST:PORT`, else argparse's error with what to write."""
    try:
        return parse_remote(text).url
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_remote_cache_argument(parser: argparse.ArgumentParser) -> None:
    """`--remote-cache redis://HOST:PORT`: also measure a compile served by the team's Inductor cache."""
    parser.add_argument("--remote-cache", type=remote_address, default=None, metavar="redis://HOST:PORT",
                        help="the team's Inductor remote cache (Redis): also measure a fresh process's compile "
                             "served by it (remoteCache; default: the environment's TORCHINDUCTOR_*REMOTE_CACHE)")


def settings_for(args: argparse.Namespace, files: list[str], root: str) -> Settings:
    """pyproject's settings with the flags given on the command line on top."""
    settings = project_settings(files, root)
    for flag, name in FLAG_SETTINGS.items():
        value = getattr(args, flag, None)
        if value:
            setattr(settings, name, opt_in_parts(value) if name == "opt_in" else value)
    return settings


def add_program(parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int]) -> None:
    """`-- COMMAND ARGS`: the user's program, run unchanged by `run` (record, trial)."""
    parser.add_argument("program", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS",
                        help="the program to run, e.g. -- python train.py --epochs 1")
    parser.set_defaults(run=run)


def program(args: argparse.Namespace, example: str) -> Optional[list[str]]:
    """The command after `--` (argparse keeps the `--` in a REMAINDER); None, said on stderr, when
    there is none. `example`: a whole command line that shows where the program goes."""
    found = list(args.program or [])
    found = found[1:] if found[:1] == ["--"] else found
    if not found:
        who = " ".join(example.split()[:2])  # "compile-lens record"
        print(f"{who}: give the program to run after `--`, e.g. {example}", file=sys.stderr)
        return None
    return found


def open_cache(no_cache: bool, read: bool = True) -> Optional[ResultCache]:
    """The result cache the editor uses too (one folder rule: `jobs.cache.cache_dir`); `read=False`:
    written, never read (a run whose side files — the kept profiles — only a fresh measurement makes)."""
    return None if no_cache else ResultCache(cache_dir(), read=read)


def lines_of(path: str, cache: dict[str, list[str]]) -> list[str]:
    if path not in cache:
        try:
            with open(path, encoding="utf-8") as fh:
                cache[path] = fh.read().splitlines()
        except (OSError, UnicodeDecodeError):
            cache[path] = []
    return cache[path]


def apply_ignores(reports: list[FileReport]) -> None:
    """Drop what `# compile-lens: ignore` comments silence; findings span their whole line."""
    cache: dict[str, list[str]] = {}
    for report in reports:
        kept = []
        for f in report.findings:
            lines = lines_of(f.path, cache)
            if not fnd.suppressed(f, lines):
                kept.append(fnd.whole_line(f, lines))
        report.findings = kept


def reword(reports: list[FileReport]) -> None:
    """Messages written for the editor, in the terminal's words (`raise --timeout`)."""
    def problem(p: Optional[Problem]) -> Optional[Problem]:
        return p and dataclasses.replace(p, message=cli_words(p.message) or p.message, hint=cli_words(p.hint))

    def measured(b: Optional[Benchmark]) -> Optional[Benchmark]:
        return b and dataclasses.replace(b, notes=[cli_words(n) or n for n in b.notes],
                                         verdict=cli_words(b.verdict) or b.verdict)

    for report in reports:
        report.error = problem(report.error)
        report.targets = [dataclasses.replace(t, error=problem(t.error), benchmark=measured(t.benchmark))
                          for t in report.targets]
        # copies: a file's lint findings are kept by `lints` for its next lint
        report.findings = [dataclasses.replace(f, message=cli_words(f.message) or f.message)
                           for f in report.findings]


def finish(reports: list[FileReport]) -> None:
    apply_ignores(reports)
    reword(reports)
