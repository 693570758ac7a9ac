"""What the embedded PostgreSQL and Redis servers share: their state, ports, logs, and the
``with`` protocol (see :mod:`backend.embedded`)."""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Self

from backend.embedded.processes import EmbeddedServerError, register_started


class EmbeddedServer:
    """Base of :class:`~backend.embedded.EmbeddedPostgres` and
    :class:`~backend.embedded.EmbeddedRedis`: a server process on 127.0.0.1 whose files live
    in ``data_dir``, started on ``port`` (None: the remembered port when free, else a free
    one). Subclasses implement :meth:`start` and :meth:`stop` and name their log file.
    """

    kind: ClassVar[str] = "server"
    """Name used in messages ("PostgreSQL", "Redis")."""

    log_file: ClassVar[str] = "server.log"
    """Log file name inside ``data_dir``."""

    def __init__(self, data_dir: Path | str, port: int | None) -> None:
        self.data_dir = Path(data_dir).expanduser().absolute()
        self._requested_port = port
        self._port: int | None = None
        self._running = False
        self.owned = False
        """True when this object started the server (False when a live one was reused)."""
        self._owner_pid = os.getpid()

    @property
    def port(self) -> int:
        """TCP port the server listens on (raises EmbeddedServerError before start())."""
        if self._port is None:
            raise EmbeddedServerError(f"{type(self).__name__} is not started")
        return self._port

    @property
    def log_path(self) -> Path:
        """Server log file (``<data_dir>/<log_file>``)."""
        return self.data_dir / self.log_file

    @property
    def running(self) -> bool:
        """True between a successful start() and stop()."""
        return self._running

    def start(self) -> None:
        """Start (or reuse) the server; idempotent. Raises EmbeddedServerError."""
        raise NotImplementedError

    def stop(self, *, force: bool = False) -> None:
        """Stop a server this object started (a reused one only when ``force``)."""
        raise NotImplementedError

    def take_over(self) -> bool:
        """Take ownership of a server already running on ``data_dir`` without starting one
        (e.g. left running by a ``railyard dev`` that was killed): True when one runs; it is
        then :attr:`running` and :attr:`owned`, so :meth:`stop` and the exit hook stop it.
        False when none runs, or when what the data directory points at is not this data
        directory's server (that one is never touched). Idempotent."""
        raise NotImplementedError

    def _own(self) -> None:
        """Mark the running server as started by this object (stopped by stop() and at exit)."""
        self._running = True
        self.owned = True
        self._owner_pid = os.getpid()
        register_started(self)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({str(self.data_dir)!r}, port={self._port}, "
            f"running={self._running})"
        )
