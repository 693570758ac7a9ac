"""The host side of the Code step's sandbox: a pool of sandbox processes per event loop.

Why processes, not a thread with the engine's own timeout: a thread would share the
worker's address space, so memory V8 takes outside its heap (``ArrayBuffer`` contents,
which mini-racer's heap limit does not count) would be the worker's, and V8 ends the
whole *process* when an isolate runs out of memory in a way it cannot recover from. In a
process of its own, user code gets a memory budget of its own (``RLIMIT_DATA``), a lower
CPU priority than the API and the worker's event loop (nice 10), and when anything goes
wrong, it can be killed, which no thread can be. The cost is a pipe round trip per step
(measured in bench/code_step.py). The worker's event loop only writes and reads pipes;
processes are started from a worker thread (:mod:`.spawn`), at nice
:data:`~.protocol.NICENESS` above the host's from their start.

:meth:`SandboxPool.run` takes an idle process (or starts one, at most ``size`` at once;
a step beyond that waits for one), writes the job, and reads the reply within the job's
wall-clock limit plus :data:`GRACE` seconds; a process that does not answer by then is
killed (the step fails with ``wall_limit``). A process that reached a limit, died, or ran
:data:`RECYCLE_AFTER` jobs is replaced; a step cancelled while its code runs (its run was
cancelled, or its step timeout passed) kills its process, so the code stops at once.
Processes end by themselves when the host closes their input or dies.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import sys
import weakref

import msgspec

from . import spawn
from .protocol import NICENESS, READY, Job, Reply, decode_reply, encode, header_length
from .spawn import Spawned

__all__ = ["GRACE", "RECYCLE_AFTER", "SandboxFailed", "SandboxPool", "pool_for"]

MODULE = "connectors.builtin.code.sandbox_process"
GRACE = 2.0
"""Seconds past a job's wall-clock limit before its silent process is killed."""
START_TIMEOUT = 30.0
"""Seconds a new process may take to load its engine."""
RECYCLE_AFTER = 500
"""Jobs a process runs before it is replaced (bounds what V8 and Python accumulate)."""
REPLY_SLACK = 1 << 20
"""Bytes a reply may take beyond its output and log limits (names, stack, framing)."""


class SandboxFailed(Exception):
    """A sandbox process could not start, died, or broke the protocol (not the user's
    code reaching a limit: those are replies). ``stderr`` is the end of what it wrote."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


class _Process:
    """One sandbox process and the task draining its standard error."""

    def __init__(self, proc: Spawned) -> None:
        self.proc = proc
        self.jobs = 0
        self.stderr: collections.deque[bytes] = collections.deque(maxlen=40)
        self._drain = asyncio.ensure_future(self._read_stderr())

    @classmethod
    async def start(cls, memory_bytes: int) -> _Process:
        # off the event loop's thread: a fork waits for the child's exec (see .spawn)
        argv = [sys.executable, "-I", "-m", MODULE, str(memory_bytes)]
        proc = await spawn.start(argv, niceness=NICENESS)
        process = cls(proc)
        try:
            greeting = await asyncio.wait_for(process._read_frame(len(READY)), START_TIMEOUT)
        except (TimeoutError, asyncio.IncompleteReadError, SandboxFailed):
            greeting = b""
        if greeting != READY:
            process.kill()
            await process.wait()
            raise SandboxFailed("the JavaScript sandbox process did not start", process.tail())
        return process

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.stderr.append(line)

    async def _read_frame(self, limit: int) -> bytes:
        assert self.proc.stdout is not None
        length = header_length(await self.proc.stdout.readexactly(4))
        if length > limit:
            raise SandboxFailed(f"the sandbox answered {length} bytes, over {limit}")
        return await self.proc.stdout.readexactly(length)

    def tail(self) -> str:
        """The end of what the process wrote to standard error."""
        return b"".join(self.stderr).decode("utf-8", "replace")[-4000:]

    async def call(self, job: Job) -> Reply:
        """Send ``job`` and read its reply (see the module doc). Raises
        :class:`SandboxFailed` when the process dies or answers nonsense."""
        assert self.proc.stdin is not None
        self.jobs += 1
        limits = job.limits
        reply_limit = 6 * (limits.output_chars + limits.log_chars) + REPLY_SLACK
        try:
            self.proc.stdin.write(encode(job))
            await self.proc.stdin.drain()
            body = await asyncio.wait_for(
                self._read_frame(reply_limit), limits.wall_ms / 1000 + GRACE
            )
        except TimeoutError:
            self.kill()
            return Reply(
                "wall_limit",
                message=f"the code did not finish within {limits.wall_ms} ms of wall-clock time",
            )
        except (asyncio.IncompleteReadError, ConnectionError, BrokenPipeError):
            self.kill()
            await self.wait()
            tail = self.tail()
            if "out of memory" in tail.lower():
                return Reply("memory_limit", message="memory limit reached")
            raise SandboxFailed(
                f"the JavaScript sandbox process ended (exit status {self.proc.returncode})",
                tail,
            ) from None
        try:
            return decode_reply(body)
        except msgspec.DecodeError as err:
            self.kill()
            raise SandboxFailed(f"the sandbox answered an unreadable reply: {err}") from None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    async def wait(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self.proc.wait()), 5)
            await asyncio.wait_for(asyncio.shield(self._drain), 1)

    def close(self) -> None:
        """Close the process's input: it ends once its current job is answered."""
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()


_REUSABLE = frozenset({"ok", "error", "syntax_error", "output_too_large"})
"""Replies after which a process is reused (nothing was stopped or refused mid-way)."""


class SandboxPool:
    """Up to ``size`` sandbox processes of one memory budget, on one event loop."""

    def __init__(self, size: int, memory_bytes: int) -> None:
        self.size = size
        self.memory_bytes = memory_bytes
        self._slots = asyncio.Semaphore(size)
        self._idle: list[_Process] = []

    async def run(self, job: Job) -> Reply:
        """Run ``job`` in an idle process (see the module doc). Raises
        :class:`SandboxFailed` when a process fails, never for the user's code."""
        async with self._slots:
            process = self._idle.pop() if self._idle else await _Process.start(self.memory_bytes)
            keep = False
            try:
                reply = await process.call(job)
                keep = reply.status in _REUSABLE and process.jobs < RECYCLE_AFTER
                return reply
            finally:
                if keep:
                    self._idle.append(process)
                else:
                    process.kill()
                    process.close()

    @property
    def idle(self) -> int:
        """Processes waiting for a job."""
        return len(self._idle)

    async def close(self) -> None:
        """End the idle processes (a running job's process ends when its job does)."""
        idle, self._idle = self._idle, []
        for process in idle:
            process.close()
        for process in idle:
            await process.wait()


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[int, int], SandboxPool]]
_pools = weakref.WeakKeyDictionary()


def pool_for(size: int, memory_bytes: int) -> SandboxPool:
    """The running loop's pool of ``size`` processes with ``memory_bytes`` each (one per
    loop and settings: pipes belong to the loop that opened them)."""
    pools = _pools.setdefault(asyncio.get_running_loop(), {})
    key = (size, memory_bytes)
    if key not in pools:
        pools[key] = SandboxPool(size, memory_bytes)
    return pools[key]
