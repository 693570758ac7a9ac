"""A sandbox process: runs Code step jobs, one at a time, each in a fresh V8 isolate.

Started by the host (:mod:`connectors.builtin.code.pool`) as
``python -I -m connectors.builtin.code.sandbox_process <memory bytes>`` with an empty
environment, in ``/``. It reads :class:`~connectors.builtin.code.protocol.Job` frames on
standard input and answers each with a :class:`~connectors.builtin.code.protocol.Reply`
(:mod:`connectors.builtin.code.protocol`); it ends at end of input (its host closed the
pipe or died).

What holds the limits, in this process:

- **CPU time**: a watchdog polls this process's CPU time (``time.process_time``, every
  :data:`WATCH_INTERVAL` seconds) while the code runs and cancels the V8 task past the
  job's ``cpu_ms`` (mini-racer turns the cancellation into ``TerminateExecution``). Only
  one job runs in a process, so its CPU time is the job's. Waiting for a core does not
  count, so a busy machine does not fail steps that would have fitted.
- **Memory**: the V8 heap has a hard limit per isolate (mini-racer stops the script when
  a garbage collection finds it over the limit), and memory outside the heap
  (``ArrayBuffer`` contents) counts against ``RLIMIT_DATA``, set once the engine is
  loaded to what the process has then plus twice its memory budget (the heap's and the
  same again outside it) plus :data:`HEADROOM`: an allocation past it is a
  ``RangeError`` in the script, never the machine's memory. (The limit cannot be set
  before V8 starts: V8 reserves its code range at start and fails under it.)
- **Isolation**: a fresh isolate per job (nothing of one run is visible to the next); no
  file or network API exists in V8 without an embedder, and the prelude removes what
  could wait (:mod:`connectors.builtin.code.scripts`); the process runs with
  ``RLIMIT_FSIZE`` 0, no core dumps, an empty environment, at nice
  :data:`~connectors.builtin.code.protocol.NICENESS` above its host's (set by the host
  as soon as the process exists, so even the interpreter's start and the engine's
  loading yield to the API and the worker's event loop).

The next isolate is made after the reply is sent, so a job does not wait for one.
"""

from __future__ import annotations

import asyncio
import os
import re
import resource
import sys
import time
from typing import BinaryIO

import msgspec
from py_mini_racer import JSEvalException, JSOOMException, MiniRacer

from . import scripts
from .protocol import READY, Job, Reply, Status, encode, read_frame, write_frame

HEADROOM = 64 * 1024 * 1024
"""Bytes of ``RLIMIT_DATA`` beyond the heap and off-heap budgets (V8's own bookkeeping,
the reply), so the heap limit, which ends a script cleanly, is met before it."""

WATCH_INTERVAL = 0.002
"""Seconds between two looks at the CPU time used."""


class _Envelope(msgspec.Struct):
    ok: bool
    logs: list[tuple[str, str]] = []
    dropped: int = 0
    output: msgspec.Raw = msgspec.Raw(b"null")
    kind: str = "error"
    name: str = ""
    message: str = ""
    stack: str = ""


_envelope = msgspec.json.Decoder(_Envelope)

_OFF_HEAP_FULL = ("Array buffer allocation failed", "could not allocate memory")
"""V8's messages when memory outside the heap cannot be had (``RLIMIT_DATA``)."""


def _data_size() -> int:
    """The process's data segment (``VmData``), in bytes."""
    with open("/proc/self/status", encoding="ascii") as status:
        match = re.search(r"^VmData:\s+(\d+) kB", status.read(), re.MULTILINE)
    return int(match[1]) * 1024 if match else 0


def _confine(memory_bytes: int) -> None:
    """Process limits, set once the engine is loaded (see the module doc)."""
    cap = _data_size() + 2 * memory_bytes + HEADROOM
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


async def _isolate() -> MiniRacer:
    # made, and always called, on the running loop: mini-racer's calls use it (a call
    # from outside a running loop would wait for that loop forever)
    racer = MiniRacer()
    racer.eval("0")
    return racer


async def _guarded(
    racer: MiniRacer, script: str, job: Job, started: float, wall_started: float
) -> tuple[str | None, object]:
    """Evaluate ``script`` under the job's CPU and wall-clock limits, counted from
    ``started`` (process CPU seconds) and ``wall_started`` (monotonic seconds). Returns
    ``(None, value)``, or ``(status, None)`` when a limit stopped it. Raises what the
    evaluation raises (``JSEvalException`` and subclasses)."""
    cpu_limit = job.limits.cpu_ms / 1000
    wall_limit = job.limits.wall_ms / 1000
    task = asyncio.ensure_future(racer.eval_cancelable(script))
    stopped: str | None = None
    while not task.done():
        await asyncio.wait({task}, timeout=WATCH_INTERVAL)
        if task.done():
            break
        if time.process_time() - started > cpu_limit:
            stopped = "cpu_limit"
        elif time.monotonic() - wall_started > wall_limit:
            stopped = "wall_limit"
        if stopped:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, JSEvalException):
                pass
            return stopped, None
    return None, task.result()


class _Logs(msgspec.Struct):
    logs: list[tuple[str, str]] = []
    dropped: int = 0


def _logs(racer: MiniRacer) -> _Logs:
    """The console lines recorded until a stop; none when the isolate cannot say."""
    try:
        return msgspec.json.decode(str(racer.eval("__railyard_logs()")), type=_Logs)
    except (JSEvalException, msgspec.DecodeError):
        return _Logs()


def _stopped(status: Status, message: str, racer: MiniRacer, cpu_ms: float) -> Reply:
    seen = _logs(racer)
    return Reply(status, message=message, logs=seen.logs, dropped_logs=seen.dropped, cpu_ms=cpu_ms)


async def run_job(racer: MiniRacer, job: Job) -> Reply:
    """Run ``job`` in the fresh isolate ``racer`` (see the module doc)."""
    limits = job.limits
    started, wall_started = time.process_time(), time.monotonic()

    def used() -> float:
        return (time.process_time() - started) * 1000

    racer.set_hard_memory_limit(limits.heap_bytes)
    racer.eval(scripts.prelude(limits))
    try:
        answer: object = None
        stopped, _ = await _guarded(
            racer, scripts.user_script(job.code), job, started, wall_started
        )
        if stopped is None:
            call = scripts.call_script(job.input_json, job.data_json)
            stopped, answer = await _guarded(racer, call, job, started, wall_started)
    except JSEvalException as err:
        if isinstance(err, JSOOMException) or racer.was_hard_memory_limit_reached():
            return _stopped("memory_limit", "memory limit reached", racer, used())
        line, column, summary = scripts.syntax_error_position(str(err))
        return Reply(
            "syntax_error",
            error_name="SyntaxError",
            message=summary,
            line=line,
            column=column,
            cpu_ms=used(),
        )
    if stopped == "cpu_limit":
        return _stopped("cpu_limit", "CPU time limit reached", racer, used())
    if stopped is not None:
        return _stopped("wall_limit", "wall-clock time limit reached", racer, used())
    return _reply(str(answer), used())


def _reply(answer: str, cpu_ms: float) -> Reply:
    """The :class:`Reply` of the JSON text :func:`~scripts.call_script` answered."""
    try:
        envelope = _envelope.decode(answer)
    except msgspec.DecodeError:
        return Reply(
            "error",
            error_name="Error",
            message="the result cannot be read (were JSON or Array built-ins replaced?)",
            cpu_ms=cpu_ms,
        )
    if envelope.ok:
        return Reply(
            "ok",
            output_json=bytes(envelope.output),
            logs=envelope.logs,
            dropped_logs=envelope.dropped,
            cpu_ms=cpu_ms,
        )
    line, column, frames = scripts.user_frames(envelope.stack)
    status: Status = "output_too_large" if envelope.kind == "output_too_large" else "error"
    if envelope.name == "RangeError" and any(m in envelope.message for m in _OFF_HEAP_FULL):
        status = "memory_limit"  # RLIMIT_DATA refused an ArrayBuffer's memory
    return Reply(
        status,
        logs=envelope.logs,
        dropped_logs=envelope.dropped,
        error_name=envelope.name,
        message=envelope.message,
        line=line,
        column=column,
        stack=frames,
        cpu_ms=cpu_ms,
    )


def serve(jobs: BinaryIO, replies: BinaryIO, memory_bytes: int) -> None:
    """Answer jobs from ``jobs`` on ``replies`` until end of input."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    racer = loop.run_until_complete(_isolate())
    _confine(memory_bytes)
    write_frame(replies, READY)
    while (job := read_frame(jobs)) is not None:
        reply = loop.run_until_complete(run_job(racer, job))
        replies.write(encode(reply))
        replies.flush()
        racer.close()
        racer = loop.run_until_complete(_isolate())


def main() -> None:
    """Entry point (see the module doc); ``argv[1]`` is the memory budget in bytes."""
    os.chdir("/")
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to stderr
    serve(sys.stdin.buffer, replies, int(sys.argv[1]))


if __name__ == "__main__":
    main()
