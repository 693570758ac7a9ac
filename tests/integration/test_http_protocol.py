"""One write per HTTP answer (backend/cli/http_protocol.py): the gathering transport on
its own, then uvicorn serving with the protocol over real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn

from backend.cli.http_protocol import FLUSH_BYTES, GatheredWrites, GatheringHttpToolsProtocol
from backend.embedded import free_port


class Transport:
    """The calls a transport receives, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.buffered = 7
        self.closing = False

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: bytes) -> None:
        self.calls.append(("write", data))

    def close(self) -> None:
        self.calls.append(("close", None))

    def write_eof(self) -> None:
        self.calls.append(("write_eof", None))

    def abort(self) -> None:
        self.calls.append(("abort", None))

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


async def test_writes_of_one_pass_leave_as_one_write_when_it_ends() -> None:
    real = Transport()
    gathered = GatheredWrites(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    gathered.write(b"HTTP/1.1 202 Accepted\r\n\r\n")
    gathered.write(b"")  # ignored, as by asyncio's transports
    gathered.writelines([b"{", bytearray(b"}")])
    assert real.calls == []
    assert gathered.get_write_buffer_size() == 7 + 27
    await asyncio.sleep(0)
    assert real.calls == [("write", b"HTTP/1.1 202 Accepted\r\n\r\n{}")]
    assert gathered.get_write_buffer_size() == 7
    gathered.write(b"next")  # a later pass: its own write
    await asyncio.sleep(0)
    assert real.calls[1:] == [("write", b"next")]


async def test_a_held_bytearray_is_copied() -> None:
    real = Transport()
    gathered = GatheredWrites(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    data = bytearray(b"abc")
    gathered.write(data)
    data[:] = b"xyz"
    await asyncio.sleep(0)
    assert real.calls == [("write", b"abc")]


async def test_close_and_write_eof_write_what_is_held_first_abort_drops_it() -> None:
    loop = asyncio.get_running_loop()
    real = Transport()
    gathered = GatheredWrites(real, loop)  # type: ignore[arg-type]
    gathered.write(b"a")
    gathered.close()
    assert real.calls == [("write", b"a"), ("close", None)]
    real = Transport()
    gathered = GatheredWrites(real, loop)  # type: ignore[arg-type]
    gathered.write(b"b")
    gathered.write_eof()
    assert real.calls == [("write", b"b"), ("write_eof", None)]
    real = Transport()
    gathered = GatheredWrites(real, loop)  # type: ignore[arg-type]
    gathered.write(b"c")
    gathered.abort()
    await asyncio.sleep(0)  # the pass's end finds nothing held
    assert real.calls == [("abort", None)]


async def test_a_large_write_reaches_the_transport_at_once_and_uncopied() -> None:
    real = Transport()
    gathered = GatheredWrites(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    gathered.write(b"head")
    large = b"x" * FLUSH_BYTES
    gathered.write(large)
    assert real.calls == [("write", b"head"), ("write", large)]
    assert real.calls[1][1] is large
    await asyncio.sleep(0)
    assert len(real.calls) == 2
    for _ in range(FLUSH_BYTES // 1024):  # held writes that add up: written at once
        gathered.write(b"y" * 1024)
    assert real.calls[2:] == [("write", b"y" * FLUSH_BYTES)]


async def test_what_is_held_when_the_connection_is_lost_is_dropped() -> None:
    real = Transport()
    gathered = GatheredWrites(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    gathered.write(b"late")
    real.closing = True  # e.g. the client reset the connection
    await asyncio.sleep(0)
    assert real.calls == []


async def test_other_attributes_are_the_transports() -> None:
    gathered = GatheredWrites(Transport(), asyncio.get_running_loop())  # type: ignore[arg-type]
    assert gathered.get_extra_info("peername") == ("127.0.0.1", 1)
    with pytest.raises(AttributeError):
        gathered.no_such_thing  # noqa: B018


# -------------------------------------------------------------------- served by uvicorn

WRITES: list[int] = []
"""Writes that reached a served connection's real transport, one entry per write."""


class Counted:
    """A transport that counts the writes reaching it (uvloop's transports cannot be
    patched)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport

    def write(self, data: Any) -> None:
        WRITES.append(len(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CountingProtocol(GatheringHttpToolsProtocol):
    """The protocol under test, on a transport that counts what reaches the socket."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(Counted(transport))  # type: ignore[arg-type]


STREAM_GATE: asyncio.Event | None = None


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``/small``: a 202 with a JSON body; ``/large``: 1 MiB; ``/stream``: a first chunk,
    then (after :data:`STREAM_GATE`) a second."""
    assert scope["type"] == "http"
    while (await receive()).get("more_body"):
        pass
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first;", "more_body": True})
        assert STREAM_GATE is not None
        await STREAM_GATE.wait()
        await send({"type": "http.response.body", "body": b"second"})
        return
    body = b"x" * (1024 * 1024) if scope["path"] == "/large" else b'{"ok":true}'
    status = 200 if scope["path"] == "/large" else 202
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def served() -> AsyncIterator[int]:
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, http=CountingProtocol, lifespan="off", log_level="warning"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done(), "uvicorn did not start"
        await asyncio.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def connected() -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """A client connection to the app served with the protocol, closed at the end."""
    async with served() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            yield reader, writer
        finally:
            writer.close()
            await writer.wait_closed()


async def read_answer(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """(head, body) of one answer with a Content-Length."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head, await asyncio.wait_for(reader.readexactly(length), 5)


async def test_each_small_answer_is_one_write_on_a_kept_alive_connection() -> None:
    async with served() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        WRITES.clear()
        for _ in range(3):
            writer.write(b"POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
            head, body = await read_answer(reader)
            assert head.startswith(b"HTTP/1.1 202 ")
            assert body == b'{"ok":true}'
        assert len(WRITES) == 3


async def test_a_large_body_arrives_whole() -> None:
    async with connected() as (reader, writer):
        writer.write(b"GET /large HTTP/1.1\r\nHost: x\r\n\r\n")
        head, body = await read_answer(reader)
        assert head.startswith(b"HTTP/1.1 200 ")
        assert body == b"x" * (1024 * 1024)


async def test_a_streamed_chunk_is_sent_before_the_answer_ends() -> None:
    global STREAM_GATE
    STREAM_GATE = asyncio.Event()
    async with connected() as (reader, writer):
        writer.write(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert b"transfer-encoding: chunked" in head.lower()
        first = await asyncio.wait_for(reader.readuntil(b"first;\r\n"), 5)
        assert first.endswith(b"first;\r\n")
        STREAM_GATE.set()
        rest = await asyncio.wait_for(reader.readuntil(b"0\r\n\r\n"), 5)
        assert b"second" in rest


async def test_an_answer_to_a_half_closed_connection_is_sent() -> None:
    async with connected() as (reader, writer):
        writer.write(b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
        writer.write_eof()  # the client sends nothing more: the server closes after answering
        head, body = await asyncio.wait_for(read_answer(reader), 5)
        assert head.startswith(b"HTTP/1.1 202 ") and body == b'{"ok":true}'


async def test_connection_close_sends_the_answer_then_closes() -> None:
    async with connected() as (reader, writer):
        writer.write(b"GET /small HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        head, body = await read_answer(reader)
        assert head.startswith(b"HTTP/1.1 202 ") and body == b'{"ok":true}'
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed after the answer


def test_served_on_uvloop_as_railyard_api_runs_it() -> None:
    """The API runs on uvloop, whose transports differ from asyncio's in what they do
    after a close: the answers above, again on it."""
    uvloop = pytest.importorskip("uvloop")
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(test_each_small_answer_is_one_write_on_a_kept_alive_connection())
        runner.run(test_an_answer_to_a_half_closed_connection_is_sent())
        runner.run(test_connection_close_sends_the_answer_then_closes())
        runner.run(test_a_large_body_arrives_whole())
