"""Triggers: what starts a published workflow's runs.

Webhooks (endpoints, the delivery use case, its answers and speed devices),
schedules and their firing, and the event service (:mod:`.events`: connector triggers
heard, verified and turned into runs). Triggers start runs through
:mod:`backend.services.runs`; workflows sync their triggers on publish.

Public modules (the surface: modules outside the package import only these):

- ``answer_cutoff``: The end of the answer waits of a stopping API process.
- ``delivery_gate``: How many webhook deliveries with a large body an API process works on
  at once.
- ``events``: The event service: connector triggers heard, verified and turned into runs.
- ``schedule_firing``: Schedule firing: the scheduler's loop that starts runs at fire
  instants.
- ``schedules``: Schedule use cases: sync a schedule on publish, claim due fire instants,
  preview.
- ``webhook_answers``: What a webhook delivery answers, whichever way the request came in: a
  rejection (:class:`Rejection`, answered as problem details by :func:`error_answer`), the
  202 with the run's links (:func:`started_answer`), or the run's own answer
  (:func:`run_answer`).
- ``webhook_delivery``: The webhook delivery use case: one request to
  ``/hooks/<token>[/<suffix>]`` of a deliverable endpoint, from its route check to its
  answer, in one sequence (:meth:`WebhookDelivery.deliver`):
- ``webhook_listening``: Test calls of a webhook: the designer's "Listen for test call"
  window.
- ``webhook_urls``: Public URLs of a workflow's webhook (``/hooks/<token>``) and of its test
  endpoint (``/hooks/test/<token>``), built from the ``base_url`` setting.
- ``webhook_versions``: What each published version of the ``trigger.webhook`` node does
  with a delivery.
- ``webhooks``: Webhook use cases: endpoint lookup, the write-only secret, files, audit,
  test calls.

Private modules (imported only inside the package):

- ``webhook_answer_wait``: The seam of a waiting webhook's speed devices (``respond_node``
  and ``last_step``).
- ``webhook_cloudevents``: CloudEvents on a webhook (``trigger.webhook`` version 2 with
  ``cloudevents``): the request's events parsed (backend/triggers/cloudevents.py), one run
  started per event.
- ``webhook_keys``: The idempotency key a webhook delivery starts its run with.
"""
