"""The use cases of Railyard, one package per domain (docs/architecture.md, "Services").

The web layers (``backend/api/``, ``backend/web/``, ``frontend/``), the workers and the CLI
call these; they reach PostgreSQL through ``backend/db/`` and the engine through
``backend/engine/``. A domain package is named for what a newcomer looks for, and its
``__init__.py`` names its public modules (the only ones imported from outside it) and its
private ones.

The domains, from the top down: a domain imports only the domains below it (the layers
contract "the domains of backend.services" in pyproject.toml holds them in this order):

==================  ======================================================================
package             holds
==================  ======================================================================
``operations/``     retention, the dashboard and metrics, reading the audit log, settings
``search/``         the search box's use case
``subscriptions/``  outgoing event subscriptions (signed deliveries to a subscriber's URL)
``workflows/``      drafts, publishing, versions, checks, import and export, test runs
``triggers/``       webhooks, schedules and the event service (``triggers/events/``)
``runs/``           the run writer (``runs/execution/``), workers' attempts, run queries
``connectors/``     the node-type catalog, OpenAPI connectors, credentials
``identity/``       accounts, sign-in, sessions, tokens, groups, grants, access checks
==================  ======================================================================

The modules left at this root are the shared kernel every domain uses; each is here
because domains on several floors need it, so no single domain could hold it without the
domains below it importing upwards:

- ``audit``: the append-only audit record, written in the transaction of every audited
  change of every domain (reading and exporting it is ``operations/audit_log.py``);
- ``errors``: :class:`~backend.services.errors.InvalidInput`, the error every domain's
  use cases raise for input that breaks a rule;
- ``paging``: cursor pagination of every collection (runs, workflows, subscriptions, ...);
- ``timestamps``: times as the API answers them (RFC 3339, UTC);
- ``availability``: whether PostgreSQL or Redis is reachable (run intake, the event
  service, metrics, the workers);
- ``outbound``: the SSRF-guarded transport of the product's own HTTP requests (single
  sign-on, OAuth2 token refreshes, event subscriptions);
- ``unit_of_work``: the open session the web layers hand to every use case.
"""
