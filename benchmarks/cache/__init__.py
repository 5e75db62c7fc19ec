"""The caches' units: Inductor's remote cache (Redis) cold, warm and warm-remote, what a Redis hit
leaves to build, and a CI run of `compile-lens check` with the result cache empty and warm. Each
runs its module as its own process."""

from __future__ import annotations

import shutil
from typing import Any

from .. import Context, unit
from ..common import module_figures, not_run


def _redis() -> bool:
    return shutil.which("redis-server") is not None


@unit("remote_cache", "warm-remote (a fresh process with an empty local folder) is served by Redis (fx_graph hits, no "
      "miss); the tool's cold compile with a warm Redis in the user's environment stays cold (ratio to cold 0.75–1.33)",
      "the cold compile in a fresh process, empty caches", timeout_s=1800, devices=("cpu",))
def remote_cache(ctx: Context) -> dict[str, Any]:
    if not _redis():
        return not_run("no redis-server here (make setup installs it)")
    f = module_figures(ctx, "cache.remote_cache", "1" if ctx.small else "2")
    if f.get("ok") is False:
        return f
    runs = []  # | run | cold | warm | warm-remote | fx hits/misses | aot | cold, warm Redis in env | ratio | fwd µs | guards | share |
    for line in f["printed"]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 11 and cells[0].isdigit():
            hits, misses = (int(x) for x in cells[4].split("/"))
            runs.append({"cold_s": float(cells[1]), "warm_s": float(cells[2]), "warm_remote_s": float(cells[3]),
                         "fx_graph_hits": hits, "fx_graph_misses": misses, "cold_with_warm_redis_s": float(cells[6]),
                         "ratio": float(cells[7]), "guards_us_per_call": cells[9]})
    if not runs:
        return {"ok": None, **f}
    ok = all(r["fx_graph_hits"] > 0 and r["fx_graph_misses"] == 0 and 0.75 <= r["ratio"] <= 1.33 for r in runs)
    return {"ok": ok, "runs": runs}


@unit("remote_kernels", "what docs/team-cache.md says holds: on the CPU a Redis hit serves the generated code (an "
      "fx_graph hit) yet builds as many C++ kernels (.so) as a cold compile; a warm local folder builds none",
      "a cold compile and a warm local-disk compile in one folder", timeout_s=1200, devices=("cpu",))
def remote_kernels(ctx: Context) -> dict[str, Any]:
    if not _redis():
        return not_run("no redis-server here (make setup installs it)")
    f = module_figures(ctx, "cache.remote_kernels")
    if f.get("ok") is False:
        return f
    rows = {}  # | process | local folder | Redis | compile s | fx_graph hits/misses | .so built in the folder |
    for line in f["printed"]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 6 and cells[3].replace(".", "").isdigit():
            rows[cells[0]] = {"compile_s": float(cells[3]), "fx_graph": cells[4], "so_built": int(cells[5])}
    served = [r for name, r in rows.items() if name.startswith("served")]
    if not served or "cold" not in rows or "warm" not in rows:
        return {"ok": None, **f}
    ok = all(r["fx_graph"] == "1/0" and r["so_built"] == rows["cold"]["so_built"] for r in served) and \
        rows["warm"]["so_built"] == 0
    return {"ok": ok, **rows}


@unit("ci_run", "a re-run of `compile-lens check examples/` over unchanged files ≤ 2 s (served by the result cache, "
      "no torch process); breaks only ≈ half of breaks + recompile sweep", "the same command with an empty result cache",
      timeout_s=900, devices=("cpu",))
def ci_run(ctx: Context) -> dict[str, Any]:
    f = module_figures(ctx, "cache.ci_run")
    if f.get("ok") is False:
        return f
    return {"ok": f["breaks_and_sweep_cached_s"] <= 2 and f["breaks_only_cached_s"] <= 2, **f}
