"""Every built-in node type labels its enum options for the config panel."""

from __future__ import annotations

import pytest

from backend.services.connectors.catalog import AppCatalog, load_catalog
from frontend.forms import ENUM_LABELS_KEY, RESERVED_FIELDS

BUILTIN_PREFIXES = ("trigger.", "control.", "flow.", "http.", "data.", "hubspot.")
#: Values that read well as they are (HTTP method names).
SELF_EXPLANATORY = {("http.request", "method")}


@pytest.fixture(scope="module")
def catalog() -> AppCatalog:
    return load_catalog()


def _enum_fields(catalog: AppCatalog) -> list[tuple[str, str, dict]]:
    found = []
    for spec in catalog.all():
        if not spec.type.startswith(BUILTIN_PREFIXES):
            continue
        for name, prop in (spec.config_schema.get("properties") or {}).items():
            if isinstance(prop, dict) and "enum" in prop and name not in RESERVED_FIELDS:
                found.append((spec.type, name, prop))
    return found


def test_builtin_enum_fields_have_a_label_for_every_value(catalog: AppCatalog) -> None:
    fields = _enum_fields(catalog)
    assert len(fields) >= 15, [(t, n) for t, n, _ in fields]
    missing = []
    for type_, name, prop in fields:
        if (type_, name) in SELF_EXPLANATORY:
            continue
        labels = prop.get(ENUM_LABELS_KEY) or {}
        unlabelled = [v for v in prop["enum"] if not labels.get(v)]
        stray = [k for k in labels if k not in prop["enum"]]
        if unlabelled or stray:
            missing.append((type_, name, unlabelled, stray))
    assert missing == []


def test_webhook_respond_modes_read_as_words(catalog: AppCatalog) -> None:
    spec = catalog.get("trigger.webhook")
    assert spec is not None
    labels = spec.config_schema["properties"]["respond"][ENUM_LABELS_KEY]
    assert labels["respond_node"] == "When a Respond to Webhook step answers"
