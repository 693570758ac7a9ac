"""The synchronous client: :class:`Client` runs :class:`~railyard_client.AsyncClient`'s
methods on an event loop of its own.

Why a wrapper rather than a second implementation: every operation is written once (in
:mod:`railyard_client.aio`), so both clients send the same requests and raise the same
errors. Each :class:`Client` owns one event loop in a daemon thread; a call hands the
coroutine to that loop and blocks until it is done, so a :class:`Client` works from any
code, also code that runs an event loop of its own (Playwright's sync API, Jupyter),
where ``asyncio.run`` would refuse. Iterators pull one item per call the same way.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from types import TracebackType
from typing import Concatenate, ParamSpec, TypeVar

import httpx

from railyard_client.aio import AsyncClient

P = ParamSpec("P")
T = TypeVar("T")


F = TypeVar("F", bound=Callable[..., object])


def _named(function: F, like: Callable[..., object]) -> F:
    """``function`` under the name and docstring of ``like`` (for help() and the docs)."""
    function.__name__ = like.__name__
    function.__qualname__ = f"Client.{like.__name__}"
    function.__doc__ = like.__doc__
    return function


def _blocking(
    method: Callable[Concatenate[AsyncClient, P], Awaitable[T]],
) -> Callable[Concatenate[Client, P], T]:
    """``method`` of :class:`AsyncClient` as a blocking method of :class:`Client`."""

    def blocking(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(method(self.aio, *args, **kwargs))

    return _named(blocking, method)


def _iterating(
    method: Callable[Concatenate[AsyncClient, P], AsyncIterator[T]],
) -> Callable[Concatenate[Client, P], Iterator[T]]:
    """An async-iterator ``method`` of :class:`AsyncClient` as an iterator of
    :class:`Client`: each ``next()`` awaits the next item on the client's loop."""

    def iterating(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        items = method(self.aio, *args, **kwargs)

        async def step() -> tuple[bool, T | None]:
            try:
                return True, await anext(items)
            except StopAsyncIteration:
                return False, None

        async def close() -> None:
            aclose = getattr(items, "aclose", None)
            if aclose is not None:
                await aclose()

        try:
            while True:
                more, item = self._run(step())
                if not more:
                    return
                yield item  # type: ignore[misc]
        finally:
            self._run(close())

    return _named(iterating, method)


class Client:
    """Railyard's API (``/api/v1``) at ``base_url``, blocking: the methods of
    :class:`~railyard_client.AsyncClient` with the same arguments and answers (see there),
    without ``await``. Use it as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="railyard-client", daemon=True
        )
        self._thread.start()
        self.aio = AsyncClient(
            base_url, token=token, timeout=timeout, transport=transport, headers=headers
        )

    def _run(self, work: Awaitable[T]) -> T:
        """Await ``work`` on the client's loop; its result (or its exception)."""

        async def wrapped() -> T:
            return await work

        return asyncio.run_coroutine_threadsafe(wrapped(), self._loop).result()

    def close(self) -> None:
        """Close the connections and stop the client's loop."""
        if self._loop.is_closed():
            return
        self._run(self.aio.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    request = _blocking(AsyncClient.request)
    get = _blocking(AsyncClient.get)
    post = _blocking(AsyncClient.post)
    put = _blocking(AsyncClient.put)
    patch = _blocking(AsyncClient.patch)
    delete = _blocking(AsyncClient.delete)
    page = _blocking(AsyncClient.page)
    paginate = _iterating(AsyncClient.paginate)

    login = _blocking(AsyncClient.login)
    create_token = _blocking(AsyncClient.create_token)

    iter_workflows = _iterating(AsyncClient.iter_workflows)
    get_workflow = _blocking(AsyncClient.get_workflow)
    create_workflow = _blocking(AsyncClient.create_workflow)
    update_workflow = _blocking(AsyncClient.update_workflow)
    archive_workflow = _blocking(AsyncClient.archive_workflow)
    save_draft = _blocking(AsyncClient.save_draft)
    publish = _blocking(AsyncClient.publish)
    iter_versions = _iterating(AsyncClient.iter_versions)
    get_version = _blocking(AsyncClient.get_version)
    export_workflow = _blocking(AsyncClient.export_workflow)
    import_workflow = _blocking(AsyncClient.import_workflow)
    import_into_draft = _blocking(AsyncClient.import_into_draft)

    search = _blocking(AsyncClient.search)
    iter_search = _iterating(AsyncClient.iter_search)

    start_run = _blocking(AsyncClient.start_run)
    get_run = _blocking(AsyncClient.get_run)
    iter_runs = _iterating(AsyncClient.iter_runs)
    cancel_run = _blocking(AsyncClient.cancel_run)
    run_events = _iterating(AsyncClient.run_events)
    wait_for_run = _blocking(AsyncClient.wait_for_run)

    iter_credentials = _iterating(AsyncClient.iter_credentials)
    get_credential = _blocking(AsyncClient.get_credential)
    create_credential = _blocking(AsyncClient.create_credential)
    delete_credential = _blocking(AsyncClient.delete_credential)

    iter_subscriptions = _iterating(AsyncClient.iter_subscriptions)
    create_subscription = _blocking(AsyncClient.create_subscription)
    get_subscription = _blocking(AsyncClient.get_subscription)
    update_subscription = _blocking(AsyncClient.update_subscription)
    delete_subscription = _blocking(AsyncClient.delete_subscription)
    iter_deliveries = _iterating(AsyncClient.iter_deliveries)
    resend_delivery = _blocking(AsyncClient.resend_delivery)
