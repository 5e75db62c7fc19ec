"""Every code Compile Lens emits: its severity, its title and where it is documented.

CL codes are Compile Lens's own (documented in docs/codes.md, one anchor per code); GB ids are
TorchDynamo's graph-break registry ids, documented on torch's graph-break site (the URL pattern
of `torch._dynamo.exc.get_gbid_documentation_link`, written out here: the server never imports
torch). Renderers, lints and code actions name codes through this module, never as bare strings.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# Compile Lens's own codes.
TARGET = "CL001"  # a target cannot be built, needs inputs, or its call failed
IMPORT = "CL002"  # the file failed to import
WORKER = "CL003"  # the analysis process crashed, timed out, ran out of memory or exited
DIRECTIVE = "CL004"  # a `# compile-lens:` directive that cannot be read
PRINT = "CL101"
ITEM = "CL102"
TOLIST = "CL103"
TO_NUMPY = "CL104"
TENSOR_BRANCH = "CL105"
NUMPY_CALL = "CL106"
LOGGING = "CL107"
COMPILE_REPEATED = "CL201"
COMPILE_FRESH = "CL202"
VARYING_SCALAR = "CL203"
RECOMPILE_DYNAMIC = "CL210"
RECOMPILE_VALUE = "CL211"
RECOMPILE_LIMIT = "CL212"
RECOMPILE_STATE = "CL213"
ACCURACY = "CL301"
GPU_TIME = "CL401"  # an imported profile's GPU time on a line

# TorchDynamo's codes that Compile Lens knows by id.
GRAPH_BREAK = "graph-break"  # a break torch gives no registry id for
LOOP_BREAK = "GB7000"  # a break inside a loop: torch skips the whole frame
GB_SKIPPED = "GB0007"  # a call to a function Dynamo marks as skipped (the C `_warnings.warn`, …)
GB_PRINT = "GB0059"  # print() (builtin) in compiled code
GB_ITEM = "GB0124"  # Tensor.item() without capture_scalar_outputs
GB_LOGGER = "GB0291"  # a logging.Logger method
GB_PRINT_ARGS = "GB0296"  # print() of arguments torch cannot reorder

GB_SITE = "https://meta-pytorch.github.io/compile-graph-break-site/gb/"


@dataclass(frozen=True)
class Code:
    code: str
    severity: str  # "information", "warning" or "error"; CL001's depends on the case (see `varies`)
    title: str
    varies: bool = False  # the severity differs by case; `severity` is the more severe one


_TABLE = [
    Code(TARGET, "warning", "Target cannot be analysed as written", varies=True),
    Code(IMPORT, "error", "The file failed to import"),
    Code(WORKER, "error", "The analysis process crashed, timed out or ran out of memory"),
    Code(DIRECTIVE, "warning", "A compile-lens directive that cannot be read"),
    Code(PRINT, "information", "print() in compiled code"),
    Code(ITEM, "information", ".item() in compiled code"),
    Code(TOLIST, "information", ".tolist() in compiled code"),
    Code(TO_NUMPY, "information", ".numpy() in compiled code"),
    Code(TENSOR_BRANCH, "information", "branch on a tensor value in compiled code"),
    Code(NUMPY_CALL, "information", "NumPy call in compiled code"),
    Code(LOGGING, "information", "logging call in compiled code"),
    Code(COMPILE_REPEATED, "warning", "torch.compile() called repeatedly"),
    Code(COMPILE_FRESH, "warning", "torch.compile() of a new lambda or closure each time"),
    Code(VARYING_SCALAR, "warning", "Python scalar that varies in a loop passed to a compiled callable"),
    Code(RECOMPILE_DYNAMIC, "information", "Recompiles once when an input's size changes, then is dynamic"),
    Code(RECOMPILE_VALUE, "warning", "Recompiles for every new value of an input"),
    Code(RECOMPILE_LIMIT, "error", "Hits the recompile limit: later calls run eagerly"),
    Code(RECOMPILE_STATE, "information", "Recompiles once per mode switch"),
    Code(ACCURACY, "warning", "Compiled outputs differ from eager"),
    Code(GPU_TIME, "information", "GPU time on this line, from an imported profile"),
    Code(GRAPH_BREAK, "warning", "Graph break (no registry id)"),
    Code(LOOP_BREAK, "warning", "Graph break in a loop: the whole function runs eagerly"),
]
CODES: dict[str, Code] = {c.code: c for c in _TABLE}
LINTS = tuple(c for c in CODES if c.startswith(("CL1", "CL20")))  # the static lints' codes
PREDICTED_BREAKS = tuple(c for c in LINTS if c.startswith("CL1"))


def is_gb_id(code: str) -> bool:
    """A TorchDynamo graph-break registry id (GB0124)."""
    return code.startswith("GB") and code[2:].isdigit()


def is_graph_break(code: str) -> bool:
    """A graph break torch took (a registry id, or none): not a prediction, not a recompile."""
    return code.startswith("GB") or code == GRAPH_BREAK


def title(code: str) -> Optional[str]:
    known = CODES.get(code)
    return known.title if known else None


def href(code: str) -> Optional[str]:
    """The page that documents `code`: torch's graph-break site for a GB id, docs/codes.md for
    the rest (None where this install has no copy of it: no link to a page that is not there)."""
    if is_gb_id(code):
        return f"{GB_SITE}gb{code[2:]}.html"
    docs = _docs_uri()
    if code not in CODES or docs is None:
        return None
    return f"{docs}#{anchor(code)}"


def anchor(code: str) -> str:
    return code.lower()


def web_href(code: str) -> Optional[str]:
    """A page a browser or code scanning can open (http/https): torch's page for a GB id; None for
    Compile Lens's own codes, whose documentation travels as text (`doc_section`) and as a file."""
    return f"{GB_SITE}gb{code[2:]}.html" if is_gb_id(code) else None


_SECTION = re.compile(r'<a id="(?P<anchor>[^"]+)"></a>\n(?P<body>.*?)(?=\n<a id="|\n## |\Z)', re.S)


def doc_section(code: str) -> Optional[str]:
    """The code's entry in docs/codes.md (markdown, its heading included); a GB id without an entry
    of its own gets the GBxxxx entry. None where this install has no copy of the page."""
    sections = _sections()
    found = sections.get(anchor(code))
    if found is None and is_gb_id(code):
        found = sections.get("gbxxxx")
    return found


@functools.lru_cache(maxsize=1)
def _sections() -> dict[str, str]:
    docs = _docs_file()
    if docs is None:
        return {}
    text = docs.read_text(encoding="utf-8")
    return {m["anchor"]: m["body"].strip() for m in _SECTION.finditer(text)}


@functools.lru_cache(maxsize=1)
def _docs_uri() -> Optional[str]:
    docs = _docs_file()  # as_uri costs ~30 µs: once, not per diagnostic
    return docs.as_uri() if docs is not None else None


@functools.lru_cache(maxsize=1)
def _docs_file() -> Optional[Path]:
    here = Path(__file__).resolve().parent
    # the packaged copy (the VS Code extension's bundle), else the source checkout's
    for candidate in (here / "docs" / "codes.md", here.parent.parent / "docs" / "codes.md"):
        if candidate.is_file():
            return candidate
    return None
