"""The app served by uvicorn on a free 127.0.0.1 port, in the test's event loop, for tests
that need real sockets (streamed answers, clients with their own transport)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import uvicorn

from backend.app import create_app
from backend.runtime import Runtime
from backend.settings import Settings


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def served_app(settings: Settings, runtime: Runtime) -> AsyncIterator[str]:
    """The app on ``http://127.0.0.1:<port>`` (the yielded base URL) while the block runs;
    fails when uvicorn has not started within 20 s."""
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, runtime),
            host="127.0.0.1",
            port=free_port(),
            log_level="warning",
            lifespan="off",
        )
    )
    task = asyncio.create_task(server.serve())
    for _ in range(1000):
        if server.started:
            break
        await asyncio.sleep(0.02)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        await task
