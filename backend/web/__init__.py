"""The web layer's shared adapters, used by the JSON API (backend/api/) and the pages
(frontend/): who is asking (sessions, API tokens, CSRF, request ids:
:mod:`backend.web.authentication`), the one authorization guard (:mod:`backend.web.guards`,
deciding with the pure :mod:`backend.auth.policy`), and the security headers of every
answer (:mod:`backend.web.security_headers`).

It sits above services and the runtime and below the controllers, the pages and the app
(import-linter contracts in pyproject.toml, docs/architecture.md "Layers")."""
