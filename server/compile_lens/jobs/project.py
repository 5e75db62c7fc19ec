"""Which project a file belongs to, by what survives a copy: the result cache's keys name a file by
its path relative to the project root plus the root's identity, never by where the root lies.

The identity is the project's own name for itself — its `pyproject.toml` name and its git remote
`origin` (normalised: `git@github.com:o/r.git` and `https://github.com/o/r` are one). Both stay the
same in a second clone, a moved checkout and a CI runner's checkout elsewhere, and tell two projects
that share one cache folder apart. Not a content hash of the root's files: editing pyproject.toml
(a version bump) would re-measure every file, and what the results depend on (the file, the
workspace files it imports, torch, device, mode, inputs) is in the key already. A root with neither
has no identity: its files are told apart from another such root's by their path and code alone.
"""

from __future__ import annotations

import os
import re
from typing import Any, Optional

ROOT_MARK = "<compile-lens-root>"  # stands for the project root in a stored result


def project_identity(root: str) -> str:
    """`name=…;remote=…` of the project at `root` (each part empty when it has none)."""
    return f"name={_pyproject_name(root) or ''};remote={_origin(root) or ''}"


def _pyproject_name(root: str) -> Optional[str]:
    try:
        import tomllib

        with open(os.path.join(root, "pyproject.toml"), "rb") as f:
            data = tomllib.load(f)
    except (ImportError, OSError, ValueError):  # ValueError: TOMLDecodeError
        return None
    name = (data.get("project") or {}).get("name") or ((data.get("tool") or {}).get("poetry") or {}).get("name")
    return name if isinstance(name, str) else None


def _git_dir(root: str) -> Optional[str]:
    """The repository's common git folder (a worktree's `.git` file points into it)."""
    dot = os.path.join(root, ".git")
    if os.path.isdir(dot):
        return dot
    try:
        with open(dot, encoding="utf-8") as f:
            line = f.read().strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = os.path.join(root, line.partition(":")[2].strip())
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as f:
            return os.path.normpath(os.path.join(gitdir, f.read().strip()))
    except OSError:
        return gitdir


def _origin(root: str) -> Optional[str]:
    """The `origin` remote's URL from the repository's config, as host/path (no scheme, user, `.git`)."""
    gitdir = _git_dir(root)
    if gitdir is None:
        return None
    try:
        with open(os.path.join(gitdir, "config"), encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return None
    section = re.search(r'^\[remote\s+"origin"\]\s*$(.*?)(?=^\[|\Z)', text, re.M | re.S)
    url = section and re.search(r"^\s*url\s*=\s*(\S+)", section.group(1), re.M)
    return _normalised(url.group(1)) if url else None


def _normalised(url: str) -> str:
    url = re.sub(r"^[a-z+]+://", "", url)  # https://, ssh://, git://
    url = re.sub(r"^[^@/]+@", "", url)  # user@ (and a token)
    url = re.sub(r"^([^/:]+):(?!\d)", r"\1/", url)  # scp-like host:path
    return url.removesuffix("/").removesuffix(".git").lower()


def _roots(root: str) -> list[str]:
    """The root as given and as resolved (a symlinked checkout), longest first."""
    given = os.path.abspath(root)
    return sorted({given, os.path.realpath(given)}, key=len, reverse=True)


def _strings(value: Any, change: Any) -> Any:
    """`value` (JSON data) with `change` applied to every string in it."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {k: _strings(x, change) for k, x in value.items()}
    if isinstance(value, list):
        return [_strings(x, change) for x in value]
    return value


def anchored(value: Any, root: str) -> Any:
    """`value` (JSON data) with the root in every string replaced by ROOT_MARK."""
    if not root or len(os.path.abspath(root)) <= 1:
        return value
    roots = _roots(root)
    prefixes = [(r + os.sep, ROOT_MARK + os.sep) for r in roots]

    def change(v: str) -> str:
        if v in roots:
            return ROOT_MARK
        for prefix, mark in prefixes:
            v = v.replace(prefix, mark)
        return v

    return _strings(value, change)


def placed(value: Any, root: str) -> Any:
    """`value` read back with ROOT_MARK standing for `root` (where the project lies today)."""
    if not root:
        return value
    here = os.path.abspath(root)
    return _strings(value, lambda v: v.replace(ROOT_MARK, here) if ROOT_MARK in v else v)
