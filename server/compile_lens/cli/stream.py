"""What `check` says while it runs, part by part (`render.stream`): `--stream`'s JSON lines on
stdout, and the headline on stderr the moment a target's forward speedup lands, before the rest of
its measurement runs. Nothing else goes to stdout while streaming (progress stays on stderr)."""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

from ..protocol import TargetResult
from ..render.stream import PartFeed, headline

STREAM_HELP = ("one JSON object per line on stdout as each part of a target lands "
               '({"path", "target", "part", "status", "data"}), then the whole --format json document on one line')


class PartLines:
    """Handed every growing result (`check(on_result=...)`); says each landed part once."""

    def __init__(self, *, stream: bool, note: Optional[Callable[[str], None]]):
        self.feed = PartFeed()
        self.stream, self.note = stream, note

    def __call__(self, path: str, result: TargetResult) -> None:
        for line in self.feed.update(path, result):  # the path as the document's files say it
            if self.stream:
                _out(line)
            if self.note and line["part"] == "forward" and line["status"] == "done":
                text = headline(result)
                if text:
                    self.note(f"  {text}")


def _out(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


def last_line(doc: dict[str, Any]) -> str:
    """The whole `--format json` document, on one line: the stream's last."""
    return json.dumps(doc)
