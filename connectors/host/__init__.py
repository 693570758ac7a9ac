"""The connector host: what runs connector actions, kept out of the author API.

:mod:`connectors.sdk` is what connector authors write against (actions, context
functions, credentials, errors, the SSRF policy). The host side lives here:
:mod:`connectors.host.outbound` (the SSRF-guarded HTTP transport, the shared keep-alive
pool and the client actions get) and :mod:`connectors.host.contexts` (building the
per-attempt :class:`~connectors.sdk.ActionContext`). Railyard's runtime and the test
environment for connector authors (:mod:`connectors.testing`) import it; connectors never do.
"""
