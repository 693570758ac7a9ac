"""CloudEvents on a webhook (``trigger.webhook`` version 2 with ``cloudevents``): the
request's events parsed (backend/triggers/cloudevents.py), one run started per event.

Only an endpoint that takes CloudEvents comes here (from
backend/services/triggers/webhook_delivery.py); every other delivery keeps the webhook's own path.
The checks before (route, rate limit, body size, authentication) are the webhook's. Then:

- a request in none of the three modes, or with an invalid event, is refused with 400
  naming the problem, and no run starts (for a batch: none of its runs);
- an event whose ``data`` breaks the trigger's body schema (version 4) is refused with 422
  naming the field (``data.qty``) and no run of the request starts, or with
  ``mark_invalid`` its run starts and fails at its trigger step (as a webhook body's);
- each event starts one run with the event as its input and the idempotency key of its
  ``source`` and ``id`` (:class:`backend.services.triggers.webhook_keys.DeliveryKeys`, the
  mechanism of the ``Idempotency-Key`` header, with the trigger's ``idempotency_hours``):
  a repeated delivery returns the run of the first;
- the answer comes once every run is stored: 202 with the run's links (and
  ``Location``) for one event, ``{"runs": [links, ...]}`` in the batch's order for a
  batch. The trigger's Respond setting does not apply: CloudEvents senders wait for no
  workflow.
"""

from __future__ import annotations

import msgspec

from backend.services.runs.execution import Execution, StartedRun
from backend.services.triggers import webhooks as hooks
from backend.services.triggers.webhook_answers import (
    Answer,
    Rejection,
    RunLinks,
    body_rejection,
    started_answer,
)
from backend.services.triggers.webhook_keys import DeliveryKeys
from backend.triggers.body_schema import BodyRefused, verdict
from backend.triggers.cloudevents import (
    CloudEventError,
    ParsedEvent,
    batched,
    is_structured,
    parse_cloudevents,
)

__all__ = ["answer", "read_events", "start_runs"]


def read_events(
    endpoint: hooks.Endpoint, raw: bytes, headers: dict[str, str], max_json_depth: int
) -> tuple[list[ParsedEvent], bool]:
    """The events of a verified request body ``raw`` and whether it is a batch; raises
    :class:`Rejection` 400, or 422 when an event's ``data`` breaks the trigger's body
    schema in mode ``reject`` (for a batch: no run of it starts); in mode
    ``mark_invalid`` that event's input carries the problems (``body_errors``)."""
    try:
        events = parse_cloudevents(headers, raw, max_json_depth)
    except CloudEventError as exc:
        raise Rejection(400, str(exc), field="body") from exc
    batch = batched(headers)
    structured = batch or is_structured(headers)
    schema = endpoint.config.body_schema
    checked = []
    for index, event in enumerate(events):
        try:  # mark_invalid: this event's run fails at its trigger step
            checked.append(
                ParsedEvent(verdict(endpoint.invalid_body, schema, event.input, root="data"))
            )
        except BodyRefused as refused:
            where = f"event {index} of the batch: " if batch else ""
            # where the data sits in the request: the event's member, or the whole body
            at = f"{index}.data" if batch else ("data" if structured else "")
            raise body_rejection(refused, where=where, in_request=at) from None
    return checked, batch


async def start_runs(
    execution: Execution, keys: DeliveryKeys, endpoint: hooks.Endpoint, events: list[ParsedEvent]
) -> list[StartedRun]:
    """Start (or find, for a repeated event) each event's run, in order."""
    assert endpoint.version is not None
    started = []
    for event in events:
        key = await keys.held(endpoint, event.dedupe_value)
        started.append(
            await execution.start_run(
                endpoint.version, event.input, trigger="webhook", idempotency_key=key
            )
        )
    return started


def answer(links: list[RunLinks], *, batch: bool) -> Answer:
    """The 202 answer: one run's links, or a batch's ``{"runs": [...]}``."""
    if batch:
        return Answer(202, msgspec.json.encode({"runs": links}))
    (single,) = links
    return started_answer(single)
