"""The server's end of the wire: pygls's protocol, plus notifications whose params are already
JSON (`notify_json`, for the diagnostics `published.py` keeps encoded), framed as pygls frames its own."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from typing import Any

from cattrs import Converter
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger("compile_lens")


class CompileLensProtocol(LanguageServerProtocol):
    """pygls's protocol, plus notifications whose params are JSON already (`notify_json`)."""

    framed = True  # Content-Length headers (stdio); a websocket sends bare bodies

    def __init__(self, server: Any, converter: Converter):
        super().__init__(server, converter)
        # lsprotocol's cattrs converter, the one pygls encodes every message with: pygls hands it to
        # the protocol it builds (its converter_factory), so it is kept here rather than read back
        # from pygls's private attribute
        self.converter = converter

    def set_writer(self, writer: Any, include_headers: bool = True) -> None:
        super().set_writer(writer, include_headers)
        self.framed = include_headers

    def notify_json(self, method: str, params: str) -> None:
        """Send a notification whose params are encoded JSON, framed as pygls frames its own."""
        if self.writer is None:
            log.error("cannot send %s: no transport", method)
            return
        body = f'{{"jsonrpc": "2.0", "method": {json.dumps(method)}, "params": {params}}}'.encode()
        if self.framed:
            header = (f"Content-Length: {len(body)}\r\n"
                      f"Content-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n")
            body = header.encode() + body
        try:
            sent = self.writer.write(body)
            if inspect.isawaitable(sent):
                asyncio.ensure_future(sent)
        except BrokenPipeError:
            log.exception("sending %s failed: the client is gone", method)
            raise
        except Exception:  # noqa: BLE001 - as pygls does for its own messages: said, not raised
            log.exception("sending %s failed", method)
