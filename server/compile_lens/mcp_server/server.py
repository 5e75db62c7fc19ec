"""The MCP server: the tools of `tools` on the official SDK's `MCPServer`, over stdio.

Each tool returns the CLI's JSON document as structured content. A long tool runs in a task of its
own (`isolated`): its progress lines become progress notifications, and a client's cancel reaches
it once, asyncio's way, so its cleanup (stopping the analysis worker, killing a trial's process
tree) runs to the end instead of being cancelled again at each await as an anyio scope would.
Python 3.10+ (the SDK's floor); `cli/mcp.py` checks it before importing this module.
"""

import asyncio
from typing import Annotated, Any, Awaitable, Callable, Optional

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from .. import __version__
from . import tools
from .explain import UnknownCode, explain
from .trust import Trust

INSTRUCTIONS = (
    "Compile Lens tells what torch.compile does to PyTorch code, verified by torch itself: graph breaks "
    "(TorchDynamo's GB ids), recompiles, measured eager-vs-Inductor speed. To fix a graph break: `check` the "
    "file, `explain` a diagnostic's code, `fixes` at its line for the edits the editor would offer, then "
    "`apply_fix` to write one and trace again (it says whether the break is gone). Code runs only in folders "
    "the user trusted; elsewhere `check` returns the static lints' predictions."
)

Work = Callable[[Callable[[str], None]], Awaitable[dict[str, Any]]]


async def isolated(work: Work, ctx: Context) -> dict[str, Any]:
    """Runs `work(note)` in its own task; each `note(line)` is sent as a progress notification."""
    lines: asyncio.Queue[str] = asyncio.Queue()
    task = asyncio.ensure_future(work(lines.put_nowait))
    sent = 0

    async def send(line: str) -> None:
        nonlocal sent
        sent += 1
        await ctx.report_progress(sent, None, line)

    try:
        while not task.done():
            getter = asyncio.ensure_future(lines.get())
            done, _ = await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                await send(getter.result())
            else:
                getter.cancel()
        while not lines.empty():
            await send(lines.get_nowait())
    except BaseException:
        task.cancel()
        await asyncio.shield(_settled(task))
        raise
    try:
        return task.result()
    except tools.ToolProblem as problem:
        raise ToolError(str(problem)) from None


async def _settled(task: "asyncio.Future[Any]") -> None:
    await asyncio.wait({task})


Path = Annotated[str, Field(description="a Python file or a folder (absolute, or relative to the server's folder)")]
Line = Annotated[int, Field(description="the 1-based line of the diagnostic, as in check's diagnostics")]
Phases = Annotated[Optional[list[str]], Field(
    description="which checks run: graph_breaks (a trace, ~1 s; the default), recompiles, benchmark "
                "(these two compile with Inductor: tens of seconds)")]


def build(trust: Trust) -> MCPServer:
    server = MCPServer(name="compile-lens", version=__version__, instructions=INSTRUCTIONS)

    @server.tool(name="check", description=(
        "Graph breaks (torch's GB ids, at the user's line), recompiles and measured speedups of a file or folder: "
        "the document `compile-lens check --format json` prints. In an untrusted folder: the static lints only."))
    async def check(path: Path, ctx: Context,
                    target: Annotated[Optional[str], Field(
                        description="only this target: a class or function name, or path.py:Name")] = None,
                    phases: Phases = None) -> dict[str, Any]:
        return await isolated(lambda note: tools.check(path, trust, target=target, phases=phases, note=note), ctx)

    @server.tool(name="explain", description=(
        "What a code means and what to do: a Compile Lens code (CL101, CL211, ...) or a TorchDynamo graph-break "
        "id (GB0124): its documentation, and torch's own explanation and hints from its graph-break registry."))
    def explain_tool(code: Annotated[str, Field(description="e.g. GB0124, CL211")]) -> dict[str, Any]:
        try:
            return explain(code)
        except UnknownCode as exc:
            raise ToolError(str(exc)) from None

    @server.tool(name="fixes", description=(
        "The code actions the editor offers at a line (the diagnostics there and each fix's edits, 1-based), "
        "each checked to leave a file that compiles. Give a fix's id to apply_fix."))
    async def fixes(path: Path, line: Line, ctx: Context, phases: Phases = None) -> dict[str, Any]:
        return await isolated(lambda note: tools.fixes(path, line, trust, phases=phases, note=note), ctx)

    @server.tool(name="show", description=(
        "What was compiled behind a line (1-based): with graph=true the FX graphs TorchDynamo captured for the "
        "target the line belongs to, each node after the line it came from and the graph breaks between them "
        "(a trace, seconds); else the kernels the line became, from a measurement (tens of seconds). JSON and "
        "its text. Trusted folders only."))
    async def show(path: Path, line: Line, ctx: Context,
                   graph: Annotated[bool, Field(description="the captured graphs, not the line's kernels")] = True,
                   ) -> dict[str, Any]:
        return await isolated(lambda note: tools.show(path, line, trust, graph=graph, note=note), ctx)

    @server.tool(name="apply_fix", description=(
        "Writes one fix from `fixes` into the file, traces it again and says whether the findings it answered "
        "are gone (`gone`), with the new check document (`after`). Trusted folders only."))
    async def apply_fix(path: Path, line: Line, ctx: Context,
                        fix: Annotated[int, Field(description="the fix's id, from fixes")] = 0,
                        phases: Phases = None) -> dict[str, Any]:
        return await isolated(lambda note: tools.apply_fix(path, line, fix, trust, phases=phases, note=note), ctx)

    @server.tool(name="trial", description=(
        "Runs a training command eager, then with the workspace's modules compiled, for a few steps each "
        "(`compile-lens trial`): time per step, compile time, memory, loss agreement, breaks and recompiles seen. "
        "Minutes on a real model. Trusted folders only."))
    async def trial(command: Annotated[str, Field(description="e.g. python train.py --epochs 1")],
                    ctx: Context,
                    root: Annotated[Optional[str], Field(
                        description="the folder it runs in, whose modules are compiled (default: the server's)")] = None,
                    steps: Annotated[int, Field(description="optimizer steps per run")] = tools.DEFAULT_TRIAL_STEPS,
                    ) -> dict[str, Any]:
        folder = root or "."
        return await isolated(lambda note: tools.trial(command, folder, trust, steps=steps, note=note), ctx)

    @server.tool(name="import", description=(
        "Reads torch's structured trace of a run made anywhere (a TORCH_TRACE folder or one log) onto the "
        "workspace's lines: graph breaks, recompiles, compile time and cache counts per rank. Or a PyTorch "
        "profiler trace (Kineto JSON, a file or a folder of per-rank files): per rank the GPU idle share, "
        "launch-bound with why, CUDA graphs, the costliest kernels and their time on the lines. Runs no code."))
    def import_tool(trace: Annotated[str, Field(description="a TORCH_TRACE folder or log, or a profiler trace or folder")],
                    root: Annotated[Optional[str], Field(
                        description="the workspace the run's paths map onto (default: the server's folder)")] = None,
                    maps: Annotated[Optional[list[str]], Field(
                        description="REMOTE_PREFIX=LOCAL_PREFIX pairs")] = None) -> dict[str, Any]:
        try:
            return tools.import_(trace, root or ".", maps or ())
        except tools.ToolProblem as problem:
            raise ToolError(str(problem)) from None

    return server


def serve(trusted: list[str]) -> None:
    build(Trust(trusted)).run("stdio")
