"""The run's paths → the workspace's files.

A path that exists under the workspace is itself. Otherwise `--map REMOTE_PREFIX=LOCAL_PREFIX`
(longest prefix first) rewrites it, and what that finds is used. Otherwise the longest path suffix
(whole components) that exactly one workspace file shares is the file: `/mnt/job/repo/model/net.py`
→ `model/net.py` when that is the only workspace file ending so. A tie stays unmapped, and so does
a file of an installed package, the standard library or a `torch/` package folder (torch's own
frames: `frames.is_recorded_library_file`): a workspace file of the same name is not it. What is not mapped keeps its original path and is listed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from ..config import python_files
from ..torch_text.frames import is_recorded_library_file


def parse_maps(specs: list[str]) -> list[tuple[str, str]]:
    """`REMOTE=LOCAL` pairs, longest remote prefix first; ValueError names the bad one."""
    pairs = []
    for spec in specs:
        remote, sep, local = spec.partition("=")
        if not sep or not remote or not local:
            raise ValueError(f"--map {spec!r}: expected REMOTE_PREFIX=LOCAL_PREFIX, e.g. /mnt/job/repo=.")
        pairs.append((remote.rstrip("/\\") or "/", os.path.abspath(local)))
    return sorted(pairs, key=lambda p: len(p[0]), reverse=True)


def _parts(path: str) -> list[str]:
    return [p for p in path.replace("\\", "/").split("/") if p]


@dataclass
class PathMap:
    root: str
    maps: list[tuple[str, str]] = field(default_factory=list)
    unmapped: dict[str, str] = field(default_factory=dict)  # original path -> why
    _by_name: Optional[dict[str, list[list[str]]]] = None
    _done: dict[str, Optional[str]] = field(default_factory=dict)

    def _index(self) -> dict[str, list[list[str]]]:
        if self._by_name is None:
            self._by_name = {}
            for path in python_files([self.root]):
                rel = _parts(os.path.relpath(path, self.root))
                self._by_name.setdefault(rel[-1], []).append(rel)
        return self._by_name

    def local(self, remote: str, *, listed: bool = True) -> Optional[str]:
        """The workspace file `remote` is, or None (then listed in `unmapped` with why, unless not
        `listed`: a frame of a traceback that is only looked for, not shown)."""
        if remote not in self._done:
            before = dict(self.unmapped)
            self._done[remote] = self._find(remote)
            if not listed:
                self.unmapped = before
        elif listed and self._done[remote] is None and remote not in self.unmapped:
            self._find(remote)  # looked up unlisted before: say why now
        return self._done[remote]

    def _find(self, remote: str) -> Optional[str]:
        for prefix, local in self.maps:
            if remote == prefix or remote.startswith(prefix.rstrip("/") + "/"):
                candidate = os.path.normpath(os.path.join(local, remote[len(prefix):].lstrip("/\\")))
                if os.path.isfile(candidate):
                    return candidate
                self.unmapped[remote] = f"--map {prefix}={local} gives {candidate}, which does not exist"
                return None
        parts = _parts(remote)
        if not parts or remote.startswith("<"):
            self.unmapped[remote] = "not a file"
            return None
        if is_recorded_library_file(remote):
            self.unmapped[remote] = "torch's own, an installed package or the standard library (not the workspace's code)"
            return None
        root = os.path.realpath(self.root)
        if os.path.isabs(remote) and os.path.isfile(remote) and os.path.realpath(remote).startswith(root + os.sep):
            return os.path.realpath(remote)
        candidates = self._index().get(parts[-1], [])
        best, tied = 0, []
        for rel in candidates:
            n = 0
            while n < min(len(rel), len(parts)) and rel[-1 - n] == parts[-1 - n]:
                n += 1
            if n > best:
                best, tied = n, [rel]
            elif n == best:
                tied.append(rel)
        if len(tied) == 1:
            return os.path.join(self.root, *tied[0])
        if not tied:
            self.unmapped[remote] = "no workspace file of that name (give --map REMOTE_PREFIX=LOCAL_PREFIX)"
        else:
            self.unmapped[remote] = (f"{len(tied)} workspace files end in {'/'.join(parts[-best:])}: "
                                     + ", ".join("/".join(t) for t in tied[:3]) + " (give --map to choose)")
        return None
