"""A slow local HTTP endpoint that notices when a client hangs up (asyncio, in the test's
event loop).

``GET /sleep/<seconds>`` answers ``{"slept": seconds}`` after ``seconds``, unless the client
closes the connection first: then nothing is sent and the call is recorded as aborted.
This tells a cancelled remote call (the worker closed the connection) from one that ran to
completion, without timing the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field


@dataclass
class Call:
    """One request: ``path``; ``outcome`` is ``"answered"``, ``"aborted"`` (the client
    closed the connection before the answer) or ``None`` while in progress; ``done`` is set
    when it has an outcome."""

    path: str
    outcome: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class SlowEndpoint:
    """Serves on 127.0.0.1:<port>; ``calls`` holds every request in arrival order."""

    calls: list[Call] = field(default_factory=list)
    server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def start(self) -> SlowEndpoint:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)

    def call(self, path: str) -> Call | None:
        """The first call of ``path`` (``None``: never requested)."""
        return next((c for c in self.calls if c.path == path), None)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        path = head.split(b" ", 2)[1].decode()
        call = Call(path)
        self.calls.append(call)
        seconds = float(path.rsplit("/", 1)[1]) if path.startswith("/sleep/") else 0.0
        # a closed connection makes read() return b"" (EOF) before the sleep ends
        hung_up = asyncio.ensure_future(reader.read(1))
        done, _ = await asyncio.wait({hung_up}, timeout=seconds)
        if done:
            call.outcome = "aborted"
        else:
            hung_up.cancel()
            body = json.dumps({"slept": seconds}).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
            )
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            call.outcome = "answered"
        call.done.set()
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
