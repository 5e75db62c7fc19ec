"""The file `compile-lens record` writes: `<root>/.compile-lens/recorded.json`.

Stdlib only and Python 3.9+: the recorder imports it inside the user's program.

Format (schema 1); keys are sorted, lists keep the order things were seen::

    {
      "schema": 1,
      "targets": {
        "train.py:Net": {                       # file relative to the root, ":", qualified name
          "kind": "module",                     # "module" | "function"
          "init": {                             # the first construction; null for functions
            "call": "Net(16, hidden=64)",       # null when a required argument cannot be replayed
            "cannot_replay": [{"argument": "config", "type": "GPTConfig", "required": true}]
          },
          "call": {                             # the first call; null if it was never called
            "args": [{"name": "x", "spec": SPEC}],  # positional, in order
            "cannot_replay": null               # or why the call cannot be written as a tuple
          },
          "calls": 250,
          "shapes": [{"shapes": [[32, 16]], "count": 249}, {"shapes": [[8, 16]], "count": 1}],
          "more_shapes": 0,                     # calls with shapes past the first MAX_SHAPES
          "precision": {"device": "cuda", "autocast": "bfloat16", "matmul_tf32": false,
                        "float32_matmul_precision": "highest", "cudnn_tf32": true},  # at the first call
          "run": {"at": "2026-01-01T00:00:00Z", "command": "python train.py", "id": "..."}
        }
      }
    }

SPEC is one of
  {"tensor": {"shape": [32, 16], "dtype": "float32", "device": "cpu", "requires_grad": false,
              "min": 0, "max": 999}}        (min/max: integer and bool tensors only)
  {"value": "0.5"}                          (Python source of a plain value)
  {"tuple": [SPEC, ...]}, {"list": [SPEC, ...]}, {"dict": {"key": SPEC, ...}}
  {"unknown": "TypeName"}                   (cannot be replayed)

`shapes` holds, per distinct call, one shape per tensor argument (in argument order), as the
recompile sweep's `recorded_shapes` wants them. A new run replaces the entries of the targets it
recorded and keeps the others.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Any, Optional

SCHEMA = 1
FOLDER = ".compile-lens"
FILENAME = "recorded.json"
MAX_SHAPES = 32  # distinct shape combinations kept per target


def default_path(root: str) -> str:
    return os.path.join(root, FOLDER, FILENAME)


def read(path: str) -> dict[str, Any]:
    """The targets of a recorded.json; {} when there is none or it is not one we can read."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("targets"), dict):
        return {}
    return {k: v for k, v in data["targets"].items() if isinstance(v, dict)}


def merge_write(path: str, targets: dict[str, Any]) -> None:
    """Replace these targets' entries in the file (others stay), atomically, under a lock."""
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    with _Lock(path + ".lock"):
        merged = read(path)
        merged.update(targets)
        text = dumps({"schema": SCHEMA, "targets": merged})
        fd, tmp = tempfile.mkstemp(prefix=".recorded-", suffix=".json", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text + "\n")
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


_SCALARS = re.compile(r"\[\s+([^\[\]{}\"]*?)\s+\]")  # a list of numbers, true, false, null


def dumps(data: dict) -> str:
    """Sorted keys, one key a line, lists of numbers on one line: stable and small."""
    text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False)
    return _SCALARS.sub(lambda m: "[" + ", ".join(x.strip() for x in m[1].split(",")) + "]", text)


def log(out: str, lines: list) -> None:
    """What went wrong inside the recorder (never shown in the program's output): beside the record."""
    try:
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(os.path.join(os.path.dirname(out), "record.log"), "a", encoding="utf-8") as f:
            f.write("".join(f"{os.getpid()}: {line}\n" for line in lines))
    except OSError:
        pass


class _Lock:
    """An advisory lock beside the file (several recorded processes may end at once)."""

    def __init__(self, path: str):
        self.path = path
        self.fd: Optional[int] = None

    def __enter__(self) -> _Lock:
        try:
            import fcntl

            self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except (ImportError, OSError):
            self.fd = None  # no locking on this platform: last writer wins
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
