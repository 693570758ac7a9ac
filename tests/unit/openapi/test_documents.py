"""The committed public documents import with exact counts, and nothing is dropped:
every operation of a document is either imported or refused with a reason."""

from __future__ import annotations

import functools
from collections import Counter

import pytest

from connectors.openapi.importer import METHODS, build_definition
from connectors.openapi.loading import DocumentRefused, load_document
from tests.openapi_server import document, document_bytes


@functools.cache
def _import(name: str):  # type: ignore[no-untyped-def]
    doc, version = load_document(document_bytes(name))
    return doc, build_definition(doc, name=name, openapi_version=version)


def _operations(doc: dict) -> int:  # type: ignore[type-arg]
    return sum(1 for item in doc["paths"].values() for m in item if m in METHODS)


@pytest.mark.parametrize(
    ("name", "imported", "refused"),
    [("github", 622, 1), ("stripe", 417, 0), ("outline", 113, 0)],
)
def test_document_counts(name: str, imported: int, refused: int) -> None:
    doc, definition = _import(name)
    assert len(definition.operations) == imported
    assert len(definition.refused) == refused
    assert all(r.reason for r in definition.refused)
    assert imported + refused == _operations(doc)  # zero silent drops
    assert len({o.key for o in definition.operations}) == imported


def test_github_refusal_names_the_operation_and_why() -> None:
    _, definition = _import("github")
    (refusal,) = definition.refused
    assert (refusal.method, refusal.path) == (
        "POST",
        "/repos/{owner}/{repo}/releases/{release_id}/assets",
    )
    assert refusal.reason.startswith("request body only as */*")


def test_github_operation_fields_and_link_pagination() -> None:
    _, definition = _import("github")
    assert definition.base_url == "https://api.github.com"
    op = definition.operation("issues_list_for_repo")
    assert op is not None and op.method == "GET"
    fields = {f.name: f for f in op.fields}
    assert fields["owner"].location == "path" and fields["owner"].required
    assert fields["state"].schema["enum"] == ["open", "closed", "all"]
    assert fields["state"].schema["default"] == "open"
    assert fields["state"].schema["description"].startswith("Indicates the state")
    assert not fields["state"].required
    assert op.pagination is not None and op.pagination.kind == "link"
    assert op.output_schema["type"] == "array"
    assert "title" in op.output_schema["items"]["properties"]
    kinds = Counter(o.pagination.kind for o in definition.operations if o.pagination)
    assert kinds == {"link": 143, "page": 15}


def test_stripe_credentials_cursor_pagination_and_form_bodies() -> None:
    _, definition = _import("stripe")
    assert {(c.scheme, c.kind) for c in definition.credentials} == {
        ("basicAuth", "basic"),
        ("bearerAuth", "bearer"),
    }
    listing = definition.operation("get_customers")
    assert listing is not None and listing.pagination is not None
    assert listing.pagination.kind == "cursor"
    assert listing.pagination.param == "starting_after"
    assert listing.pagination.items_path == ["data"]
    assert listing.output_schema["properties"]["data"]["type"] == "array"
    create = definition.operation("post_customers")
    assert create is not None
    assert create.body_media_type == "application/x-www-form-urlencoded"
    assert {"email", "metadata", "description"} <= {f.name for f in create.fields}
    cursor_ops = sum(1 for o in definition.operations if o.pagination)
    assert cursor_ops == 91


def test_outline_oauth2_authorization_code() -> None:
    _, definition = _import("outline")
    oauth = next(c for c in definition.credentials if c.kind == "oauth2")
    assert oauth.authorize_url == "https://app.getoutline.com/oauth/authorize"
    assert oauth.token_url == "https://app.getoutline.com/oauth/token"
    assert oauth.scopes == ["read", "write"]
    op = definition.operation("documents_list") or definition.operations[0]
    assert set(op.credential_types) == {c.type for c in definition.credentials}


def test_invalid_document_is_refused_with_where() -> None:
    with pytest.raises(DocumentRefused) as caught:
        load_document(document_bytes("octobat"))
    assert caught.value.where == "/tags"
    assert caught.value.reason == (
        "not a valid OpenAPI 3.0 document: the value breaks the rule "
        "properties/tags/uniqueItems of the OpenAPI schema"
    )
    assert _operations(document("octobat")) == 164
