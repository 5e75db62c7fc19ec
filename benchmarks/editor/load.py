"""Hover and code-lens latency under load: 50 open files x 20 targets while a benchmark runs.

    .venv/bin/python -m benchmarks.editor.load [--files 50] [--targets 20] [--json out.json]

Drives the real server over stdio (as the tests do). A first session traces every file into the
on-disk result cache; a second one (a restart) starts `compileLens.measure` (eager vs Inductor, in
the second worker lane), opens the 50 files (served from the cache) and times code lenses and
hovers on random files and targets until the benchmark ends, then for a while longer as the
files' recompile sweeps run. Latency is the client's round trip, one request at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from lsprotocol import types as lsp  # noqa: E402

from lsp_support import open_file, start_server, stop_server, wait_for  # noqa: E402

LOAD = ROOT / "tests" / "fixtures" / "load"


def _generator():
    spec = importlib.util.spec_from_file_location("load_generate", LOAD / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _generator()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def command(client, name: str, *args: Any) -> Any:
    return await client.workspace_execute_command_async(lsp.ExecuteCommandParams(name, list(args)))


def gb_count(diagnostics) -> int:
    return sum(1 for d in diagnostics if str(d.code).startswith("GB"))


async def wait_traced(client, start: int, name: str, timeout: float = 300.0) -> None:
    """Until the trace of file `name` that started after status number `start` has ended."""
    deadline = time.monotonic() + timeout
    while True:
        seen = client.statuses[start:]
        begun = [i for i, s in enumerate(seen) if s.state == "tracing" and s.detail == name]
        if begun and any(s.state in ("idle", "error") for s in seen[begun[0]:]):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"{name} was not traced")
        await asyncio.sleep(0.1)


class Sampler:
    def __init__(self, client, paths: list[Path], uris: list[str], targets: int):
        self.client, self.paths, self.uris, self.targets = client, paths, uris, targets
        self.random = random.Random(0)

    async def one(self, out: dict[str, list[float]]) -> None:
        i = self.random.randrange(len(self.uris))
        uri = self.uris[i]
        started = time.perf_counter()
        lenses = await self.client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
        out["codeLens"].append(time.perf_counter() - started)
        assert len(lenses) >= self.targets, len(lenses)  # one lens a target at least (Measure, and more once measured)
        j = self.random.randrange(self.targets)
        line, col = gen.class_position(self.paths[i], j)
        started = time.perf_counter()
        hover = await self.client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(uri), lsp.Position(line, col + 1)))
        out["hover"].append(time.perf_counter() - started)
        assert hover is not None and f"M{j}" in hover.contents.value


def summary(during: str, samples: dict[str, list[float]]) -> list[dict[str, Any]]:
    rows = []
    for request, values in samples.items():
        ms = [v * 1000 for v in values]
        rows.append({"while": during, "request": request, "n": len(ms), "p50_ms": round(statistics.median(ms), 2),
                     "p99_ms": round(percentile(ms, 99), 2), "max_ms": round(max(ms), 2)})
    return rows


async def prefill(root: Path, cache: Path, paths: list[Path], breaks: int, settings: dict) -> float:
    """A first session traces every file (results go to the on-disk cache), then ends."""
    started = time.perf_counter()
    client = await start_server(root, settings=settings, cache_dir=cache)
    try:
        uris = [open_file(client, p) for p in paths]
        for uri in uris:
            await wait_for(client, uri, lambda ds: gb_count(ds) == breaks, timeout=900)
        await asyncio.sleep(3.0)  # the last file's targets after its last break
    finally:
        await stop_server(client)
    return time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--targets", type=int, default=20)
    parser.add_argument("--after-samples", type=int, default=300,
                        help="request pairs timed after the benchmark, while recompile sweeps run")
    parser.add_argument("--max-bench-seconds", type=float, default=30.0, help="benchmark.maxSeconds")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    workspace = Path(tempfile.mkdtemp(prefix="compile-lens-load-"))
    root, cache = workspace / "ws", workspace / "cache"
    paths = gen.write_files(root, args.files, args.targets)
    shutil.copy(LOAD / "bench_target.py", root / "bench_target.py")
    settings = {"benchmark.onSave": False, "worker.timeoutSeconds": 300,
                "benchmark.maxSeconds": args.max_bench_seconds}
    breaks = gen.breaks_per_file(args.targets)
    rows: list[dict[str, Any]] = []
    try:
        prefill_s = await prefill(root, cache, paths, breaks, settings)
        print(f"session 1: {args.files} files x {args.targets} targets traced in {prefill_s:.0f} s", file=sys.stderr)

        # session 2 (a restart): start a benchmark, then open every file: all from the cache
        client = await start_server(root, settings=settings, cache_dir=cache)
        try:
            mark = len(client.statuses)
            bench_uri = open_file(client, root / "bench_target.py")
            await wait_traced(client, mark, "bench_target.py")
            mark = len(client.statuses)
            reply = await command(client, "compileLens.measure", bench_uri, "Mlp")
            assert reply["started"], reply
            deadline = time.monotonic() + 300
            while not any(s.state == "benchmarking" for s in client.statuses[mark:]):
                if time.monotonic() > deadline:
                    raise SystemExit("the benchmark did not start")
                await asyncio.sleep(0.1)
            started = time.perf_counter()
            uris = [open_file(client, p) for p in paths]
            for uri in uris:
                await wait_for(client, uri, lambda ds: gb_count(ds) == breaks, timeout=120)
            loaded_s = time.perf_counter() - started
            stats = await command(client, "compileLens.stats")
            print(f"session 2: benchmark started; {args.files} files loaded from the cache in {loaded_s:.2f} s "
                  f"(traces {stats['traces']}, trace cache hits {stats['trace_cache_hits']})", file=sys.stderr)

            sampler = Sampler(client, paths, uris, args.targets)
            busy: dict[str, list[float]] = {"hover": [], "codeLens": []}
            started = time.perf_counter()
            while True:
                for _ in range(20):
                    await sampler.one(busy)
                lenses = await client.text_document_code_lens_async(
                    lsp.CodeLensParams(lsp.TextDocumentIdentifier(bench_uri)))
                title = lenses[0].command.title if lenses and lenses[0].command else ""
                if "measuring" not in title:
                    break
                if time.perf_counter() - started > 900:
                    raise SystemExit("the benchmark did not finish")
            bench_s = time.perf_counter() - started
            rows += summary("benchmark running", busy)
            if "torch.compile:" not in title:
                problems = [d.message for d in client.diagnostics.get(bench_uri, []) if "measur" in d.message]
                print(f"the benchmark gave no result: {problems}", file=sys.stderr)

            after: dict[str, list[float]] = {"hover": [], "codeLens": []}
            for _ in range(args.after_samples):  # the 50 files' recompile sweeps run now
                await sampler.one(after)
            rows += summary("recompile sweeps running", after)
            stats = await command(client, "compileLens.stats")
            print(f"sampled {bench_s:.1f} s of the benchmark; result lens: {title!r}; server RSS "
                  f"{stats['server_rss'] / 2**20:.0f} MB; sweeps so far {stats.get('sweeps')}", file=sys.stderr)
        finally:
            await stop_server(client)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)

    print("| while | request | n | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['while']} | {row['request']} | {row['n']} | {row['p50_ms']} | {row['p99_ms']} | {row['max_ms']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
