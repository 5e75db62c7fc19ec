"""Run-specific text out of messages: what differs between two runs over the same code (object
addresses in reprs, temporary folders, process ids) becomes what stays the same, so a message reads
the same in every run. torch's break and guard texts pass through here where the worker reads them.
Torch-free: the worker and the server both use it."""

from __future__ import annotations

import re
import tempfile

# `<function audit at 0x7fe369bdb380>` -> `audit`; `<bound method Net.f of <Net object at 0x..>>` -> `Net.f`
_FUNCTION_REPR = re.compile(
    r"<(?:function|built-in function|built-in method|bound method|method|cyfunction) "
    r"(?P<name>[\w.<>]+)(?: of <[^<>]*>| of [^<>]*?)?(?: at 0x[0-9a-fA-F]+)?>")
# `<torch._C.Generator object at 0x7f..>` -> `<torch._C.Generator object>`
_ADDRESS_IN_REPR = re.compile(r"(<[^<>]*?) at 0x[0-9a-fA-F]+>")
_BARE_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{9,}\b")  # a pointer printed alone (short hex is a value)
_PID = re.compile(r"\b(pid|process) ?[=:]? ?\d{2,}\b", re.I)


def _temp_folder() -> re.Pattern[str]:
    # tempfile's names: a prefix ("tmp", pytest's "pytest-of-…") then random letters
    roots = sorted({tempfile.gettempdir(), "/tmp", "/var/tmp"}, key=len, reverse=True)
    return re.compile("(?:" + "|".join(re.escape(r) for r in roots) + r")/(?:tmp[\w-]{6,}|pytest-of-[^/\s]+/[^/\s]+)")


_TEMP = _temp_folder()


def stable_text(text: str) -> str:
    """`text` with reprs' addresses, temporary folders and process ids replaced by what does not
    change between runs (`<function audit at 0x7f…>` → `audit`, `/tmp/tmpab12cd/x.py` → `<tmp>/x.py`)."""
    if not text:
        return text
    text = _FUNCTION_REPR.sub(lambda m: m["name"], text)
    text = _ADDRESS_IN_REPR.sub(r"\1>", text)
    text = _BARE_ADDRESS.sub("0x…", text)
    text = _TEMP.sub("<tmp>", text)
    return _PID.sub(lambda m: m[1], text)
