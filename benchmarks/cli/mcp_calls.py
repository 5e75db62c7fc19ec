"""`compile-lens mcp` as an agent meets it: wall time of each call through the SDK's own client over
stdio, on a copy of the given files in a fresh result cache, for BENCHMARKS.md.

    .venv/bin/python -m benchmarks.cli.mcp_calls [FILE.py ...]   (default: examples/item_scale.py and
                                                            tests/fixtures/real_targets/lm.py)

Per file: `check` traced (the analysis process started and torch imported included), `check` again
(from the result cache), `fixes` at the first diagnostic's line, and what came back (targets,
graph breaks, diagnostics, fixes offered). Before them: the server's start and `initialize`,
`tools/list`, `explain GB0124`. Prints the load average with the figures: a shared machine's
timings are noisy.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = [ROOT / "examples" / "item_scale.py", ROOT / "tests" / "fixtures" / "real_targets" / "lm.py"]


FIGURES: dict = {}  # seconds per call, under the file's name when it is one file's


async def timed(label: str, call, under: str = ""):
    start = time.perf_counter()
    result = await call
    took = time.perf_counter() - start
    print(f"  {label:<34} {took:6.2f} s", flush=True)
    (FIGURES.setdefault(under, {}) if under else FIGURES)[label.split(" at line")[0] + "_s"] = round(took, 2)
    return result


async def main(files: list[Path]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        (ws / "pyproject.toml").write_text('[project]\nname = "ws"\n')
        for f in files:
            shutil.copy(f, ws / f.name)
        params = StdioServerParameters(command=sys.executable, args=["-m", "compile_lens.cli", "mcp", "--trust", str(ws)],
                                       env={"COMPILE_LENS_CACHE_DIR": str(Path(tmp) / "cache"), "PYTHONSAFEPATH": "1"},
                                       cwd=str(ws))
        print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
        start = time.perf_counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            print(f"  {'start + initialize':<34} {time.perf_counter() - start:6.2f} s")
            FIGURES["start + initialize_s"] = round(time.perf_counter() - start, 2)
            await timed("tools/list", client.list_tools())
            await timed("explain GB0124", client.call_tool("explain", {"code": "GB0124"}))
            for f in files:
                path = str(ws / f.name)
                print(f"{f.relative_to(ROOT)}:")
                doc = (await timed("check (traced)", client.call_tool("check", {"path": path}), f.name)).structured_content
                await timed("check (from the cache)", client.call_tool("check", {"path": path}), f.name)
                entry = doc["files"][0]
                breaks = sum(len(t["graph_breaks"] or []) for t in entry["targets"])
                line = entry["diagnostics"][0]["line"] if entry["diagnostics"] else 1
                fixes = (await timed(f"fixes at line {line}", client.call_tool("fixes", {"path": path, "line": line}),
                                f.name)).structured_content
                FIGURES[f.name].update(targets=len(entry["targets"]), graph_breaks=breaks,
                                       diagnostics=len(entry["diagnostics"]), fixes=len(fixes["fixes"]))
                print(f"  targets {len(entry['targets'])}, graph breaks {breaks}, diagnostics "
                      f"{len(entry['diagnostics'])} ({', '.join(sorted({d['code'] for d in entry['diagnostics']}))}), "
                      f"fixes at line {line}: {[f['title'] for f in fixes['fixes']]}")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        print(json.dumps(FIGURES))


if __name__ == "__main__":
    asyncio.run(main([Path(a).resolve() for a in sys.argv[1:]] or DEFAULT))
