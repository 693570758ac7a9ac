"""One redaction rule for credential secrets, wherever a connector put them.

A connector sends a credential's secret where its API wants it: a header (API key,
``Authorization: Bearer``, Basic), the query string (``?key=``), a cookie, a form or JSON
body field, an OAuth2 access token. Whatever the placement, the secret can come back in
what the attempt produces: the output (the final ``url`` of an HTTP Request carries the
query string; a remote that echoes the request), an error message (``raise_for_status``
names the URL) or a log line. So the rule is applied to the values, not to the places:

- **Secrets of a credential**: the values of its type's secret (write-only) fields, named
  by the host in the resolved credential's ``secret_fields``, plus the OAuth2 tokens
  (``access_token``, ``refresh_token``) and, for a credential with a username and a
  password, the Basic form ``base64(username:password)``. Values shorter than
  :data:`MIN_SECRET_LENGTH` characters are left alone (they would match ordinary text).
- **Forms of a secret**: the value as it is, percent-encoded as a URL path or query
  component (``quote``, ``quote_plus``) and JSON-escaped, so a secret is found in a URL,
  a form body or JSON text as well.
- **Redaction**: every occurrence of a form in a string, anywhere in an output (dict keys
  and values, lists, nested), in an error's message and details, and in a log record's
  message, becomes :data:`REDACTED`.

The host applies it when an action's output or error is built
(:meth:`~connectors.sdk.action.ActionDefinition.run`), when a trigger hook returns or
raises (:meth:`~connectors.sdk.triggers.TriggerDefinition.call`), and to every log
record emitted while an attempt runs (:class:`SecretsLogFilter`). What it cannot
recognise: a secret a remote sends back transformed (hashed, split, re-encoded in another
way), and a secret shorter than :data:`MIN_SECRET_LENGTH`.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "SecretsLogFilter",
    "credential_secrets",
    "redact",
    "redact_exception",
    "secret_forms",
]

REDACTED = "[redacted]"
"""What a secret is replaced with."""

MIN_SECRET_LENGTH = 4
"""Secrets shorter than this (characters) are not redacted."""

TOKEN_FIELDS = ("access_token", "refresh_token")
"""Fields an OAuth2 credential carries at run time that are always secret."""


def credential_secrets(credential: Mapping[str, Any]) -> list[str]:
    """The secret values of a resolved credential (module docstring: which ones).

    ``credential`` is what the host's resolver returned: the type's fields plus ``id``,
    ``type``, ``kind``, ``secret_fields`` (the names of its write-only fields) and, for
    OAuth2, the tokens. Raises nothing.
    """
    names = [*credential.get("secret_fields", ()), *TOKEN_FIELDS]
    found = [v for n in names if isinstance(v := credential.get(n), str)]
    user, password = credential.get("username"), credential.get("password")
    if isinstance(user, str) and isinstance(password, str) and password:
        found.append(base64.b64encode(f"{user}:{password}".encode()).decode())
    return [v for v in dict.fromkeys(found) if len(v) >= MIN_SECRET_LENGTH]


def secret_forms(secrets: Iterable[str]) -> tuple[str, ...]:
    """Every form of ``secrets`` to look for (module docstring), longest first, so a form
    containing another is replaced whole."""
    forms: set[str] = set()
    for secret in secrets:
        if len(secret) < MIN_SECRET_LENGTH:
            continue
        forms.update((secret, quote(secret, safe=""), quote_plus(secret)))
        forms.add(json.dumps(secret)[1:-1])
    return tuple(sorted(forms, key=len, reverse=True))


def redact(value: Any, forms: tuple[str, ...]) -> Any:
    """``value`` with every occurrence of ``forms`` in its strings replaced by
    :data:`REDACTED`; JSON-able builtins (dict, list, tuple, str, scalars) are walked, the
    rest is returned as it is. A value without any form is returned unchanged (the same
    object)."""
    if not forms:
        return value
    if isinstance(value, str):
        return _redact_text(value, forms)
    if isinstance(value, dict):
        return {
            (_redact_text(k, forms) if isinstance(k, str) else k): redact(v, forms)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        items = [redact(v, forms) for v in value]
        if isinstance(value, tuple) and hasattr(value, "_make"):  # a named tuple
            return value._make(items)
        try:
            return type(value)(items)
        except TypeError:  # a sequence type built otherwise: left as it is
            return value
    return value


def _redact_text(text: str, forms: tuple[str, ...]) -> str:
    for form in forms:
        if form in text:
            text = text.replace(form, REDACTED)
    return text


def redact_exception(exc: BaseException, forms: tuple[str, ...]) -> BaseException:
    """Redact ``exc`` in place and return it: its ``args`` (what ``str(exc)`` shows), and
    the ``message`` and ``details`` of an :class:`~connectors.sdk.errors.ActionError`; the
    exceptions it was raised from are redacted too (their text reaches logs)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and forms:
        seen.add(id(current))
        current.args = tuple(redact(a, forms) for a in current.args)
        for name in ("message", "details"):
            value = getattr(current, name, None)
            if isinstance(value, str | dict):
                try:
                    setattr(current, name, redact(value, forms))
                except AttributeError:  # a read-only attribute of a library's exception
                    pass
        current = current.__cause__ or current.__context__
    return exc


class SecretsLogFilter(logging.Filter):
    """A logging filter that redacts the secrets of the attempt running in the current
    context (:func:`connectors.sdk.context.current_context`) from each record's message;
    records outside an attempt pass unchanged. Install it on the process's handlers."""

    def filter(self, record: logging.LogRecord) -> bool:
        from .context import _current  # the context module imports this one

        forms = getattr(_current.get(None), "secret_forms", ())  # never fails a log call
        if forms:
            message = record.getMessage()
            redacted = _redact_text(message, forms)
            if redacted != message:
                record.msg, record.args = redacted, None
        return True
