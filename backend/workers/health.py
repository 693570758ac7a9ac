"""Riding out outages in the worker and scheduler processes: backoff, state, probes.

- :class:`Backoff`: capped exponential backoff with jitter between reconnection attempts.
- :class:`ServiceHealth`: what a process last saw of PostgreSQL and Redis; logs one line
  when a server goes down and one when it is back (with the outage's length), instead of
  an error per attempt.
- :class:`ProbeServer`: a minimal HTTP endpoint (``railyard worker --health-port N``,
  ``railyard scheduler --health-port N``) answering ``GET /health/live`` (200 while the
  process runs) and ``GET /health/ready`` (200, or 503 naming the server that is down), the
  same contract as the API's ``/health`` routes, for container and Kubernetes probes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import random
import time
from collections.abc import Awaitable, Callable

import msgspec

from backend.observability import metrics

log = logging.getLogger(__name__)


class Backoff:
    """Delays for successive retries: ``min(cap, initial * factor**n)`` scaled by a random
    factor in [0.5, 1] ("equal jitter", AWS Architecture Blog, "Exponential Backoff And
    Jitter", 2015), so many processes reconnecting to a restarted server spread out.

    Seconds throughout; :meth:`reset` after a success starts again from ``initial``.
    """

    def __init__(self, initial: float = 0.1, cap: float = 5.0, factor: float = 2.0) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.attempt = 0

    def next(self) -> float:
        """The delay before the next retry, in seconds."""
        delay = min(self.cap, self.initial * self.factor**self.attempt)
        self.attempt += 1
        return delay * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        """Start again from ``initial`` (after a successful attempt)."""
        self.attempt = 0


class ServiceHealth:
    """The last-seen state of each server (``"database"``, ``"redis"``) in one process.

    ``down(name, exc)`` and ``up(name)`` are cheap and idempotent; only a change of state
    is logged. :meth:`report` gives the readiness body: ``{"redis": "ok" | "down: ..."}``.
    """

    def __init__(self, process: str) -> None:
        self.process = process
        self._down_since: dict[str, float] = {}
        self._reason: dict[str, str] = {}
        self._seen: set[str] = set()

    def down(self, name: str, exc: BaseException | str) -> None:
        """Record that ``name`` failed (logs a warning the first time in an outage)."""
        reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        self._seen.add(name)
        if name not in self._down_since:
            self._down_since[name] = time.monotonic()
            log.warning(
                "%s: %s unavailable (%s); retrying with backoff", self.process, name, reason
            )
        self._reason[name] = reason

    def up(self, name: str) -> None:
        """Record that ``name`` answered (logs the outage's length when one ends)."""
        self._seen.add(name)
        since = self._down_since.pop(name, None)
        self._reason.pop(name, None)
        if since is not None:
            log.warning("%s: %s is back after %.1f s", self.process, name, time.monotonic() - since)

    def is_down(self, name: str) -> bool:
        """True while ``name`` is in an outage as last seen."""
        return name in self._down_since

    def report(self) -> dict[str, str]:
        """``{name: "ok" | "down: <reason>"}`` for every server seen so far."""
        return {
            name: f"down: {self._reason[name]}" if name in self._down_since else "ok"
            for name in sorted(self._seen)
        }


ReadinessCheck = Callable[[], Awaitable[dict[str, str]]]
"""Returns ``{server: "ok" | "down: ..."}``; ready when every value is ``"ok"``."""


class ProbeServer:
    """HTTP/1.1 liveness and readiness endpoint on ``host:port`` (see the module docstring),
    plus ``GET /metrics``: this process's Prometheus metrics (backend/observability/
    metrics.py). When ``metrics_token`` is set, ``/metrics`` answers 401 unless the request
    sends ``Authorization: Bearer <metrics_token>``; when it is not set, only clients on
    this host (loopback addresses) may read it, anyone else gets 403.

    ``host`` defaults to loopback: probes of a container platform reach the process at an
    address it is given explicitly (the pod IP in the Kubernetes manifests).

    ``ready`` is called for each ``/health/ready`` request; ``describe()``, when given, adds
    entries to that body that say what the process is doing without deciding readiness
    (a scheduler's ``{"role": "standby"}``). Any other path answers 404.
    One request per connection (``Connection: close``); the request head is limited to
    8 KiB and 5 seconds.
    """

    def __init__(
        self,
        ready: ReadinessCheck,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        metrics_token: str = "",
        describe: Callable[[], dict[str, str]] | None = None,
    ) -> None:
        self.ready = ready
        self.describe = describe
        self.host = host
        self.port = port
        self.metrics_token = metrics_token
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Listen; ``self.port`` is the bound port afterwards (useful with port 0)."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("health probes at http://%s:%d/health/ready", self.host, self.port)

    async def close(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        content_type = "application/json"
        try:
            async with asyncio.timeout(5):
                head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > 8192:
                raise ValueError("request head too large")
            line, *header_lines = head.decode("latin-1").split("\r\n")
            method, _, rest = line.partition(" ")
            path = rest.partition(" ")[0].partition("?")[0]
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (h.partition(":") for h in header_lines if h)
            }
            if method == "GET" and path == "/metrics":
                peer = writer.get_extra_info("peername")
                status, content_type, payload = self._metrics(
                    headers.get("authorization", ""), peer[0] if peer else None
                )
            else:
                status, body = await self._answer(method, path)
                payload = msgspec.json.encode(body)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            status, payload = 400, msgspec.json.encode({"detail": "bad request"})
        reason = {
            200: "OK",
            400: "Bad Request",
            401: "Unauthorized",
            403: "Forbidden",
            404: "Not Found",
            503: "Service Unavailable",
        }
        writer.write(
            f"HTTP/1.1 {status} {reason.get(status, '')}\r\ncontent-type: {content_type}\r\n"
            f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode()
            + payload
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    def _metrics(self, authorization: str, peer: str | None) -> tuple[int, str, bytes]:
        """The answer to ``GET /metrics`` from ``peer`` (the client's IP address): status,
        content type, body (see the class docstring)."""
        if not self.metrics_token and not _is_loopback(peer):
            body = msgspec.json.encode(
                {"detail": "set RAILYARD_METRICS_TOKEN to read metrics from another host"}
            )
            return 403, "application/json", body
        if self.metrics_token:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                token.strip().encode(), self.metrics_token.encode()
            ):
                body = msgspec.json.encode({"detail": "send the metrics token as a bearer token"})
                return 401, "application/json", body
        return 200, metrics.CONTENT_TYPE, metrics.exposition()

    async def _answer(self, method: str, path: str) -> tuple[int, dict[str, str]]:
        if method != "GET":
            return 404, {"detail": "not found"}
        if path == "/health/live":
            return 200, {"status": "ok"}
        if path == "/health/ready":
            result = await self.ready()
            status = 200 if all(v == "ok" for v in result.values()) else 503
            return status, {**result, **(self.describe() if self.describe else {})}
        return 404, {"detail": "not found"}


def _is_loopback(address: str | None) -> bool:
    """True for a loopback IP address (``127.0.0.0/8``, ``::1``, IPv4-mapped loopback)."""
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool((mapped or ip).is_loopback)
