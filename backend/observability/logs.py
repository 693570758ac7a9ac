"""Process logging: structured JSON lines (structlog) or plain lines for ``railyard dev``.

Every record of every library (stdlib ``logging``, uvicorn's access log included) goes
through one root handler whose structlog ``ProcessorFormatter`` adds the ids bound in the
current context: ``request_id`` (an API request, the ``X-Request-ID``), ``run_id`` and
``step_id`` (a worker job). JSON lines carry ``timestamp`` (ISO 8601 UTC), ``level``,
``logger``, ``event`` (the message), those ids, and ``exception`` with the traceback when
there is one. The format is ``RAILYARD_LOG_FORMAT`` (``json`` or ``plain``): ``json`` for
``railyard api``/``worker``/``scheduler``, ``plain`` for ``railyard dev`` by default.
A plain record is one line, followed by the traceback in Python's own format (no local
variables) when it carries an exception.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

from connectors.sdk.redaction import SecretsLogFilter

FORMATS = ("json", "plain")


def configure(
    level: str | int = "INFO", *, fmt: str = "json", stream: TextIO | None = None
) -> None:
    """Install the root handler (replacing earlier ones) with format ``fmt`` at ``level``.

    Raises ``ValueError`` for a format other than :data:`FORMATS`.
    """
    if fmt not in FORMATS:
        raise ValueError(f"RAILYARD_LOG_FORMAT must be one of {', '.join(FORMATS)}, not {fmt!r}")
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
        shared.append(structlog.processors.format_exc_info)
    else:
        # plain_traceback: Python's own format, without local variables (rich's default
        # prints every frame's locals: hundreds of KB for one error holding a large body)
        renderer = structlog.dev.ConsoleRenderer(
            colors=False, pad_event_to=0, exception_formatter=structlog.dev.plain_traceback
        )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter)
    # a record written while a connector attempt runs loses that attempt's credential
    # secrets (connectors/sdk/redaction.py), whichever library wrote it
    handler.addFilter(SecretsLogFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def bind(**ids: Any) -> None:
    """Bind ids (``request_id``, ``run_id``, ``step_id``) to the current context's lines."""
    structlog.contextvars.bind_contextvars(**ids)


def clear() -> None:
    """Forget the ids bound in the current context."""
    structlog.contextvars.clear_contextvars()
