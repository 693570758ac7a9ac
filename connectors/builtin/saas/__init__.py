"""Curated connectors made from the vendors' OpenAPI documents (docs/connectors.md,
"OpenAPI connectors"): a pinned subset of each document in ``documents/``, turned into
node types by the same importer an admin uses, with the operations users reach for most
chosen and labelled by hand."""
