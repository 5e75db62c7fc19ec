"""`compile-lens mcp`: the MCP server for coding agents (the `mcp` SDK over stdio).

Data flows one way: `server` (the SDK: tool schemas, progress, cancellation) → `tools` (each tool's
work, SDK-free: the CLI's own functions, the same JSON documents) → `cli.check`, `actions`,
`trace_import`, `cli trial` as a subprocess. `trust` says which folders' code may run; `explain`
reads a code's documentation and torch's graph-break registry without importing torch. Like the
language server, this process never imports torch.
"""
