"""`compile-lens mcp`: the MCP server for coding agents (the `mcp` SDK over stdio).

Data flows one way: `server` (the SDK: tool schemas, progress, cancellation) → `tools` (each tool's
work, SDK-free: the engine the CLI runs on, the same JSON documents) → `engine`, `actions`,
`trace_import`, `compile-lens trial` as a subprocess. `trust` says which folders' code may run; `explain`
reads a code's documentation and torch's graph-break registry without importing torch. Like the
language server, this process never imports torch.
"""
