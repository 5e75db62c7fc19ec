"""What the subcommands share: argument checks, settings from pyproject and flags, `-- PROGRAM`.
The project's root, settings and cache, and the findings' last touches, are the engine's
(`engine/project.py`, `engine/finish.py`): the MCP server uses them too."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Optional, Union

from ..config import python_files
from ..engine.project import project_settings, workspace_root
from ..protocol import OPT_IN
from ..remote_cache import parse as parse_remote
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
