"""The caches' units: Inductor's remote cache (Redis) cold, warm and warm-remote, what a Redis hit
leaves to build, and a CI run of `compile-lens check` with the result cache empty and warm. Each
runs its module as its own process."""

from __future__ import annotations

import shutil
from typing import Any

from .. import Context, unit
from ..common import child_result, module_figures, not_run
from ..figures import Result, typed


def _redis() -> bool:
    return shutil.which("redis-server") is not None


@unit("remote_cache", "warm-remote (a fresh process with an empty local folder) is served by Redis (fx_graph hits, no "
      "miss); the tool's cold compile with a warm Redis in the user's environment stays cold (ratio to cold 0.75–1.33)",
      "the cold compile in a fresh process, empty caches", timeout_s=1800, devices=("cpu",))
def remote_cache(ctx: Context) -> Result | dict[str, Any]:
    if not _redis():
        return not_run("no redis-server here (make setup installs it)")
    return child_result(ctx, "cache.remote_cache", "1" if ctx.small else "2")


@unit("remote_kernels", "what docs/team-cache.md says holds: on the CPU a Redis hit serves the generated code (an "
      "fx_graph hit) yet builds as many C++ kernels (.so) as a cold compile; a warm local folder builds none",
      "a cold compile and a warm local-disk compile in one folder", timeout_s=1200, devices=("cpu",))
def remote_kernels(ctx: Context) -> Result | dict[str, Any]:
    if not _redis():
        return not_run("no redis-server here (make setup installs it)")
    return child_result(ctx, "cache.remote_kernels")


@unit("ci_run", "a re-run of `compile-lens check examples/` over unchanged files ≤ 2 s (served by the result cache, "
      "no torch process); breaks only ≈ half of breaks + recompile sweep", "the same command with an empty result cache",
      timeout_s=900, devices=("cpu",))
def ci_run(ctx: Context) -> Result:
    return typed(module_figures(ctx, "cache.ci_run"),
                 {"breaks_and_sweep_cached_s": ("lower", 2.0), "breaks_only_cached_s": ("lower", 2.0)})
