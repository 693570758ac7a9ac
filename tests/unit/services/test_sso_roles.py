"""Role mapping from id_token claims (backend.services.identity.sso.map_role) and its settings
check."""

from __future__ import annotations

import pytest
from msgspec import structs

from backend.services.identity.oidc import OidcError
from backend.services.identity.sso import check_settings, map_role
from backend.settings import load_settings

BASE = load_settings(environ={})


def test_no_role_claim_means_roles_are_managed_in_railyard() -> None:
    assert map_role(BASE, {"roles": ["admin"]}) is None


def test_mapped_values_pick_the_most_powerful_role_else_the_default() -> None:
    s = structs.replace(
        BASE,
        oidc_role_claim="roles",
        oidc_role_map={"ops": "operator", "admins": "admin", "devs": "editor"},
    )
    assert map_role(s, {"roles": ["devs", "ops"]}) == "editor"
    assert map_role(s, {"roles": ["ops", "admins"]}) == "admin"
    assert map_role(s, {"roles": "ops"}) == "operator"
    assert map_role(s, {"roles": ["admin"]}) == "viewer"  # only mapped values count
    assert map_role(s, {"roles": 7}) == "viewer"
    assert map_role(s, {}) == "viewer"


def test_without_a_map_role_names_are_taken_as_they_are() -> None:
    s = structs.replace(BASE, oidc_role_claim="railyard_role", oidc_default_role="operator")
    assert map_role(s, {"railyard_role": "editor"}) == "editor"
    assert map_role(s, {"railyard_role": "superuser"}) == "operator"


def test_unknown_roles_in_settings_are_refused() -> None:
    check_settings(BASE)
    with pytest.raises(OidcError, match="'owner'") as bad:
        check_settings(structs.replace(BASE, oidc_role_map={"x": "owner"}))
    assert bad.value.status == 500
    with pytest.raises(OidcError, match="'root'"):
        check_settings(structs.replace(BASE, oidc_default_role="root"))
