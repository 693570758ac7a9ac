"""Starting a sandbox process without blocking the event loop.

``asyncio.create_subprocess_exec`` runs ``subprocess.Popen`` on the event loop's thread:
the fork (a ``vfork``, which suspends the caller until the child has called ``exec``),
the wait for the ``exec`` to succeed, and the start of the child-watcher thread all
happen there. On a loaded machine the child may wait tens of milliseconds for a core
before it reaches ``exec``, and the loop waits with it: measured on the shared 2-core
test machine (load average 25), 21 ms per start at the median and 53 ms at worst, the
loop lagging up to 88 ms (bench/code_step.py, docs/code-step.md "Speed"). An API whose
eager runs hit the CPU limit restarts a sandbox process per step, so these waits were
its ``/health/live`` p99.

:func:`start` does the ``Popen`` and starts the thread that reaps the child in a worker
thread, then attaches the pipes to the loop (non-blocking); :class:`Spawned` offers what
the pool uses of ``asyncio.subprocess.Process``: ``stdin`` (a ``StreamWriter``),
``stdout`` / ``stderr`` (``StreamReader``), ``kill()``, ``wait()`` and ``returncode``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import threading
from collections.abc import Sequence

__all__ = ["Spawned", "start"]

STREAM_LIMIT = 1 << 16
"""Line limit of the standard error reader (as asyncio's default)."""


class Spawned:
    """A child process started by :func:`start`, its pipes attached to the loop."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
        exited: asyncio.Future[int],
    ) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self._exited = exited

    @property
    def returncode(self) -> int | None:
        """The exit status once the process ended (``-N``: killed by signal ``N``)."""
        return self._exited.result() if self._exited.done() else None

    def kill(self) -> None:
        """SIGKILL the process (raises ``ProcessLookupError`` once it is reaped)."""
        if self._exited.done():
            raise ProcessLookupError(self.pid)
        self.popen.kill()

    async def wait(self) -> int:
        """Its exit status, once it ended."""
        return await asyncio.shield(self._exited)


def _popen(
    argv: Sequence[str],
    cwd: str,
    niceness: int,
    loop: asyncio.AbstractEventLoop,
    exited: asyncio.Future[int],
) -> subprocess.Popen[bytes]:
    """In a worker thread: start the process at ``niceness`` above this one's, and a
    daemon thread that reaps it and resolves ``exited`` on ``loop``."""
    popen = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={},
        cwd=cwd,
        start_new_session=True,
    )
    if niceness:
        # right after its exec, before the interpreter has loaded anything
        with contextlib.suppress(OSError):  # it has already ended
            own = os.getpriority(os.PRIO_PROCESS, 0)
            os.setpriority(os.PRIO_PROCESS, popen.pid, min(19, own + niceness))

    def reap() -> None:
        code = popen.wait()
        with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
            loop.call_soon_threadsafe(_resolve, exited, code)

    threading.Thread(target=reap, name=f"sandbox-reaper-{popen.pid}", daemon=True).start()
    return popen


def _resolve(future: asyncio.Future[int], code: int) -> None:
    if not future.done():
        future.set_result(code)


async def start(argv: Sequence[str], cwd: str = "/", niceness: int = 0) -> Spawned:
    """Start ``argv`` with an empty environment in ``cwd``, in a new session, at
    ``niceness`` above this process's nice value (at most 19), its three standard streams
    piped; the event loop never waits for the fork or the ``exec``.

    Raises ``OSError`` when the program cannot be started."""
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[int] = loop.create_future()
    popen = await asyncio.to_thread(_popen, argv, cwd, niceness, loop, exited)
    assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
    try:
        stdout = asyncio.StreamReader(limit=STREAM_LIMIT, loop=loop)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdout), popen.stdout)
        stderr = asyncio.StreamReader(limit=STREAM_LIMIT, loop=loop)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stderr), popen.stderr)
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop)), popen.stdin
        )
        stdin = asyncio.StreamWriter(transport, protocol, None, loop)
    except BaseException:
        popen.kill()
        raise
    return Spawned(popen, stdin, stdout, stderr, exited)
