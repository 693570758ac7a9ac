"""The Code step: ``code.javascript`` runs the user's JavaScript over the step's input.

The code is the body of ``function (input, data)``: ``input`` is the step input,
``data`` the value of the Data field (an expression field, ``null`` by default); what it
returns, as JSON, is the output's ``result`` (``undefined`` gives ``null``). Integers
beyond 2**53 - 1 arrive as ``BigInt`` and a returned ``BigInt`` is an exact integer
(:mod:`connectors.builtin.code.scripts`, docs/code-step.md "Big integers"). It is
synchronous ECMAScript: no ``await``, no timers, no ``fetch``, ``require``, ``process``,
file system or network, nothing of the host. ``console.log`` (and ``info``, ``warn``,
``error``, ``debug``) calls are recorded into the output's ``logs`` (and an error's
details), and written to the worker's log for the step.

Output: ``{"result": <the returned value>, "logs": [{"level", "message"}], "dropped_logs":
n}``. Errors, never retried (the same code on the same input does the same):

=========================  ================================================================
kind                       when
=========================  ================================================================
``code_syntax_error``      the code does not parse (details: line, column)
``code_error``             the code threw (details: name, line, column, stack, logs)
``code_cpu_limit``         it used its CPU time (``code.cpu_limit_ms``)
``code_wall_limit``        it ran past its wall-clock time (``code.wall_limit_ms``)
``code_memory_limit``      its memory passed ``code.memory_limit_mb``
``code_output_too_large``  its result is over ``code.max_output_chars`` characters of JSON
``code_sandbox_failed``    the sandbox process failed on its own (retryable)
=========================  ================================================================

Limits are deployment settings an admin sets (``RAILYARD_CODE_CPU_LIMIT_MS`` etc., see
:data:`SETTINGS`); how they are held is in :mod:`connectors.builtin.code.pool` and
:mod:`connectors.builtin.code.sandbox_process`.
"""

from __future__ import annotations

import logging
import os
from typing import Annotated, Any, Literal, TypedDict

import msgspec

from connectors import sdk

from .pool import SandboxFailed, pool_for
from .protocol import Job, Limits, Reply

__all__ = ["SETTINGS", "connector", "javascript", "limits_from_settings"]

SETTINGS: dict[str, tuple[int, str]] = {
    "code.cpu_limit_ms": (5000, "CPU time one step's code may use, in milliseconds"),
    "code.wall_limit_ms": (
        0,
        "wall-clock time per step, in milliseconds (0: 10 x the CPU limit, at least that + 30 s)",
    ),
    "code.memory_limit_mb": (128, "V8 heap per step, and memory outside it, in MiB"),
    "code.max_output_chars": (10 * 1024 * 1024, "longest result, in characters of JSON"),
    "code.log_lines": (1000, "console calls kept per step"),
    "code.log_chars": (64 * 1024, "characters of console text kept per step"),
    "code.processes": (0, "sandbox processes per worker (0: one per CPU core)"),
}
"""Setting name -> (default, meaning); each is read with ``sdk.setting``."""

MAX_CODE_CHARS = 100_000
"""Longest source a Code step accepts."""


def _int_setting(name: str) -> int:
    default = SETTINGS[name][0]
    raw = sdk.setting(name, default)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise sdk.ConfigError(f"setting {name} must be a whole number, got {raw!r}") from None
    if value < 0:
        raise sdk.ConfigError(f"setting {name} must not be negative, got {value}")
    return value


def limits_from_settings() -> tuple[Limits, int, int]:
    """``(limits, processes, memory bytes)`` from the deployment settings (:data:`SETTINGS`).

    Raises :class:`~connectors.sdk.ConfigError` naming a setting that is not a whole
    number, or a limit of 0 where one is required."""
    values = {name: _int_setting(name) for name in SETTINGS}
    for name in ("code.cpu_limit_ms", "code.memory_limit_mb", "code.max_output_chars"):
        if values[name] == 0:
            raise sdk.ConfigError(f"setting {name} must be at least 1")
    cpu = values["code.cpu_limit_ms"]
    memory = values["code.memory_limit_mb"] * 1024 * 1024
    limits = Limits(
        cpu_ms=cpu,
        wall_ms=values["code.wall_limit_ms"] or max(10 * cpu, cpu + 30_000),
        heap_bytes=memory,
        output_chars=values["code.max_output_chars"],
        log_lines=values["code.log_lines"],
        log_chars=values["code.log_chars"],
    )
    return limits, values["code.processes"] or os.cpu_count() or 1, memory


class JavaScriptConfig(msgspec.Struct, kw_only=True):
    """Run JavaScript over the step input."""

    code: Annotated[
        str,
        msgspec.Meta(
            title="JavaScript",
            description="The body of function (input, data); return the result",
            max_length=MAX_CODE_CHARS,
            extra_json_schema={"x-code": "javascript", "x-multiline": True},
        ),
    ]
    data: Annotated[Any, msgspec.Meta(title="Data", description="Available as data")] = None


class LogLine(TypedDict):
    """One ``console`` call: its `level` and its arguments as text (`message`)."""

    level: Literal["log", "info", "warn", "error", "debug"]
    message: str


class JavaScriptOutput(TypedDict):
    """What the code returned (`result`, any JSON), its `logs` (one per console call, in
    call order) and how many console calls were over the log limits (`dropped_logs`)."""

    result: Any
    logs: list[LogLine]
    dropped_logs: int


_LEVELS = {
    "log": logging.INFO,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "debug": logging.DEBUG,
}

_KINDS = {
    "error": "code_error",
    "syntax_error": "code_syntax_error",
    "cpu_limit": "code_cpu_limit",
    "wall_limit": "code_wall_limit",
    "memory_limit": "code_memory_limit",
    "output_too_large": "code_output_too_large",
}


def _logs(reply: Reply) -> list[LogLine]:
    logger = sdk.logger()
    lines: list[LogLine] = []
    for level, message in reply.logs:
        logger.log(_LEVELS.get(level, logging.INFO), "console.%s: %s", level, message)
        lines.append({"level": level, "message": message})  # type: ignore[typeddict-item]
    return lines


def _failure(reply: Reply, limits: Limits, lines: list[LogLine]) -> sdk.NonRetryableError:
    """The step error of a reply that is not ``ok``."""
    where = ""
    if reply.line is not None:
        where = f" (line {reply.line}" + (f", column {reply.column})" if reply.column else ")")
    if reply.status == "cpu_limit":
        message = f"the code used its {limits.cpu_ms} ms of CPU time and was stopped"
    elif reply.status == "memory_limit":
        message = f"the code passed its memory limit of {limits.heap_bytes // 2**20} MiB"
    elif reply.status in ("error", "syntax_error"):
        name = f"{reply.error_name}: " if reply.error_name else ""
        message = f"{name}{reply.message}{where}"
    else:
        message = reply.message
    details: dict[str, Any] = {"logs": lines, "dropped_logs": reply.dropped_logs}
    details["cpu_ms"] = round(reply.cpu_ms, 1)
    for key in ("line", "column"):
        if getattr(reply, key) is not None:
            details[key] = getattr(reply, key)
    if reply.error_name:
        details["name"] = reply.error_name
    if reply.stack:
        details["stack"] = reply.stack
    return sdk.NonRetryableError(message, kind=_KINDS[reply.status], details=details)


@sdk.action(
    "code.javascript",
    label="Code (JavaScript)",
    config=JavaScriptConfig,
    category="Data",
    icon="code",
    expression_fields=("data",),
)
async def javascript(config: JavaScriptConfig, input: Any) -> JavaScriptOutput:
    """Run JavaScript in a sandbox (V8) over the input; returns what it returns."""
    limits, processes, memory = limits_from_settings()
    job = Job(
        code=config.code,
        input_json=msgspec.json.encode(input).decode(),
        data_json=msgspec.json.encode(config.data).decode(),
        limits=limits,
    )
    try:
        reply = await pool_for(processes, memory).run(job)
    except SandboxFailed as err:
        sdk.logger().error("%s: %s", err, err.stderr)
        raise sdk.ActionError(str(err), kind="code_sandbox_failed") from None
    lines = _logs(reply)
    if reply.status != "ok":
        raise _failure(reply, limits, lines)
    if len(reply.output_json) > limits.output_chars:
        reply = Reply(
            "output_too_large",
            message=f"the result is {len(reply.output_json)} bytes of JSON, "
            f"over the limit of {limits.output_chars}",
        )
        raise _failure(reply, limits, lines)
    result = msgspec.json.decode(reply.output_json)
    return {"result": result, "logs": lines, "dropped_logs": reply.dropped_logs}


connector = sdk.Connector(
    name="code",
    label="Code",
    version="1.0.0",
    description="Run JavaScript in a sandbox over the step input",
    actions=[javascript],
    icon="code",
)
