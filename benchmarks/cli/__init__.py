"""The command line's units: `compile-lens import` on a large log, every entry point on bad input, and
`compile-lens mcp` as an agent meets it. Each runs its module as its own process."""

from __future__ import annotations

from .. import Context, unit
from ..common import module_figures
from ..figures import Result, typed


@unit("import_log", "`compile-lens import` reads a 500 MB log at a steady speed (MB/s) in bounded memory (the heap "
      "peak does not grow with the log)", "the same log's 20 MB prefix read by the same fold, in a fresh process",
      timeout_s=1200, devices=("cpu",))
def import_log(ctx: Context) -> Result:
    f = module_figures(ctx, "cli.import_log", "--mb", "20" if ctx.dry else "100" if ctx.quick else "500")
    if f.get("ok") is False:
        return typed(f)
    sizes = sorted(f.values(), key=lambda v: v["records"])
    ok = sizes[-1]["heap_peak_mb"] <= 2 * sizes[0]["heap_peak_mb"] + 5 if len(sizes) > 1 else None
    return typed(f, ok=ok)


@unit("import_profile", "`compile-lens import` of a profiler trace: at most half HTA's time and memory on the same "
      "file (the V100 trace, 216k events; and 500 MB grown from it), the same idle share within 0.02",
      "Holistic Trace Analysis (`get_temporal_breakdown`) on the same files, each in a fresh process",
      timeout_s=1200, devices=("cpu",))
def import_profile(ctx: Context) -> Result:
    f = module_figures(ctx, "cli.import_profile", "--mb", "60" if ctx.dry else "200" if ctx.quick else "500")
    if f.get("ok") is False:
        return typed(f)
    rows = [v for v in f.values() if isinstance(v, dict)]
    ok = all(r["hta_s"] and r["ours_s"] <= r["hta_s"] / 2 and r["ours_rss_mb"] <= r["hta_rss_mb"] / 2
             and abs(r["idle"] - r["hta_idle"]) <= 0.02 for r in rows)
    return typed(f, ok=ok)


@unit("bad_input", "0 crashes (an escaped exception or an internal error) over every entry point's bad inputs; exit "
      "codes 0/1/2 only", "the inputs' own kinds: a real TORCH_TRACE mutated as the fuzz test mutates it",
      timeout_s=900, devices=("cpu",))
def bad_input(ctx: Context) -> Result:
    f = module_figures(ctx, "cli.bad_input", "--cases", "20" if ctx.dry else "100" if ctx.quick else "500")
    if f.get("ok") is False:
        return typed(f)
    # the command line's exit codes (the editor's import answers in words: imported, not a trace)
    codes = {c for e in f["entries"].values() for c in e["codes"] if c.lstrip("-").isdigit()}
    return typed(f, {"crashes": ("lower", 0)}, ok=False if not codes <= {"0", "1", "2"} else None)


@unit("mcp_calls", "`compile-lens mcp`: a traced check within a fresh process's torch import + trace; a cached check "
      "and fixes ≤ 1 s", "the CLI's own `check` of the same file (the same trace)", timeout_s=900, devices=("cpu",))
def mcp_calls(ctx: Context) -> Result:
    from .. import REPO

    files = [str(REPO / "examples" / "item_scale.py")] if ctx.small else []
    f = module_figures(ctx, "cli.mcp_calls", *files)
    if f.get("ok") is False:
        return typed(f)
    per_file = [v for v in f.values() if isinstance(v, dict)]
    ok = all(v.get("check (from the cache)_s", 99) <= 1 and v.get("fixes_s", 99) <= 1 for v in per_file)
    return typed(f, ok=ok)
