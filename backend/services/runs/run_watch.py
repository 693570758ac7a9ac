"""Following a run as it changes: the webhook's wait for an answer, the run page's live feed.

PostgreSQL holds the truth; Redis pub/sub notices on :func:`run_channel` say "look
again", and what the run's status became (backend/services/runs/channels.py). Both watchers
read the run, and when they need more, wait for the next notice at most a second before
reading again, so a lost notice delays an update by a second and never loses it. The
webhook's wait reads the run again only on a notice that can answer it (the run ended or
holds a Respond step's answer), and answers from the notice itself when it carries the
answer whole (a small one); a notice that does not say (or none within the second) means
a read.

A process's own notices reach its waits without Redis (:class:`LocalNotices`): a webhook
waiting for a run this process executes eagerly is woken at once, and subscribes to the
run's channel on Redis only if the run leaves the process (its step handed to a worker:
a delay, a retry, a shutdown) or was not executed here after all (:meth:`RunNotices.watch`
with ``remote=False``, then :meth:`NoticeWait.go_remote`), reading the run once after
subscribing. An eager run that ends here costs no Redis round trip to its wait.

Waiting webhooks share one Redis subscription per process (:class:`RunNotices`): a wait
sends one ``SUBSCRIBE`` and one ``UNSUBSCRIBE`` on that connection instead of taking a
connection of its own, and one reader task wakes the waits whose run changed. The run is
read with one autocommit statement (no ``BEGIN``/``ROLLBACK`` around it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models import Run
from backend.engine.ports import EventSink
from backend.engine.states import RunStatus
from backend.services.runs import run_values, runs
from backend.services.runs.channels import CHANGED, RunNotice, decode_notice, run_channel

POLL_SECONDS = 1.0
"""Longest wait for a change notice before the run is read again."""

log = logging.getLogger(__name__)

_TERMINAL = frozenset(s.value for s in RunStatus if s.terminal)


class NoticeWait:
    """One wait's view of a run's notices: ``event`` is set by each notice, which is kept
    (decoded; ``None`` for one that says nothing) until :meth:`take`.

    ``remote``: the run's notices from other processes reach it (its channel is
    subscribed on Redis). A wait made with ``remote=False`` hears only this process's
    notices until :meth:`go_remote`; ``left`` is set (and the waiter woken) when the run
    this process executed eagerly left it without ending (:meth:`RunNotices.run_left`)."""

    def __init__(self, subscribe: Callable[[], Awaitable[None]] | None = None) -> None:
        self.event = asyncio.Event()
        self._notices: list[RunNotice | None] = []
        self._subscribe = subscribe
        self.remote = subscribe is None
        self.left = False

    async def go_remote(self) -> None:
        """Subscribe to the run's channel on Redis (once); read the run after this, since
        what it announced before was not heard."""
        if not self.remote and self._subscribe is not None:
            self.remote = True
            await self._subscribe()

    def run_left(self) -> None:
        """The run left this process: wake the waiter, which goes remote and reads."""
        self.left = True
        self.event.set()

    def put(self, notice: RunNotice | None) -> None:
        """Keep ``notice`` and wake the waiter."""
        self._notices.append(notice)
        self.event.set()

    def take(self) -> list[RunNotice | None]:
        """The notices since the last call, oldest first (and clear the event)."""
        notices, self._notices = self._notices, []
        self.event.clear()
        return notices


class RunNotices:
    """One Redis pub/sub connection carrying the change notices of every run this process
    waits for (see the module doc); made by :func:`notices_for`.

    :meth:`watch` subscribes to a run's channel while at least one wait needs it. The
    reader task runs while anyone waits and stops after a second with nobody waiting (so
    nothing outlives the requests, and no shutdown hook is needed). A Redis failure only
    turns the waits into one-second polls: the reader starts over on a new connection.
    """

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._waits: dict[str, set[NoticeWait]] = {}
        self._remote: set[str] = set()  # channels subscribed on Redis (or being)
        self._pubsub: PubSub | None = None
        self._reading: PubSub | None = None  # the connection a reader task serves
        self._readers: set[asyncio.Task[None]] = set()
        self._leaving: set[asyncio.Task[None]] = set()  # UNSUBSCRIBEs under way
        # one command at a time: redis-py's PubSub would open a connection per concurrent
        # first command
        self._sending = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def watch(
        self, run_id: uuid.UUID | str, *, remote: bool = True
    ) -> AsyncIterator[NoticeWait]:
        """Within the block, the :class:`NoticeWait` that receives every change notice
        of run ``run_id`` (take its notices before reading the run, then wait on it).
        ``remote=False``: only this process's notices until the wait's
        :meth:`~NoticeWait.go_remote` (a run this process is about to execute eagerly)."""
        channel = run_channel(str(run_id))

        async def subscribe() -> None:
            if channel not in self._remote:
                self._remote.add(channel)
                await self._send("subscribe", channel)

        wait = NoticeWait(None if remote else subscribe)
        waits = self._waits.setdefault(channel, set())
        waits.add(wait)
        try:
            if remote:
                await subscribe()
            yield wait
        finally:
            waits.discard(wait)
            if not waits and self._waits.get(channel) is waits:
                del self._waits[channel]
                if channel in self._remote:
                    self._remote.discard(channel)
                    # in the background: the caller's answer does not wait for the round trip
                    leaving = asyncio.create_task(self._leave(channel))
                    self._leaving.add(leaving)
                    leaving.add_done_callback(self._leaving.discard)

    async def _leave(self, channel: str) -> None:
        """UNSUBSCRIBE ``channel`` unless a wait subscribed it again meanwhile."""
        async with self._sending:
            if channel not in self._remote:
                await self._send_one("unsubscribe", channel)

    def run_left(self, run_id: str) -> None:
        """Run ``run_id``, executed eagerly by this process, left it (its eager task
        ended; the run may have ended too): its waits that hear only this process are
        woken to subscribe on Redis and read the run (:class:`NoticeWait`)."""
        for wait in self._waits.get(run_channel(run_id), ()):
            if not wait.remote:
                wait.run_left()

    async def _send(self, command: str, channel: str) -> None:
        """SUBSCRIBE or UNSUBSCRIBE ``channel`` on the shared connection (started now when
        there is none); a Redis error is logged, the reader's next start subscribes again."""
        async with self._sending:
            await self._send_one(command, channel)

    async def _send_one(self, command: str, channel: str) -> None:
        if self._pubsub is None:
            if command == "unsubscribe":
                return
            self._pubsub = self.redis.pubsub()
        pubsub = self._pubsub
        try:
            await getattr(pubsub, command)(channel)
        except (RedisError, OSError) as exc:
            log.debug("run notices: %s %s failed: %s", command, channel, exc)
            self._drop(pubsub)
            return
        if self._reading is not pubsub:
            self._reading = pubsub
            reader = asyncio.create_task(self._read(pubsub))
            self._readers.add(reader)
            reader.add_done_callback(self._readers.discard)

    def _drop(self, pubsub: PubSub) -> None:
        """Forget ``pubsub`` (after a failure or when idle); its reader ends."""
        if self._pubsub is pubsub:
            self._pubsub = None

    async def _read(self, pubsub: PubSub) -> None:
        """Wake the waits of each run whose notice arrives, until a second passes with
        nobody waiting or the connection fails (then the waits poll and the next
        :meth:`watch` starts over, subscribing the runs still waited for)."""
        try:
            while self._pubsub is pubsub:
                message = await pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=POLL_SECONDS
                )
                if message is not None and message.get("type") == "message":
                    channel = message["channel"]
                    if isinstance(channel, bytes):
                        channel = channel.decode()
                    waits = self._waits.get(channel, ())
                    if waits:
                        notice = decode_notice(message["data"])
                        for wait in waits:
                            wait.put(notice)
                elif message is None and not self._remote:
                    self._drop(pubsub)
        except (RedisError, OSError, RuntimeError) as exc:
            log.debug("run notices: connection lost: %s", exc)
            self._drop(pubsub)
            if self._remote:  # the waits poll meanwhile; resubscribe on a new connection
                await asyncio.sleep(POLL_SECONDS)
                if self._pubsub is None and self._remote:
                    await self._resubscribe()
        finally:
            with contextlib.suppress(RedisError, OSError, RuntimeError):
                await pubsub.aclose()

    def deliver(self, run_id: str, notice: bytes) -> int:
        """Hand ``notice`` of run ``run_id``, announced by this process, to this process's
        waits of that run at once (no round trip through Redis; the same notice also
        arrives through the subscription, and a notice only says "look again", so the
        second one is harmless). Returns how many waits it reached."""
        waits = self._waits.get(run_channel(run_id), ())
        if waits:
            decoded = decode_notice(notice)
            for wait in waits:
                wait.put(decoded)
        return len(waits)

    async def close(self) -> None:
        """Stop the reader and close the connection (the process is shutting down)."""
        self._pubsub = self._reading = None
        readers = [*self._readers, *self._leaving]
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)

    async def _resubscribe(self) -> None:
        """Subscribe again to every run still waited for from Redis, on a new connection."""
        for channel in list(self._remote):
            await self._send("subscribe", channel)


_NOTICES: weakref.WeakKeyDictionary[Redis, RunNotices] = weakref.WeakKeyDictionary()


class LocalNotices:
    """The event sink of a process: each run-change notice is delivered to this process's
    own waits of the run at once (:meth:`RunNotices.deliver`: a webhook waiting for a run
    this process runs eagerly is woken without Redis), then published through ``sink``
    (the dispatcher's Redis ``PUBLISH``) for the other processes' listeners."""

    def __init__(self, sink: EventSink, redis: Redis) -> None:
        self.sink = sink
        self.redis = redis

    async def notify(self, run_id: str, notice: bytes = CHANGED) -> None:
        """Deliver ``notice`` of run ``run_id`` here, then publish it."""
        found = _NOTICES.get(self.redis)
        if found is not None:
            found.deliver(run_id, notice)
        await self.sink.notify(run_id, notice)


def notices_for(redis: Redis) -> RunNotices:
    """The process's :class:`RunNotices` on ``redis`` (one per client, made on first use)."""
    found = _NOTICES.get(redis)
    if found is None:
        found = _NOTICES[redis] = RunNotices(redis)
    return found


async def close_notices(redis: Redis) -> None:
    """Close the shared subscription on ``redis``, if one was made (before closing it)."""
    found = _NOTICES.pop(redis, None)
    if found is not None:
        await found.close()


async def _answer_fields(
    sessionmaker: async_sessionmaker[AsyncSession], run_id: uuid.UUID, last_step: bool
) -> tuple[str, Any, Any, Any]:
    """``(status, response, error, output)`` of the run in one autocommit statement; the
    output with its large parts put back when the run succeeded and ``last_step``.

    Raises ``sqlalchemy.exc.NoResultFound`` when the run does not exist."""
    async with sessionmaker() as session:
        await session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
        status, response, error, output = (
            await session.execute(
                select(Run.status, Run.response, Run.error, Run.output).where(Run.id == run_id)
            )
        ).one()
        if status == "succeeded" and last_step:
            output = await run_values.full_value(session, output)
    return status, response, error, output


def _answer(
    run_id: uuid.UUID,
    status: str,
    response: Any,
    error: Any,
    output: Any,
    last_step: bool,
    detail: bool = False,
) -> tuple[bool, dict[str, Any] | None]:
    """``(decided, answer)`` of a run in ``status`` with these values (see
    :func:`wait_for_answer`); ``decided`` False: keep waiting. A run that ended without
    succeeding answers 500 with :func:`failure_body`."""
    if response is not None and not last_step:
        return True, dict(response)
    if status in ("failed", "cancelled", "timed_out"):
        return True, {
            "status": 500,
            "headers": {},
            "body": failure_body(run_id, status, error, detail),
        }
    if status == "succeeded":
        return True, ({"status": 200, "headers": {}, "body": output} if last_step else None)
    return False, None


def failure_body(run_id: uuid.UUID, status: str, error: Any, detail: bool) -> dict[str, Any]:
    """The body a webhook caller gets for a run that ended in ``status`` (``failed``,
    ``cancelled``, ``timed_out``): ``{"run_id", "status", "detail"}`` with a fixed
    sentence, nothing of the workflow's internals; with ``detail`` (the webhook's explicit
    ``failure_answer: detailed``) ``"error"`` as the run recorded it (kind, step, message)
    instead of the sentence."""
    if detail:
        return {"run_id": str(run_id), "status": status, "error": error}
    words = {"failed": "failed", "cancelled": "was cancelled", "timed_out": "timed out"}
    return {"run_id": str(run_id), "status": status, "detail": f"the run {words[status]}"}


def _can_answer(notice: RunNotice, last_step: bool) -> bool:
    """True when the run ``notice`` describes may give the wait its answer."""
    return notice.status in _TERMINAL or (notice.answered and not last_step)


@contextlib.asynccontextmanager
async def early_watch(
    redis: Redis, run_id: uuid.UUID, *, enabled: bool = True, remote: bool = True
) -> AsyncIterator[NoticeWait | None]:
    """Within the block, the notices of run ``run_id``, watched BEFORE the run is
    stored (the caller chose its id), for :func:`wait_for_answer`'s ``watched``; ``None``
    without watching when not ``enabled``. ``remote=False``: this process's notices only
    (the run may be executed here eagerly), until the wait goes remote
    (:meth:`NoticeWait.go_remote`)."""
    if not enabled:
        yield None
        return
    async with notices_for(redis).watch(run_id, remote=remote) as wait:
        yield wait


async def wait_for_answer(
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: Redis,
    run_id: uuid.UUID,
    timeout: float,
    *,
    last_step: bool = False,
    watched: NoticeWait | None = None,
    started_status: str | None = None,
    failure_detail: bool = False,
) -> dict[str, Any] | None:
    """Wait up to ``timeout`` seconds for the run's webhook answer.

    ``last_step=False`` (response mode ``respond_node``): the Respond step's
    ``{"status", "headers", "body"}``; ``last_step=True``: 200 with the run's output once it
    succeeded. A run that failed, was cancelled or timed out gives a 500 answer with the
    run id and status, and the run's error only with ``failure_detail``
    (:func:`failure_body`); ``None`` on timeout (or a run that ended without an answer).
    Change notices come through the process's shared subscription (:func:`notices_for`);
    the run is read once now, then only after a notice that can answer without carrying
    the answer, a notice that does not say, or :data:`POLL_SECONDS` without a notice
    (module doc).

    ``watched``: the run's notices watched before the run was stored
    (:func:`early_watch`), which then started in ``started_status``; when that status
    cannot answer ``last_step`` (the run neither ended nor is queued) the first read is
    skipped: every later change is announced to a wait already listening (``None``: a
    wait that started listening after the run was stored, which reads first). A wait that
    hears only this process (``watched.remote`` False) goes remote and reads when the run
    leaves the process (``watched.left``).
    """
    if watched is not None:
        skip = (
            started_status is not None
            and last_step
            and started_status not in _TERMINAL
            and started_status != "queued"
        )
        return await _wait(
            sessionmaker, watched, run_id, timeout, last_step, failure_detail, read=not skip
        )
    async with notices_for(redis).watch(run_id) as wait:
        return await _wait(
            sessionmaker, wait, run_id, timeout, last_step, failure_detail, read=True
        )


async def _wait(
    sessionmaker: async_sessionmaker[AsyncSession],
    wait: NoticeWait,
    run_id: uuid.UUID,
    timeout: float,
    last_step: bool,
    detail: bool,
    *,
    read: bool,
) -> dict[str, Any] | None:
    """:func:`wait_for_answer` on ``wait``, reading the run first when ``read``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if read:
            if wait.left and not wait.remote:
                await wait.go_remote()  # the run left this process: hear the others too
            # what they announced, this read would see; a notice already here carrying
            # the answer is it, as built in memory (jsonb reorders object keys)
            ns = [n for n in wait.take() if n and n.carried and _can_answer(n, last_step)]
            if ns:
                values = (ns[-1].status, ns[-1].response, ns[-1].error, ns[-1].output)
            else:
                values = await _answer_fields(sessionmaker, run_id, last_step)
            decided, answer = _answer(run_id, *values, last_step, detail)
            if decided:
                return answer
        remaining = deadline - loop.time()
        if remaining <= 0:
            return None
        try:
            await asyncio.wait_for(wait.event.wait(), min(remaining, POLL_SECONDS))
        except TimeoutError:
            read = True  # a lost notice costs this poll, never the answer
            continue
        notices = wait.take()
        read = None in notices or (wait.left and not wait.remote)
        answering = [n for n in notices if n is not None and _can_answer(n, last_step)]
        if answering:
            notice = answering[-1]
            if not notice.carried:
                read = True
                continue
            decided, answer = _answer(
                run_id,
                notice.status,
                notice.response,
                notice.error,
                notice.output,
                last_step,
                detail,
            )
            if decided:
                return answer


async def run_updates(
    sessionmaker: async_sessionmaker[AsyncSession], redis: Redis, run_id: uuid.UUID, base_url: str
) -> AsyncGenerator[bytes, None]:
    """The run's detail as JSON (:func:`backend.services.runs.runs.get_run_detail`, its links on
    ``base_url``), once now and
    again after every change, until the run ends (or is deleted). A Redis error while
    waiting for a notice only turns the wait into a one-second poll."""
    pubsub = redis.pubsub()
    await pubsub.subscribe(run_channel(str(run_id)))
    last = b""
    try:
        while True:
            async with sessionmaker() as session:
                found = await runs.get_run_detail(session, run_id, base_url)
            if found is None:
                return
            payload = msgspec.json.encode(found[0])
            if payload != last:
                last = payload
                yield payload
            if RunStatus(found[0].status).terminal:
                return
            try:
                await pubsub.get_message(ignore_subscribe_messages=True, timeout=POLL_SECONDS)
            except Exception:
                await asyncio.sleep(POLL_SECONDS)
    finally:
        await pubsub.unsubscribe()
        await pubsub.aclose()
