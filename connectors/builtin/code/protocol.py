"""What the Code step's host and its sandbox processes say to each other over pipes.

One frame is a 4-byte big-endian length followed by that many bytes of MessagePack
(``msgspec.msgpack``). The host writes a :class:`Job` to the process's standard input and
reads one :class:`Reply` from a pipe the process writes to (its standard output is sent to
standard error, so nothing V8 or Python prints can corrupt a frame). A process greets its
host with :data:`READY` once its engine is loaded and its limits are in force.
"""

from __future__ import annotations

import struct
from typing import BinaryIO, Literal

import msgspec

__all__ = [
    "READY",
    "Job",
    "Limits",
    "Reply",
    "Status",
    "decode_reply",
    "encode",
    "read_frame",
    "write_frame",
]

READY = b"ready"
"""The first frame a sandbox process writes: its engine is loaded, its limits set."""

_HEADER = struct.Struct(">I")

Status = Literal[
    "ok",  # the code returned; output_json holds its result
    "error",  # the code threw (name, message, line, column, stack)
    "syntax_error",  # the code does not parse (message, line, column)
    "cpu_limit",  # stopped after using its CPU time
    "wall_limit",  # stopped after its wall-clock time (it waited without computing)
    "memory_limit",  # its V8 heap reached the limit
    "output_too_large",  # its result, as JSON, is over the output limit
]

NICENESS = 10
"""Added to the host's nice value for its sandbox processes: user code, and the start of
the process that runs it, yield the CPU to Railyard's own processes."""


class Limits(msgspec.Struct, frozen=True, array_like=True):
    """The hard limits of one run of user code.

    Attributes:
        cpu_ms: CPU time, in milliseconds, the code may use (parse, run and result).
        wall_ms: wall-clock time, in milliseconds, after which it is stopped even when it
            used less CPU (nothing in the sandbox can wait, so this is a backstop).
        heap_bytes: V8 heap limit, in bytes.
        output_chars: longest result, in characters of its JSON text.
        log_lines: ``console`` calls kept; later ones are counted as dropped.
        log_chars: characters of ``console`` text kept in all.
    """

    cpu_ms: int
    wall_ms: int
    heap_bytes: int
    output_chars: int
    log_lines: int
    log_chars: int


class Job(msgspec.Struct, frozen=True, array_like=True):
    """One run of user code: the source, its two arguments as JSON text, the limits."""

    code: str
    input_json: str
    data_json: str
    limits: Limits


class Reply(msgspec.Struct, frozen=True, array_like=True):
    """What became of a :class:`Job`.

    Attributes:
        status: see :data:`Status`.
        output_json: the result as JSON text (``status == "ok"``), else empty.
        logs: ``[level, message]`` per kept ``console`` call, in call order.
        dropped_logs: ``console`` calls over the log limits.
        error_name: the thrown value's ``name`` (``TypeError``), or ``""``.
        message: what went wrong, for every status but ``ok``.
        line: 1-based line in the user's code, when known.
        column: 1-based column in the user's code, when known.
        stack: the frames in the user's code, one per line (``at f (code.js:3:9)``).
        cpu_ms: CPU time used, in milliseconds.
    """

    status: Status
    output_json: bytes = b""
    logs: list[tuple[str, str]] = []
    dropped_logs: int = 0
    error_name: str = ""
    message: str = ""
    line: int | None = None
    column: int | None = None
    stack: str = ""
    cpu_ms: float = 0.0


_reply_decoder = msgspec.msgpack.Decoder(Reply)
_job_decoder = msgspec.msgpack.Decoder(Job)
_encoder = msgspec.msgpack.Encoder()


def encode(message: Job | Reply) -> bytes:
    """A whole frame (length header and body) holding ``message``."""
    body = _encoder.encode(message)
    return _HEADER.pack(len(body)) + body


def decode_reply(body: bytes) -> Reply:
    """Raises ``msgspec.DecodeError`` when ``body`` is not a :class:`Reply`."""
    return _reply_decoder.decode(body)


def header_length(header: bytes) -> int:
    """The body length a 4-byte frame header announces."""
    (length,) = _HEADER.unpack(header)
    return int(length)


def read_frame(stream: BinaryIO) -> Job | None:
    """The next :class:`Job` on ``stream`` (blocking), ``None`` at end of input."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    body = stream.read(header_length(header))
    return _job_decoder.decode(body)


def write_frame(stream: BinaryIO, body: bytes) -> None:
    """Write ``body`` as one frame and flush."""
    stream.write(_HEADER.pack(len(body)) + body)
    stream.flush()
