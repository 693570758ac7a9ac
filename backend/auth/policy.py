"""The authorization policy: who may do what (pure; no SQLAlchemy, Litestar or Redis).

Every route declares one :class:`Permission` (``opt={"permission": ...}``) and the guard
(:mod:`backend.web.guards`) asks :func:`decide` with the request's :class:`Principal` and,
for object-scoped permissions, the :class:`ObjectAccess` facts of the workflow, run or
credential named in the path. Lists are filtered with the same rule
(:func:`object_level`). The table is documented in docs/security.md ("Permission table").

The model, in three parts:

- **Role** (admin, editor, operator, viewer) gives system permissions (create workflows,
  manage users, ...) and a *ceiling*: the highest access level the role can hold on any
  object. Admins reach everything without grants.
- **Access** to an object comes from ownership (the creator owns: ``manage``) and from
  grants (to the user or one of its groups, on the object or on its project). The effective
  level is the highest of these, capped by the role's ceiling.
- **API tokens** carry scopes (read, run, edit, admin); a token request may do only what
  both the token's scope and its owner may do (intersection).

Access levels are ordered: ``read < run < edit < manage`` for workflows (runs follow their
workflow) and ``use < manage`` for credentials.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum


class Role(StrEnum):
    """A user's role (``users.role``)."""

    ADMIN = "admin"
    EDITOR = "editor"
    OPERATOR = "operator"
    VIEWER = "viewer"


class Level(IntEnum):
    """Ordered access levels on an object (a grant holds one; higher implies lower)."""

    NONE = 0
    READ = 1
    RUN = 2
    EDIT = 3
    MANAGE = 4


class ObjectKind(StrEnum):
    """What an object-scoped permission is about (runs resolve to their workflow)."""

    WORKFLOW = "workflow"
    CREDENTIAL = "credential"


class Scope(StrEnum):
    """An API token scope: the highest level a token request may act at."""

    READ = "read"
    RUN = "run"
    EDIT = "edit"
    ADMIN = "admin"


class Permission(StrEnum):
    """What a route needs. System permissions depend on the role only; object permissions
    (``workflow:*``, ``run:*``, ``credential:*``) on the object named in the path."""

    PUBLIC = "public"  # anyone, no login (login form, health, webhooks, static files)
    AUTHENTICATED = "authenticated"  # any logged-in user (catalog, own profile)
    USERS_MANAGE = "users:manage"
    GROUPS_MANAGE = "groups:manage"
    PROJECTS_MANAGE = "projects:manage"
    AUDIT_READ = "audit:read"
    SETTINGS_READ = "settings:read"
    METRICS_READ = "metrics:read"  # /metrics and the dashboard (or the metrics token)
    TOKENS_OWN = "tokens:own"  # one's own API tokens
    SESSIONS_OWN = "sessions:own"  # end one's own login sessions (log out, revoke, everywhere)
    TOKENS_MANAGE = "tokens:manage"  # every token and service account
    WORKFLOW_CREATE = "workflow:create"
    WORKFLOW_LIST = "workflow:list"  # list pages/APIs, filtered per object
    WORKFLOW_READ = "workflow:read"
    WORKFLOW_RUN = "workflow:run"
    WORKFLOW_EDIT = "workflow:edit"
    WORKFLOW_MANAGE = "workflow:manage"
    RUN_READ = "run:read"  # object: the run's workflow at read
    RUN_CONTROL = "run:control"  # object: the run's workflow at run (pause/cancel/re-run)
    FILE_READ = "file:read"  # object: the workflow that received the upload, at read
    CREDENTIAL_CREATE = "credential:create"
    CREDENTIAL_LIST = "credential:list"
    CREDENTIAL_USE = "credential:use"
    CREDENTIAL_MANAGE = "credential:manage"
    CONNECTORS_MANAGE = "connectors:manage"  # import OpenAPI documents as connectors


# Object permissions: (kind of object, level needed). Runs and files are checked on their
# workflow; the guard resolves them from the path.
OBJECT_PERMISSIONS: dict[Permission, tuple[ObjectKind, Level]] = {
    Permission.WORKFLOW_READ: (ObjectKind.WORKFLOW, Level.READ),
    Permission.WORKFLOW_RUN: (ObjectKind.WORKFLOW, Level.RUN),
    Permission.WORKFLOW_EDIT: (ObjectKind.WORKFLOW, Level.EDIT),
    Permission.WORKFLOW_MANAGE: (ObjectKind.WORKFLOW, Level.MANAGE),
    Permission.RUN_READ: (ObjectKind.WORKFLOW, Level.READ),
    Permission.RUN_CONTROL: (ObjectKind.WORKFLOW, Level.RUN),
    Permission.FILE_READ: (ObjectKind.WORKFLOW, Level.READ),
    Permission.CREDENTIAL_USE: (ObjectKind.CREDENTIAL, Level.READ),
    Permission.CREDENTIAL_MANAGE: (ObjectKind.CREDENTIAL, Level.MANAGE),
}

# Credential grants are "use" or "manage"; "use" is stored as READ.
CREDENTIAL_LEVELS: dict[str, Level] = {"use": Level.READ, "manage": Level.MANAGE}
WORKFLOW_LEVELS: dict[str, Level] = {
    "read": Level.READ,
    "run": Level.RUN,
    "edit": Level.EDIT,
    "manage": Level.MANAGE,
}

# System permissions each role holds (admins hold every permission).
ROLE_PERMISSIONS: dict[Role, frozenset[Permission]] = {
    Role.ADMIN: frozenset(Permission),
    Role.EDITOR: frozenset(
        {
            Permission.AUTHENTICATED,
            Permission.TOKENS_OWN,
            Permission.SESSIONS_OWN,
            Permission.WORKFLOW_CREATE,
            Permission.WORKFLOW_LIST,
            Permission.CREDENTIAL_CREATE,
            Permission.CREDENTIAL_LIST,
        }
    ),
    Role.OPERATOR: frozenset(
        {
            Permission.AUTHENTICATED,
            Permission.TOKENS_OWN,
            Permission.SESSIONS_OWN,
            Permission.WORKFLOW_LIST,
            Permission.CREDENTIAL_LIST,
        }
    ),
    Role.VIEWER: frozenset(
        {
            Permission.AUTHENTICATED,
            Permission.TOKENS_OWN,
            Permission.SESSIONS_OWN,
            Permission.WORKFLOW_LIST,
            Permission.CREDENTIAL_LIST,
        }
    ),
}

# The highest level a role can hold on an object, whatever it owns or is granted.
ROLE_CEILING: dict[Role, Level] = {
    Role.ADMIN: Level.MANAGE,
    Role.EDITOR: Level.MANAGE,
    Role.OPERATOR: Level.RUN,
    Role.VIEWER: Level.READ,
}

# The highest level a token of each scope may act at, and whether it may use admin-only
# system permissions.
SCOPE_LEVEL: dict[Scope, Level] = {
    Scope.READ: Level.READ,
    Scope.RUN: Level.RUN,
    Scope.EDIT: Level.EDIT,
    Scope.ADMIN: Level.MANAGE,
}

# The strongest scope a user of each role may put on a token (stronger would be no use:
# a token never does more than its owner).
ROLE_MAX_SCOPE: dict[Role, Scope] = {
    Role.ADMIN: Scope.ADMIN,
    Role.EDITOR: Scope.EDIT,
    Role.OPERATOR: Scope.RUN,
    Role.VIEWER: Scope.READ,
}
_SCOPE_ORDER = (Scope.READ, Scope.RUN, Scope.EDIT, Scope.ADMIN)


def scopes_for_role(role: Role) -> tuple[Scope, ...]:
    """The scopes a user of ``role`` may give its tokens, weakest first."""
    return _SCOPE_ORDER[: _SCOPE_ORDER.index(ROLE_MAX_SCOPE[role]) + 1]


# The level a system permission counts as for token scopes.
SYSTEM_LEVEL: dict[Permission, Level] = {
    Permission.PUBLIC: Level.NONE,
    Permission.AUTHENTICATED: Level.READ,
    Permission.WORKFLOW_LIST: Level.READ,
    Permission.CREDENTIAL_LIST: Level.READ,
    Permission.WORKFLOW_CREATE: Level.EDIT,
    Permission.CREDENTIAL_CREATE: Level.EDIT,
}
# Everything else that is not an object permission (users, groups, projects, audit,
# settings, tokens, even one's own, and one's own login sessions) needs the ``admin`` scope
# when reached with a token: a token cannot mint tokens, end its owner's browser sessions
# or change who may do what unless it is an admin token.


def parse_role(value: str) -> Role:
    """The :class:`Role` named ``value``; an unknown name counts as viewer (least power)."""
    try:
        return Role(value)
    except ValueError:
        return Role.VIEWER


def parse_scopes(values: Iterable[str]) -> frozenset[Scope]:
    """Known scopes among ``values`` (unknown names are dropped). Raises nothing."""
    found = set()
    for v in values:
        try:
            found.add(Scope(v))
        except ValueError:
            continue
    return frozenset(found)


@dataclass(frozen=True)
class Principal:
    """Who asks: the user's id, role and groups; ``scopes`` is None for a login session,
    else the scopes of the API token the request carries."""

    user_id: str
    role: Role
    group_ids: frozenset[str] = frozenset()
    scopes: frozenset[Scope] | None = None

    @property
    def is_admin(self) -> bool:
        """True for the admin role (tokens may still narrow what an admin request does)."""
        return self.role is Role.ADMIN

    def token_level(self) -> Level:
        """The highest level the request's token allows (MANAGE for a session)."""
        if self.scopes is None:
            return Level.MANAGE
        return max((SCOPE_LEVEL[s] for s in self.scopes), default=Level.NONE)


@dataclass(frozen=True)
class Grant:
    """A grant as the policy sees it: to a user or a group, at a level."""

    level: Level
    user_id: str | None = None
    group_id: str | None = None


@dataclass(frozen=True)
class ObjectAccess:
    """Facts about one object: its kind, owner and every grant on it or its project."""

    kind: ObjectKind
    owner_id: str | None
    grants: tuple[Grant, ...] = field(default=())


class Decision(StrEnum):
    """Outcome of :func:`decide`: allow, forbid (403), or hide (404: the caller cannot even
    read the object, so its existence is not confirmed), or login (401: anonymous)."""

    ALLOW = "allow"
    FORBID = "forbid"
    HIDE = "hide"
    LOGIN = "login"


def object_level(principal: Principal, obj: ObjectAccess) -> Level:
    """The principal's effective level on ``obj``: admin manages everything; otherwise the
    highest of ownership (manage) and matching grants, capped by the role's ceiling and the
    token's scope."""
    if principal.is_admin:
        level = Level.MANAGE
    else:
        level = Level.NONE
        if obj.owner_id is not None and obj.owner_id == principal.user_id:
            level = Level.MANAGE
        for g in obj.grants:
            if (g.user_id is not None and g.user_id == principal.user_id) or (
                g.group_id is not None and g.group_id in principal.group_ids
            ):
                level = max(level, g.level)
        level = min(level, ROLE_CEILING[principal.role])
    return min(level, principal.token_level())


def has_system(principal: Principal, permission: Permission) -> bool:
    """True when the principal's role (and token scope) holds a system permission."""
    if permission not in ROLE_PERMISSIONS[principal.role]:
        return False
    if principal.scopes is None:
        return True
    needed = SYSTEM_LEVEL.get(permission)
    if needed is None:  # admin-only area (users, groups, projects, audit, all tokens)
        return Scope.ADMIN in principal.scopes
    return principal.token_level() >= needed


def decide(
    principal: Principal | None, permission: Permission, obj: ObjectAccess | None = None
) -> Decision:
    """Whether ``principal`` may do ``permission`` (on ``obj`` for object permissions).

    Anonymous callers get LOGIN unless the permission is PUBLIC. For an object permission
    without ``obj`` (the object does not exist) the answer is HIDE; a caller who cannot read
    the object gets HIDE, one who can read but not act gets FORBID.
    """
    if permission is Permission.PUBLIC:
        return Decision.ALLOW
    if principal is None:
        return Decision.LOGIN
    needed = OBJECT_PERMISSIONS.get(permission)
    if needed is None:
        return Decision.ALLOW if has_system(principal, permission) else Decision.FORBID
    kind, level = needed
    if obj is None or obj.kind is not kind:
        return Decision.HIDE
    have = object_level(principal, obj)
    if have >= level:
        return Decision.ALLOW
    return Decision.FORBID if have >= Level.READ else Decision.HIDE


def allows(
    principal: Principal | None, permission: Permission, obj: ObjectAccess | None = None
) -> bool:
    """Shorthand: ``decide(...) is Decision.ALLOW`` (for hiding buttons and filtering)."""
    return decide(principal, permission, obj) is Decision.ALLOW
