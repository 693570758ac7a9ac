"""One ``write`` per HTTP answer: uvicorn's httptools protocol, with the writes made to a
connection during one pass of the event loop gathered into one.

uvicorn writes an answer's status line and headers to the socket when the app sends
``http.response.start``, and its body when the app sends ``http.response.body``: two
``write`` system calls for every answer, and, for a client waiting on the other end (on
loopback, or any network fast enough), two wake-ups and two reads. Node's HTTP server
sends a small answer's head and body in one write; this module does the same for
Railyard's API processes (``railyard api``, ``railyard dev``), without changing what is
sent.

:class:`GatheredWrites` wraps the connection's transport. A ``write`` is kept until the
end of the loop's current pass (``loop.call_soon``) and then written together with the
writes that followed it in the same pass. An app sends a whole small answer without
yielding to the loop (Litestar's response does), so its head and body leave in one
``write``. Nothing waits longer than that pass. Order is kept, and:

- once :data:`FLUSH_BYTES` are held, they are written at once, and a write that large is
  written as it is (after what is held, without copying it), so a large or streamed body
  reaches the real transport (and its flow control, which pauses the app when the client
  reads slowly) as before;
- ``close()`` and ``write_eof()`` write what is held first, and so does the protocol when
  the client closes its side (the event loop then closes the transport itself);
  ``abort()`` drops it, as the transport drops its own buffer, and so does a flush after
  the connection was lost;
- ``get_write_buffer_size()`` counts what is held.

Every other attribute is the real transport's. Measured on the Webhook -> Set -> If
delivery (docs/performance.md, "Seventh round"): the API's CPU per answered request fell
by 0.03-0.07 ms and the load generator's by about 40 %.

uvicorn documents no extension point for its protocols, so the subclass relies on
``HttpToolsProtocol``'s internals: uvicorn is pinned and the seam tested against that
version (tests/unit/test_private_seams.py, tests/integration/test_http_protocol.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

FLUSH_BYTES = 64 * 1024
"""Bytes held at most before they are written at once (a larger write goes at once)."""


class GatheredWrites:
    """A proxy of ``transport`` (an ``asyncio.Transport``) whose writes made during one
    pass of ``loop`` reach ``transport`` as one ``write`` (module doc)."""

    __slots__ = ("_held", "_held_bytes", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] | None = None
        self._held_bytes = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Hold ``data`` (copied unless ``bytes``) until the end of the loop's pass, or
        write it with what is held at once when that reaches :data:`FLUSH_BYTES`."""
        if not data:
            return
        if len(data) >= FLUSH_BYTES:  # large: written as it is, after what is held
            self.flush()
            self._transport.write(data)
            return
        chunk = data if isinstance(data, bytes) else bytes(data)
        if self._held is None:
            self._held = [chunk]
            self._held_bytes = len(chunk)
            self._loop.call_soon(self.flush)
        else:
            self._held.append(chunk)
            self._held_bytes += len(chunk)
        if self._held_bytes >= FLUSH_BYTES:
            self.flush()

    def writelines(self, chunks: Any) -> None:
        """:meth:`write` each of ``chunks`` (an iterable of bytes-like objects)."""
        for chunk in chunks:
            self.write(chunk)

    def flush(self) -> None:
        """Write what is held, as one ``write``: nothing when nothing is held, or when the
        transport is closing (the connection was lost: what is held is dropped, as the
        transport drops its own buffer; a close through this proxy flushes first)."""
        held, self._held = self._held, None
        self._held_bytes = 0
        if held and not self._transport.is_closing():
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        """Write what is held, then close the transport (which sends its buffer first)."""
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        """Write what is held, then close the write end."""
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        """Drop what is held and abort the transport (its own buffer is dropped too)."""
        self._held = None
        self._held_bytes = 0
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        """Bytes the transport has not sent yet, those held here included."""
        return self._transport.get_write_buffer_size() + self._held_bytes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GatheringHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools HTTP/1.1 protocol on a :class:`GatheredWrites` transport; give
    it as ``uvicorn.Config(http=...)``."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.gathered = GatheredWrites(transport, self.loop)
        super().connection_made(self.gathered)  # type: ignore[arg-type]

    def eof_received(self) -> None:
        """The client closed its side: write what is held now, since the event loop then
        closes the transport itself (not through the proxy: uvicorn answers None)."""
        self.gathered.flush()
        super().eof_received()
