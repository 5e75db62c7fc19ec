"""The generated kernels in Inductor's output code (the module `inductor_output_code` names, or
AOTInductor's `inductor_aot_wrapper_code` C++ dump): each `NAME = async_compile.cpp_pybinding([...],
r'''<C++>''')` or `NAME = async_compile.triton('NAME', '''<Triton>''', …)` statement's source, by
kernel name. AOTInductor's wrapper keeps each Triton kernel's statement, indented and without the
`NAME = `, inside a C++ comment (`async_compile.triton('NAME', '''…''')`): found too, dedented.
Text only: the server reads it too."""

from __future__ import annotations

import re
import textwrap

_KERNEL = re.compile(r"^[ \t]*(?:(?P<name>\w+) = )?async_compile\.\w+\((?:'(?P<quoted>\w+)',\s*)?[^\n]*?r?'''"
                     r"(?P<source>.*?)'''", re.S | re.M)
MAX_CHARS = 6000  # a kernel's source kept with a result: enough to read, small enough to cache


def kernel_sources(code: str, names: set[str] | None = None) -> dict[str, str]:
    """{kernel name: its source} (those in `names`, when given), each cut at MAX_CHARS with a marker."""
    found = {}
    for match in _KERNEL.finditer(code or ""):
        name = match["name"] or match["quoted"]
        if not name or (names is not None and name not in names):
            continue
        source = textwrap.dedent(match["source"]).strip("\n")
        found[name] = source if len(source) <= MAX_CHARS else source[:MAX_CHARS] + "\n… (cut here)"
    return found
