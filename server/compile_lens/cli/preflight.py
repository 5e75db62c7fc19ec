"""The arguments that name files (and `--with`'s parts), checked before a subcommand starts any work
(a torch process, a user's program): a report that cannot be written, a baseline that is not one, a
`--map` or `--root` that points nowhere, a part that does not exist fails in a moment with one line,
not after the analysis. Attributes a
subcommand does not have are skipped, so one check serves every subcommand."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from typing import Optional

from ..settings import opt_in_parts
from ..trace_import.paths import parse_maps
from .baseline import read_baseline

# argparse dest -> the flag as the user wrote it: files a subcommand writes
OUTPUT_FILES = {"output": "-o", "json": "--json", "cache_artifact": "--cache-artifact"}


def writable_file(path: str) -> Optional[str]:
    """Why `path` cannot be written as a file (its folders made as needed), or None when it can."""
    full = os.path.abspath(path)
    if os.path.isdir(full):
        return "it is a folder"
    if os.path.exists(full):
        try:  # opened, not asked (`os.access` says yes to root on a read-only mount or in /sys)
            with open(full, "a"):
                return None
        except OSError as exc:
            return f"it is not writable ({exc.strerror})"
    return _creatable(os.path.dirname(full))


def writable_folder(path: str) -> Optional[str]:
    full = os.path.abspath(path)
    if os.path.exists(full):
        if not os.path.isdir(full):
            return "it is a file, not a folder"
        return _probe(full)
    return _creatable(os.path.dirname(full))


def _probe(folder: str) -> Optional[str]:
    """A file made in `folder` and removed: what root, a read-only mount or /sys really allow."""
    try:
        tempfile.NamedTemporaryFile(dir=folder, prefix=".compile-lens-probe-").close()
    except OSError as exc:
        return f"{folder} is not writable ({exc.strerror})"
    return None


def _creatable(folder: str) -> Optional[str]:
    """Why files cannot be made in `folder` (made as needed): the nearest existing folder above it decides."""
    probe = folder
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        return f"{probe} is a file, not a folder"
    return _probe(probe)


def preflight(args: argparse.Namespace) -> Optional[str]:
    """What is wrong with the file arguments of `args` (one line), or None."""
    parts = getattr(args, "opt_in", None)
    if parts is not None:
        try:
            opt_in_parts(parts)
        except ValueError as exc:
            return f"--with {parts}: {exc}"
    root = getattr(args, "root", None)
    if root and not os.path.isdir(root):
        return f"--root {root} is not a folder"
    for dest, flag in OUTPUT_FILES.items():
        path = getattr(args, dest, None)
        if path:  # "" (--cache-artifact's default file) is under the root, checked with it
            why = writable_file(path)
            if why:
                return f"cannot write {flag} {path}: {why}"
    trace_dir = getattr(args, "trace_dir", None)
    if trace_dir and (why := writable_folder(trace_dir)):
        return f"cannot write the trace to --trace-dir {trace_dir}: {why}"
    profile_dir = getattr(args, "profile_dir", None)
    if profile_dir and (why := writable_folder(profile_dir)):
        return f"cannot write the profiles to --profile-dir {profile_dir}: {why}"
    maps = getattr(args, "maps", None)
    if maps:
        try:
            pairs = parse_maps(maps)
        except ValueError as exc:
            return str(exc)
        for remote, local in pairs:
            if not os.path.exists(local):
                return f"--map {remote}={local}: {local} does not exist here"
    baseline = getattr(args, "baseline", None)
    if baseline:
        if getattr(args, "write_baseline", False):
            why = writable_file(baseline)
            return f"cannot write the baseline {baseline}: {why}" if why else None
        if not os.path.isfile(baseline):
            return f"no baseline file {baseline} (write one with --write-baseline)"
        try:
            read_baseline(baseline)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
            return f"cannot read the baseline {baseline}: {exc}"
    return None
