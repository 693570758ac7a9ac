"""The permission table of backend.auth.policy (docs/security.md, "Permission table")."""

from __future__ import annotations

import pytest

from backend.auth.policy import (
    OBJECT_PERMISSIONS,
    ROLE_PERMISSIONS,
    Decision,
    Grant,
    Level,
    ObjectAccess,
    ObjectKind,
    Permission,
    Principal,
    Role,
    Scope,
    decide,
    object_level,
    parse_role,
)

SYSTEM = [p for p in Permission if p not in OBJECT_PERMISSIONS]

# The documented table of system permissions: role -> what it may do.
EXPECTED_SYSTEM: dict[Role, set[Permission]] = {
    Role.ADMIN: set(SYSTEM),
    Role.EDITOR: {
        Permission.PUBLIC,
        Permission.AUTHENTICATED,
        Permission.TOKENS_OWN,
        Permission.SESSIONS_OWN,
        Permission.WORKFLOW_CREATE,
        Permission.WORKFLOW_LIST,
        Permission.CREDENTIAL_CREATE,
        Permission.CREDENTIAL_LIST,
    },
    Role.OPERATOR: {
        Permission.PUBLIC,
        Permission.AUTHENTICATED,
        Permission.TOKENS_OWN,
        Permission.SESSIONS_OWN,
        Permission.WORKFLOW_LIST,
        Permission.CREDENTIAL_LIST,
    },
    Role.VIEWER: {
        Permission.PUBLIC,
        Permission.AUTHENTICATED,
        Permission.TOKENS_OWN,
        Permission.SESSIONS_OWN,
        Permission.WORKFLOW_LIST,
        Permission.CREDENTIAL_LIST,
    },
}


def who(
    role: Role, *, scopes: set[Scope] | None = None, groups: frozenset[str] = frozenset()
) -> Principal:
    return Principal(
        user_id="u1",
        role=role,
        group_ids=frozenset(groups),
        scopes=None if scopes is None else frozenset(scopes),
    )


def workflow(owner: str | None = "someone", *grants: Grant) -> ObjectAccess:
    return ObjectAccess(ObjectKind.WORKFLOW, owner, tuple(grants))


def test_shared_permission_names_are_fixed() -> None:
    assert Permission.USERS_MANAGE == "users:manage"
    assert Permission.GROUPS_MANAGE == "groups:manage"
    assert Permission.PROJECTS_MANAGE == "projects:manage"
    assert Permission.AUDIT_READ == "audit:read"
    assert Permission.SETTINGS_READ == "settings:read"
    assert Permission.TOKENS_OWN == "tokens:own"
    assert Permission.AUTHENTICATED == "authenticated"
    assert Permission.PUBLIC == "public"


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("permission", SYSTEM)
def test_system_permission_table(role: Role, permission: Permission) -> None:
    allowed = permission in EXPECTED_SYSTEM[role]
    expected = Decision.ALLOW if allowed else Decision.FORBID
    assert decide(who(role), permission) is expected


@pytest.mark.parametrize("permission", list(Permission))
def test_anonymous_only_reaches_public(permission: Permission) -> None:
    expected = Decision.ALLOW if permission is Permission.PUBLIC else Decision.LOGIN
    assert decide(None, permission, workflow()) is expected


def test_admin_manages_every_object_without_grants() -> None:
    for permission, (kind, _) in OBJECT_PERMISSIONS.items():
        obj = ObjectAccess(kind, "someone else")
        assert decide(who(Role.ADMIN), permission, obj) is Decision.ALLOW


@pytest.mark.parametrize("role", [Role.EDITOR, Role.OPERATOR, Role.VIEWER])
def test_without_grant_objects_are_hidden(role: Role) -> None:
    for permission, (kind, _) in OBJECT_PERMISSIONS.items():
        obj = ObjectAccess(kind, "someone else")
        assert decide(who(role), permission, obj) is Decision.HIDE


@pytest.mark.parametrize(
    ("role", "granted", "ceiling"),
    [
        (Role.EDITOR, Level.MANAGE, Level.MANAGE),
        (Role.EDITOR, Level.EDIT, Level.EDIT),
        (Role.OPERATOR, Level.MANAGE, Level.RUN),
        (Role.OPERATOR, Level.READ, Level.READ),
        (Role.VIEWER, Level.EDIT, Level.READ),
    ],
)
def test_grant_levels_are_capped_by_the_role(role: Role, granted: Level, ceiling: Level) -> None:
    obj = workflow("someone", Grant(granted, user_id="u1"))
    assert object_level(who(role), obj) == ceiling
    for permission, (kind, needed) in OBJECT_PERMISSIONS.items():
        if kind is not ObjectKind.WORKFLOW:
            continue
        expected = Decision.ALLOW if needed <= ceiling else Decision.FORBID
        assert decide(who(role), permission, obj) is expected, permission


def test_viewer_granted_read_may_read_runs_but_not_run_or_publish() -> None:
    obj = workflow("someone", Grant(Level.READ, user_id="u1"))
    viewer = who(Role.VIEWER)
    assert decide(viewer, Permission.RUN_READ, obj) is Decision.ALLOW
    assert decide(viewer, Permission.WORKFLOW_RUN, obj) is Decision.FORBID
    assert decide(viewer, Permission.WORKFLOW_EDIT, obj) is Decision.FORBID
    assert decide(viewer, Permission.RUN_CONTROL, obj) is Decision.FORBID


def test_group_grants_reach_members_only() -> None:
    obj = workflow("someone", Grant(Level.EDIT, group_id="g1"))
    assert decide(who(Role.EDITOR, groups={"g1"}), Permission.WORKFLOW_EDIT, obj) is Decision.ALLOW
    assert decide(who(Role.EDITOR, groups={"g2"}), Permission.WORKFLOW_READ, obj) is Decision.HIDE


def test_another_users_grant_gives_nothing() -> None:
    obj = workflow("someone", Grant(Level.MANAGE, user_id="u2"))
    assert decide(who(Role.EDITOR), Permission.WORKFLOW_READ, obj) is Decision.HIDE


def test_owner_manages_own_workflow_within_the_role() -> None:
    assert object_level(who(Role.EDITOR), workflow("u1")) == Level.MANAGE
    assert object_level(who(Role.VIEWER), workflow("u1")) == Level.READ


def test_credentials_use_and_manage() -> None:
    use = ObjectAccess(ObjectKind.CREDENTIAL, "admin", (Grant(Level.READ, user_id="u1"),))
    editor = who(Role.EDITOR)
    assert decide(editor, Permission.CREDENTIAL_USE, use) is Decision.ALLOW
    assert decide(editor, Permission.CREDENTIAL_MANAGE, use) is Decision.FORBID
    none = ObjectAccess(ObjectKind.CREDENTIAL, "admin")
    assert decide(editor, Permission.CREDENTIAL_USE, none) is Decision.HIDE


def test_missing_or_mismatched_object_is_hidden() -> None:
    assert decide(who(Role.ADMIN), Permission.WORKFLOW_READ, None) is Decision.HIDE
    cred = ObjectAccess(ObjectKind.CREDENTIAL, "u1")
    assert decide(who(Role.ADMIN), Permission.WORKFLOW_READ, cred) is Decision.HIDE


@pytest.mark.parametrize(
    ("scope", "allowed"),
    [
        (Scope.READ, {Permission.WORKFLOW_READ, Permission.RUN_READ, Permission.FILE_READ}),
        (
            Scope.RUN,
            {
                Permission.WORKFLOW_READ,
                Permission.RUN_READ,
                Permission.FILE_READ,
                Permission.WORKFLOW_RUN,
                Permission.RUN_CONTROL,
            },
        ),
        (
            Scope.EDIT,
            {
                Permission.WORKFLOW_READ,
                Permission.RUN_READ,
                Permission.FILE_READ,
                Permission.WORKFLOW_RUN,
                Permission.RUN_CONTROL,
                Permission.WORKFLOW_EDIT,
            },
        ),
        (Scope.ADMIN, {p for p, (k, _) in OBJECT_PERMISSIONS.items() if k is ObjectKind.WORKFLOW}),
    ],
)
def test_token_scope_narrows_an_admin(scope: Scope, allowed: set[Permission]) -> None:
    principal = who(Role.ADMIN, scopes={scope})
    for permission, (kind, _) in OBJECT_PERMISSIONS.items():
        if kind is not ObjectKind.WORKFLOW:
            continue
        got = decide(principal, permission, workflow())
        assert (got is Decision.ALLOW) == (permission in allowed), (scope, permission)


def test_token_never_stronger_than_its_owner() -> None:
    viewer_admin_token = who(Role.VIEWER, scopes={Scope.ADMIN})
    obj = workflow("someone", Grant(Level.MANAGE, user_id="u1"))
    assert decide(viewer_admin_token, Permission.WORKFLOW_EDIT, obj) is Decision.FORBID
    assert decide(viewer_admin_token, Permission.USERS_MANAGE) is Decision.FORBID


def test_admin_areas_need_the_admin_scope() -> None:
    for permission in (Permission.USERS_MANAGE, Permission.TOKENS_OWN, Permission.AUDIT_READ):
        assert decide(who(Role.ADMIN, scopes={Scope.EDIT}), permission) is Decision.FORBID
        assert decide(who(Role.ADMIN, scopes={Scope.ADMIN}), permission) is Decision.ALLOW
    assert decide(who(Role.EDITOR, scopes={Scope.READ}), Permission.WORKFLOW_CREATE) is (
        Decision.FORBID
    )
    assert decide(who(Role.EDITOR, scopes={Scope.EDIT}), Permission.WORKFLOW_CREATE) is (
        Decision.ALLOW
    )


def test_own_sessions_need_the_admin_scope_with_a_token() -> None:
    """A token below ``admin`` cannot end its owner's browser sessions; a session can."""
    for role in Role:
        assert decide(who(role), Permission.SESSIONS_OWN) is Decision.ALLOW
        for scope in (Scope.READ, Scope.RUN, Scope.EDIT):
            assert decide(who(role, scopes={scope}), Permission.SESSIONS_OWN) is Decision.FORBID
    assert decide(who(Role.VIEWER, scopes={Scope.ADMIN}), Permission.SESSIONS_OWN) is (
        Decision.ALLOW
    )


def test_role_table_covers_every_role_and_unknown_roles_are_viewers() -> None:
    assert set(ROLE_PERMISSIONS) == set(Role)
    assert parse_role("root") is Role.VIEWER
