"""`python -m compile_lens`: the language server over stdio.

The LSP stream gets private copies of fds 0 and 1 before anything else runs; fd 1 then points at
stderr and fd 0 at /dev/null, so nothing this process or its children print (Python, C, a
subprocess) can corrupt the stream.
"""

import gc
import logging
import os
import sys


def _guard_stdio():
    # Buffered on purpose: a raw pipe may return (or take) fewer bytes than asked for in one call.
    lsp_in = os.fdopen(os.dup(0), "rb")
    lsp_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    sys.stdout = sys.stderr
    return lsp_in, lsp_out


def main() -> None:
    lsp_in, lsp_out = _guard_stdio()
    logging.basicConfig(
        level=os.environ.get("COMPILE_LENS_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("pygls").setLevel(logging.WARNING)  # it logs every message at INFO
    from .lsp.app import server

    # The event loop shares the GIL with the thread that finds a big file's targets while the user
    # types: hand it over every 1 ms, not 5 (a keystroke waited up to 5 ms per wake-up for it), and
    # keep what the imports made (lsprotocol, pygls, cattrs: ~60,000 objects that live as long as
    # the process) out of the collector's full passes, which hold the GIL while they scan.
    sys.setswitchinterval(0.001)
    gc.freeze()
    server.start_io(lsp_in, lsp_out)


if __name__ == "__main__":
    main()
