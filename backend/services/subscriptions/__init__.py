"""Outgoing event subscriptions (docs/api.md, "Event subscriptions").

- :mod:`.catalogue`: the event types and the payload of each (Standard Webhooks'
  ``{type, timestamp, data}``);
- :mod:`.producing`: follows the outbox (``events`` for runs, ``audit_log`` for workflows)
  and stores one delivery per subscription and matching row;
- :mod:`.sending`: signs and sends due deliveries through the SSRF guard, logs every
  attempt, backs off, gives up after the retry window and disables failing subscriptions;
- :mod:`.manage`: create, change, delete, list and re-send, permission-checked by the
  routes and audited.
"""
