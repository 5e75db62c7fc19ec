"""The generated kernels in Inductor's output code (the module `inductor_output_code` names): each
`NAME = async_compile.cpp_pybinding([...], r'''<C++>''')` or `NAME = async_compile.triton('NAME',
'''<Triton>''', …)` statement's source, by kernel name. Text only: the server reads it too."""

from __future__ import annotations

import re

_KERNEL = re.compile(r"^(?P<name>\w+) = async_compile\.\w+\(.*?r?'''(?P<source>.*?)'''", re.S | re.M)
MAX_CHARS = 6000  # a kernel's source kept with a result: enough to read, small enough to cache


def kernel_sources(code: str, names: set[str] | None = None) -> dict[str, str]:
    """{kernel name: its source} (those in `names`, when given), each cut at MAX_CHARS with a marker."""
    found = {}
    for match in _KERNEL.finditer(code or ""):
        name = match["name"]
        if names is not None and name not in names:
            continue
        source = match["source"].strip("\n")
        found[name] = source if len(source) <= MAX_CHARS else source[:MAX_CHARS] + "\n… (cut here)"
    return found
