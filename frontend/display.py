"""Readable views of run data for the page templates (pure; no I/O).

Errors recorded on runs, steps and attempts are JSON objects shaped
``{"message": str, "kind": str, ...}`` (engine errors add ``field``, ``child_run_id``,
``attempts``...; action errors ``retryable``, ``retry_after`` and a ``details`` object such
as ``{"status": 503, "url": "..."}``, see ``connectors.sdk.errors``). :func:`error_view`
turns one into what the run page shows: the message prominently, the kind as a label, the
other facts as a definition list, and the whole object for a "raw JSON" disclosure.

:func:`install` makes the helpers template globals of a Jinja environment, together with
the run statuses (``run_statuses``, ``run_status(value)`` and ``run_statuses_json`` for
scripts), all from :data:`backend.engine.states.RUN_STATUSES`: templates and scripts never
list statuses of their own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import jinja2
import msgspec
from markupsafe import Markup, escape

from backend.engine.states import RUN_STATUSES, run_status_info
from frontend.large_values import large_values

#: Keys shown elsewhere (message, kind) or not worth a row of their own.
_HEADLINE_KEYS = ("message", "kind")
#: Friendlier names of keys errors commonly carry; others are humanised.
_KEY_LABELS = {
    "status": "Status code",
    "status_code": "Status code",
    "url": "URL",
    "method": "Method",
    "retryable": "Retryable",
    "retry_after": "Retry after (s)",
    "field": "Field",
    "child_run_id": "Child run",
    "attempts": "Attempts",
}


@dataclass(frozen=True)
class ErrorView:
    """One error as the run page shows it.

    ``message``: the human-readable text (``"error"`` when the object has none);
    ``kind``: the short machine class (``"http_503"``), ``""`` when absent;
    ``details``: ``(label, text)`` rows of every other key (entries of a nested
    ``details`` object are flattened in; non-scalar values shown as compact JSON);
    ``raw``: the object as recorded (for the raw JSON disclosure).
    """

    message: str
    kind: str = ""
    details: list[tuple[str, str]] = field(default_factory=list)
    raw: Any = None


def error_view(error: Any) -> ErrorView:
    """The :class:`ErrorView` of a recorded error.

    ``error`` is normally a dict; a bare string becomes the message; any other value
    (list, number) is shown as JSON text. ``None`` values and empty ``details`` are left out.
    """
    if isinstance(error, str):
        return ErrorView(message=error or "error", raw=error)
    if not isinstance(error, dict):
        return ErrorView(message=_text(error), raw=error)
    message = error.get("message")
    kind = error.get("kind")
    rows: list[tuple[str, str]] = []
    for key, value in error.items():
        if key in _HEADLINE_KEYS or value is None:
            continue
        if key == "details" and isinstance(value, dict):
            rows.extend((_label(k), _text(v)) for k, v in value.items() if v is not None)
        else:
            rows.append((_label(key), _text(value)))
    return ErrorView(
        message=_text(message) if message not in (None, "") else "error",
        kind=_text(kind) if kind not in (None, "") else "",
        details=rows,
        raw=error,
    )


def _label(key: Any) -> str:
    text = str(key)
    return _KEY_LABELS.get(text) or text.replace("_", " ").strip().capitalize() or text


def _text(value: Any) -> str:
    """Strings as they are, booleans as yes/no, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    try:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        return str(value)


#: What an event's ``meta`` key is, by trigger kind (``None``: any kind); others are humanised.
_META_LABELS: dict[tuple[str | None, str], str] = {
    (None, "delivery_id"): "Vendor delivery id",
    ("email", "message_id"): "Message-ID",
    (None, "message_id"): "Broker message id",
    (None, "item_id"): "Item id",
    (None, "entry_id"): "Feed entry id",
    (None, "contact_id"): "Contact id",
    (None, "sequence"): "Sequence number",
}

#: What the event id (the dedupe key) is, by trigger kind.
_EVENT_ID_LABELS = {
    "app_webhook": "Delivery",
    "polling": "Item",
    "broker": "Message",
    "email": "Email",
}


@dataclass
class TriggerEventView:
    """The event that started a run, as the run page shows it: the event id with what it
    is (``id_label``), then ``facts`` (label, value) from the event's ``meta`` (vendor
    delivery id, broker message id, email Message-ID, queue, ...). ``id_in_facts`` is True
    when a fact already shows the id (it is not repeated)."""

    kind: str
    node_type: str
    id: str
    id_label: str
    received_at: Any
    facts: list[tuple[str, str]] = field(default_factory=list)
    id_in_facts: bool = False


def trigger_event_view(event: dict[str, Any]) -> TriggerEventView:
    """:class:`TriggerEventView` of ``backend.services.triggers.events.status.event_of_run``'s dict
    (``{"kind", "node_type", "id", "received_at", "meta"}``)."""
    kind = str(event.get("kind") or "")
    meta = event.get("meta") if isinstance(event.get("meta"), dict) else {}
    facts = []
    for key, value in (meta or {}).items():
        label = _META_LABELS.get((kind, str(key))) or _META_LABELS.get((None, str(key)))
        facts.append((label or _label(key), _text(value)))
    event_id = str(event.get("id") or "")
    return TriggerEventView(
        kind=kind,
        node_type=str(event.get("node_type") or ""),
        id=event_id,
        id_label=_EVENT_ID_LABELS.get(kind, "Event"),
        received_at=event.get("received_at"),
        facts=facts,
        id_in_facts=any(value == event_id for _label_, value in facts),
    )


_INLINE_DOC = re.compile(r"``(?P<literal>.+?)``|:[a-z:]+:`~?(?P<role>[^`]+)`")


def inline_doc(text: str | None) -> Markup:
    """Node type and connector descriptions come from docstrings written in
    reStructuredText; show its inline markup as HTML instead of raw: ````x```` (an inline
    literal) becomes ``<code>x</code>`` and a role such as ``:class:`~a.B``` becomes
    ``<code>a.B</code>``. Everything else is escaped (the result is safe to insert)."""
    if not text:
        return Markup("")
    out: list[str] = []
    last = 0
    for match in _INLINE_DOC.finditer(text):
        out.append(str(escape(text[last : match.start()])))
        code = match.group("literal") or match.group("role")
        out.append(f"<code>{escape(code)}</code>")
        last = match.end()
    out.append(str(escape(text[last:])))
    return Markup("".join(out))


def install(env: jinja2.Environment) -> None:
    """Add the display helpers (``error_view``, ``trigger_event_view``, ``large_values``)
    and the run statuses to ``env``'s template globals (see the module docstring)."""
    env.globals["error_view"] = error_view
    env.globals["trigger_event_view"] = trigger_event_view
    env.filters["inline_doc"] = inline_doc
    env.globals["large_values"] = large_values
    env.globals["run_statuses"] = RUN_STATUSES
    env.globals["run_status"] = run_status_info
    env.globals["run_statuses_json"] = msgspec.json.encode(RUN_STATUSES).decode()
