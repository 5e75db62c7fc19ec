"""Save → graph-break diagnostics, one file at a time, through the real server.

    .venv/bin/python -m benchmarks.editor.save compiled_fn.py item_scale.py   # files in examples/

Each save changes the code (a new fingerprint, so it is really re-traced), then waits for the
publish of that buffer version carrying a GB code; prints the six times in ms.
"""

import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from benchmarks.editor.latencies import gb, published  # noqa: E402
from lsp_support import change_file, open_file, start_server, stop_server, wait_for  # noqa: E402


async def main(names: list[str]) -> None:
    root = Path(tempfile.mkdtemp()) / "examples"
    shutil.copytree(REPO / "examples", root)
    client = await start_server(root, settings={"benchmark.onSave": False})
    while not any(getattr(s, "state", None) == "idle" for s in client.statuses):
        await asyncio.sleep(0.05)
    figures: dict = {}
    for name in names:
        path = root / name
        uri = open_file(client, path)
        await wait_for(client, uri, gb)
        base, version, times = path.read_text(), 1, []
        for i in range(6):
            version += 1
            count = len(client.published)
            started = time.perf_counter()
            change_file(client, path, base + f"\n_x = {i}\n", version, save=True)
            await published(client, uri, version, count, gb)
            times.append(time.perf_counter() - started)
            await asyncio.sleep(0.3)
        print(name, [round(t * 1000) for t in times], flush=True)
        figures[name] = {"saves_ms": [round(t * 1000) for t in times], "median_after_first_ms": round(statistics.median(times[1:]) * 1000)}
    await stop_server(client)
    shutil.rmtree(root.parent, ignore_errors=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:] or ["compiled_fn.py", "item_scale.py"]))
