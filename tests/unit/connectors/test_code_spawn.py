"""Sandbox processes start off the event loop's thread (connectors/builtin/code/spawn.py):
the fork and the wait for the child's ``exec`` never hold the loop; the pipes, kill and
exit status work as ``asyncio.subprocess.Process``'s do."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from typing import Any

import pytest

from connectors.builtin.code import spawn

ECHO = (
    "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line.upper()); sys.stdout.flush()\n"
)


async def test_the_fork_happens_in_another_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[threading.Thread] = []
    real = subprocess.Popen

    def recording(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        threads.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(spawn.subprocess, "Popen", recording)
    proc = await spawn.start([sys.executable, "-c", "pass"])
    assert await proc.wait() == 0
    assert threads and threads[0] is not threading.current_thread()


async def test_pipes_exit_status_and_kill() -> None:
    proc = await spawn.start([sys.executable, "-c", ECHO])
    proc.stdin.write(b"hello\n")
    await proc.stdin.drain()
    assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"HELLO\n"
    assert proc.returncode is None
    proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), 30) == 0
    assert proc.returncode == 0
    with pytest.raises(ProcessLookupError):
        proc.kill()

    proc = await spawn.start(
        [
            sys.executable,
            "-c",
            "import sys, time; sys.stderr.write('x\\n'); sys.stderr.flush(); time.sleep(60)",
        ]
    )
    assert await asyncio.wait_for(proc.stderr.readline(), 30) == b"x\n"
    proc.kill()
    assert await asyncio.wait_for(proc.wait(), 30) == -signal.SIGKILL


async def test_a_program_that_cannot_start_raises() -> None:
    with pytest.raises(OSError):
        await spawn.start(["/nonexistent/program"])


async def test_the_process_starts_at_its_lower_priority() -> None:
    own = os.getpriority(os.PRIO_PROCESS, 0)
    proc = await spawn.start([sys.executable, "-c", "import time; time.sleep(60)"], niceness=7)
    try:
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == min(19, own + 7)
    finally:
        proc.kill()
        await proc.wait()
