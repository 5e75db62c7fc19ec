"""A run's project: the root its output's paths are relative to, the settings pyproject.toml gives
before any flag, and the result cache the editor uses too. Shared by the CLI and the MCP server."""

from __future__ import annotations

import os
import sys
from typing import Optional

from ..config import find_root, load_project_config
from ..jobs.cache import ResultCache, cache_dir
from ..settings import Settings


def workspace_root(files: list[str], override: Optional[str] = None) -> str:
    """The root the output's paths are relative to: `--root`, else the first file's (found like ruff)."""
    if override:
        return os.path.abspath(override)
    return find_root(files[0]) if files else os.getcwd()


def project_settings(files: list[str], root: str) -> Settings:
    """[tool.compile-lens] in the root's pyproject.toml: the defaults that flags override."""
    settings, problems = Settings.from_client(load_project_config(files[0], root).settings)
    for problem in problems:
        print(f"compile-lens: {problem}", file=sys.stderr)
    return settings


def open_cache(no_cache: bool, read: bool = True) -> Optional[ResultCache]:
    """The result cache the editor uses too (one folder rule: `jobs.cache.cache_dir`); `read=False`:
    written, never read (a run whose side files — the kept profiles — only a fresh measurement makes)."""
    return None if no_cache else ResultCache(cache_dir(), read=read)
