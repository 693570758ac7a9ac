"""Outgoing event subscriptions (docs/api.md, "Event subscriptions").

A subscriber's URL receives signed deliveries (Standard Webhooks) of the run and workflow
events it chose; the scheduler's loop produces and sends them.

Public modules (the surface: modules outside the package import only these):

- ``catalogue``: the event types and the payload of each (Standard Webhooks'
  ``{type, timestamp, data}``);
- ``loop``: the scheduler's pass: produce, then send what is due;
- ``manage``: create, change, delete, list and re-send, permission-checked by the
  routes and audited;
- ``sending``: signs and sends due deliveries through the SSRF guard, logs every
  attempt, backs off, gives up after the retry window and disables failing subscriptions.

Private modules (imported only inside the package):

- ``producing``: follows the outbox (``events`` for runs, ``audit_log`` for workflows)
  and stores one delivery per subscription and matching row.
"""
