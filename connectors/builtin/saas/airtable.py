"""Airtable: records of a table and the bases a token reaches (``documents/airtable.yaml``,
written from Airtable's Web API reference: Airtable publishes no OpenAPI document).
Lists follow ``offset`` to fetch every page. Base URL: ``https://api.airtable.com/v0``, or
the setting ``airtable.api_url``."""

from __future__ import annotations

from connectors.builtin.saas.curated import curated, document

OPERATIONS = {
    "list_records": "Airtable: list records",
    "get_record": "Airtable: get a record",
    "create_records": "Airtable: create records",
    "update_records": "Airtable: update records",
    "delete_record": "Airtable: delete a record",
    "list_bases": "Airtable: list bases",
}

definition, connector = curated(
    "airtable",
    "Airtable",
    document("airtable.yaml"),
    OPERATIONS,
    credential_labels={"token": "Airtable token"},
    icon="table",
    docs_url="https://airtable.com/developers/web/api",
)
