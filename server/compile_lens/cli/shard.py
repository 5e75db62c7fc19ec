"""`--shard I/N`: a CI matrix's share of the files. A file belongs to shard `hash(path) mod N`, the
path taken relative to the workspace root: the same on every run, machine and checkout, and a
file stays in its shard when others are added or removed (so code scanning, which tracks alerts
per shard's category, never sees a file's alerts move to another shard). The shards are disjoint
and together hold every file; a file's lints and targets all go with it."""

from __future__ import annotations

import argparse
import hashlib
import re
from dataclasses import dataclass
from typing import Union

from ..render.keys import relative_path
from .common import say

_FORM = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based, as a CI matrix counts
    total: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        match = _FORM.match(text or "")
        if not match:
            raise ValueError(f"--shard {text!r}: write it as I/N, e.g. --shard 1/4")
        index, total = int(match[1]), int(match[2])
        if total < 1 or not 1 <= index <= total:
            raise ValueError(f"--shard {text}: I must be between 1 and N (N at least 1)")
        return cls(index, total)

    @property
    def name(self) -> str:
        """For SARIF's run category: `1-of-4` (a `/` there would start a new category level)."""
        return f"{self.index}-of-{self.total}"

    def holds(self, path: str, root: str) -> bool:
        digest = hashlib.sha256(relative_path(path, root).encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "big") % self.total == self.index - 1

    def files(self, files: list[str], root: str) -> list[str]:
        return [f for f in files if self.holds(f, root)]


def add_shard_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shard", metavar="I/N",
                        help="only the I-th of N shares of the files (a CI matrix job's; split by the file's "
                             "path relative to the root, the same on every run and machine)")


def shard_files(args: argparse.Namespace, files: list[str], root: str) -> Union[list[str], int]:
    """This shard's files (all of them without `--shard`), or 2 for a malformed one (said)."""
    if not getattr(args, "shard", None):
        return files
    try:
        shard = Shard.parse(args.shard)
    except ValueError as exc:
        say(str(exc))
        return 2
    mine = shard.files(files, root)
    if not args.quiet:
        say(f"shard {shard.index}/{shard.total}: {len(mine)} of {len(files)} files")
    return mine
