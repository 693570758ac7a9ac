"""The one error shape of every HTTP answer: RFC 9457 problem details.

Every error Railyard answers (API, webhooks, app pushes, the last-resort 500) is a
:class:`Problem` sent as ``application/problem+json``::

    {"type": "urn:railyard:problem:invalid-request", "title": "Invalid request",
     "status": 400, "detail": "name: Expected `str` of length >= 1",
     "instance": "/api/v1/workflows", "errors": [{"detail": "...", "pointer": "#/name"}],
     "field": "name"}

- ``type`` is ``about:blank`` when the HTTP status says everything (then ``title`` is the
  status phrase, RFC 9457 section 4.2.1), else one of :data:`TYPES` (docs/api.md lists them);
- ``instance`` is the path of the request that failed;
- ``errors`` lists each finding with where it is: ``pointer``, a JSON Pointer (RFC 6901, in
  its URI fragment form ``#/nodes/0/id``) into the request body, or ``parameter``, the name
  of a query, path or header parameter. Always present, empty when nothing is pinned down;
- extension members (RFC 9457 section 3.2): ``field`` (the first finding's place as a dotted
  path, ``nodes[0].id``; deprecated, removed with the unversioned ``/api`` paths),
  ``diagnostics`` (a rejected publish), ``revision``/``saved_by``/``saved_at`` (a refused
  draft save), ``kind`` (a connector's error kind), ``position`` (a search query's fault).

Pure: msgspec and the standard library, so services answering vendor pushes build the
same body as the API.
"""

from __future__ import annotations

import re
from datetime import datetime
from http import HTTPStatus
from typing import Any, Literal

import msgspec

MEDIA_TYPE = "application/problem+json"

BLANK = "about:blank"

TYPES: dict[str, str] = {
    "urn:railyard:problem:invalid-request": "Invalid request",
    "urn:railyard:problem:draft-conflict": "The draft changed since it was read",
    "urn:railyard:problem:publish-rejected": "The diagram has errors",
    "urn:railyard:problem:state-conflict": "Not possible in the resource's current state",
    "urn:railyard:problem:unavailable": "A backing service cannot be reached",
}
"""Problem types beyond ``about:blank``, with their titles (docs/api.md, "Errors")."""

INVALID = "urn:railyard:problem:invalid-request"
DRAFT_CONFLICT = "urn:railyard:problem:draft-conflict"
PUBLISH_REJECTED = "urn:railyard:problem:publish-rejected"
STATE_CONFLICT = "urn:railyard:problem:state-conflict"
UNAVAILABLE = "urn:railyard:problem:unavailable"


class ProblemError(msgspec.Struct, omit_defaults=True):
    """One finding: what is wrong and where (a body ``pointer`` or a ``parameter`` name)."""

    detail: str
    pointer: str | None = None
    parameter: str | None = None


class Problem(msgspec.Struct):
    """An RFC 9457 problem details object (see the module doc for each member); the
    extension members are left out of the body when not set."""

    type: str
    title: str
    status: int
    detail: str
    instance: str
    errors: list[ProblemError]
    field: str | msgspec.UnsetType = msgspec.UNSET
    diagnostics: list[Any] | msgspec.UnsetType = msgspec.UNSET
    revision: int | msgspec.UnsetType = msgspec.UNSET
    saved_by: str | msgspec.UnsetType | None = msgspec.UNSET
    saved_at: datetime | msgspec.UnsetType | None = msgspec.UNSET
    kind: str | msgspec.UnsetType = msgspec.UNSET
    position: int | msgspec.UnsetType = msgspec.UNSET


def encode(problem: Problem) -> bytes:
    """The JSON body of ``problem`` (UTF-8 bytes)."""
    return msgspec.json.encode(problem)


_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def pointer(dotted: str) -> str:
    """A dotted field path (``nodes[0].config.url``) as a JSON Pointer in URI fragment form
    (``#/nodes/0/config/url``); ``~`` and ``/`` inside a name are escaped (RFC 6901
    section 4). An empty path, or ``body`` (the whole body), points at the root: ``#``."""
    if dotted in ("", "body"):
        return "#"
    parts = [name or index for name, index in _SEGMENT.findall(dotted)]
    return "#" + "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def dotted(fragment: str) -> str | None:
    """The dotted path of a JSON Pointer in URI fragment form (the inverse of
    :func:`pointer`): ``#/nodes/0/id`` is ``nodes[0].id``; the root ``#`` has none."""
    path = ""
    for part in fragment.removeprefix("#").split("/")[1:]:
        name = part.replace("~1", "/").replace("~0", "~")
        path += f"[{name}]" if name.isdigit() else (f".{name}" if path else name)
    return path or None


Where = Literal["body", "parameter"]


def problem(
    status: int,
    detail: str,
    instance: str,
    *,
    field: str | None = None,
    where: Where = "body",
    type: str | None = None,
    errors: list[ProblemError] | None = None,
    **extensions: Any,
) -> Problem:
    """A :class:`Problem` for ``status``. ``field`` (a dotted path, or a parameter name
    when ``where`` is ``"parameter"``) becomes the one finding unless ``errors`` are given.
    ``type`` defaults to :data:`INVALID` for 400 and 422 and ``about:blank`` otherwise;
    ``extensions`` are further members of :class:`Problem` (``diagnostics``, ``kind``, ...).
    """
    if type is None:
        type = INVALID if status in (400, 422) else BLANK
    title = TYPES.get(type) or _phrase(status)
    if errors is None:
        errors = []
        if field:
            errors.append(
                ProblemError(detail, parameter=field)
                if where == "parameter"
                else ProblemError(detail, pointer=pointer(field))
            )
    if field is None and errors:
        first = errors[0]
        field = first.parameter or (dotted(first.pointer) if first.pointer else None)
    return Problem(
        type=type,
        title=title,
        status=status,
        detail=detail,
        instance=instance,
        errors=errors,
        field=msgspec.UNSET if field is None else field,
        **extensions,
    )


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def body(status: int, detail: str, instance: str, **kwargs: Any) -> bytes:
    """:func:`problem` encoded (see :func:`encode`)."""
    return encode(problem(status, detail, instance, **kwargs))
