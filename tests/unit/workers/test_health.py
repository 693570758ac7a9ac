"""Backoff delays, one log line per outage, and the probe endpoint's answers."""

from __future__ import annotations

import asyncio
import logging

import pytest

from backend.observability import metrics
from backend.workers.health import Backoff, ProbeServer, ServiceHealth
from backend.workers.scheduler import Leadership


def test_backoff_doubles_up_to_the_cap_with_jitter_and_resets() -> None:
    backoff = Backoff(initial=0.1, cap=1.0)
    delays = [backoff.next() for _ in range(8)]
    ceilings = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True)), delays
    backoff.reset()
    assert backoff.next() <= 0.1


def test_an_outage_is_logged_once_when_it_starts_and_once_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    health = ServiceHealth("worker")
    health.up("redis")
    with caplog.at_level(logging.WARNING, logger="backend.workers.health"):
        for _ in range(5):
            health.down("redis", ConnectionError("refused"))
        assert health.report() == {"redis": "down: ConnectionError: refused"}
        health.up("redis")
        health.up("redis")
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "redis unavailable" in messages[0] and "redis is back after" in messages[1]
    assert health.report() == {"redis": "ok"} and not health.is_down("redis")


async def test_the_probe_answers_live_ready_and_not_ready() -> None:
    state = {"database": "ok", "redis": "ok"}

    async def ready() -> dict[str, str]:
        return dict(state)

    server = ProbeServer(ready, host="127.0.0.1", port=0)
    await server.start()

    async def get(path: str) -> tuple[bytes, bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(f"GET {path} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
        answer = await reader.read()
        writer.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        return head.split(b"\r\n")[0], body

    try:
        assert await get("/health/live") == (b"HTTP/1.1 200 OK", b'{"status":"ok"}')
        assert (await get("/health/ready"))[0] == b"HTTP/1.1 200 OK"
        state["redis"] = "down: ConnectionError"
        status, body = await get("/health/ready")
        assert status == b"HTTP/1.1 503 Service Unavailable"
        assert body == b'{"database":"ok","redis":"down: ConnectionError"}'
        assert (await get("/nope"))[0] == b"HTTP/1.1 404 Not Found"
    finally:
        await server.close()


async def test_what_the_probe_describes_never_decides_readiness() -> None:
    """A scheduler's ``{"role": "standby"}`` is in the body; the servers alone decide."""
    leader = Leadership("host:1")
    state = {"database": "ok", "redis": "ok"}

    async def ready() -> dict[str, str]:
        return dict(state)

    server = ProbeServer(ready, host="127.0.0.1", port=0, describe=leader.describe)
    await server.start()

    async def get() -> tuple[bytes, bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /health/ready HTTP/1.1\r\nhost: x\r\n\r\n")
        answer = await reader.read()
        writer.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        return head.split(b"\r\n")[0], body

    try:
        assert await get() == (
            b"HTTP/1.1 200 OK",
            b'{"database":"ok","redis":"ok","role":"standby"}',
        )
        leader.lead()
        assert (await get())[1] == b'{"database":"ok","redis":"ok","role":"leader"}'
        assert metrics.SCHEDULER_LEADER.labels("host:1")._value.get() == 1
        state["database"] = "down: ConnectionRefusedError"
        leader.stand_by()
        status, body = await get()
        assert status == b"HTTP/1.1 503 Service Unavailable"
        assert body.endswith(b'"role":"standby"}')
        assert metrics.SCHEDULER_LEADER.labels("host:1")._value.get() == 0
    finally:
        await server.close()
