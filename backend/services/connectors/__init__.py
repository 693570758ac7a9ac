"""Connectors and credentials: the node types a workflow can use and the secrets they use.

The node-type catalog (control nodes, installed connector plugins, imported OpenAPI
connectors), their icons and generated reference, and credentials (sealed payloads,
OAuth2 flows, resolution for the action about to use one).

Public modules (the surface: modules outside the package import only these):

- ``catalog``: The node-type catalog: the engine's control nodes plus every installed
  connector.
- ``credential_oauth``: OAuth2 credentials: the authorization-code flow with PKCE, and token
  refresh.
- ``credential_use``: A credential resolved for the action about to use it: decrypted,
  refreshed, audited.
- ``credentials``: Credentials: create, list (masked), update, delete, rotate keys; the
  sealed payload.
- ``icons``: Node-type icons: the Lucide set shipped with Railyard and the SVG icons plugins
  ship.
- ``node_reference``: The reference of the built-in node types (docs/node-types.md),
  generated from their specs.
- ``openapi_catalog``: Imported OpenAPI connectors in a process's catalog.
- ``openapi_connectors``: Importing OpenAPI documents as connectors, listing them, and what
  a re-import changes.

Private modules (imported only inside the package):

- ``discovery``: Connector discovery: the ``railyard.connectors`` entry points in load
  order, built-in or plugin.
"""
