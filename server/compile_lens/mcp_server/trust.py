"""Which folders' code the MCP tools may run: those given with `--trust DIR`, and nothing else.

An MCP client has no workspace-trust signal of its own (roots are deprecated in the 2026 spec and
say what the client shows, not what the user trusts), so the user says it on the command line, as
the VS Code extension does for a trusted workspace's folders."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass
class Trust:
    folders: list[str] = field(default_factory=list)  # real paths

    def covers(self, path: str) -> bool:
        real = os.path.realpath(path)
        return any(real == folder or real.startswith(folder.rstrip(os.sep) + os.sep) for folder in self.folders)

    def refusal(self, path: str) -> str:
        """What an untrusted path is told."""
        given = ", ".join(self.folders) if self.folders else "none"
        return (f"{path} is not in a trusted folder (trusted: {given}): nothing of it runs. Start the server "
                f"with `compile-lens mcp --trust DIR` (VS Code: trust the workspace)")
