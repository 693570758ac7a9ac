"""Notion: databases, pages, blocks, search and users (``documents/notion.yaml``, written
from Notion's API reference: Notion publishes no OpenAPI document). Every call sends the
``Notion-Version`` header Notion requires (``2022-06-28``). Base URL:
``https://api.notion.com/v1``, or the setting ``notion.api_url``."""

from __future__ import annotations

from connectors.builtin.saas.curated import curated, document

OPERATIONS = {
    "query_database": "Notion: query a database",
    "get_page": "Notion: get a page",
    "create_page": "Notion: create a page",
    "update_page": "Notion: update a page",
    "list_block_children": "Notion: list a page's blocks",
    "append_block_children": "Notion: append blocks",
    "search": "Notion: search",
    "list_users": "Notion: list users",
}

definition, connector = curated(
    "notion",
    "Notion",
    document("notion.yaml"),
    OPERATIONS,
    credential_labels={"token": "Notion integration secret"},
    icon="notebook",
    docs_url="https://developers.notion.com/reference",
)
