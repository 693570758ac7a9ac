"""Identity and access: who the caller is, and what they may do.

Accounts and their passwords, sign-in (throttled, local or single sign-on), login
sessions, API tokens, service accounts, groups, grants, and the database side of
authorization (:mod:`backend.auth.policy` decides). The lowest domain: every other
domain may import it; it imports none of them.

Public modules (the surface: modules outside the package import only these):

- ``access``: The database side of authorization: who the caller is (:class:`Principal`),
  the facts about an object (:class:`ObjectAccess`), and list filters, all for
  :mod:`backend.auth.policy` to decide on.
- ``accounts``: Accounts: create, sign in (throttled), change role, deactivate and
  reactivate.
- ``api_tokens``: API tokens: ``Authorization: Bearer <token>`` for scripts and service
  accounts.
- ``grants``: Grants: a level on a project, workflow or credential for a user or a group.
- ``groups``: Groups of users: create, rename, delete, members. Every change is audited
  (``group.create``, ``group.update``, ``group.delete``, ``group.member_add``,
  ``group.member_remove``). Grants to a group reach its members
  (:mod:`backend.auth.policy`).
- ``identity``: Who is signed in: the request's user as a plain value, not a database row.
- ``login_sessions``: Login sessions: server-side, one row per signed-in browser (table
  ``sessions``).
- ``login_throttle``: Login throttling and temporary lockout, per account and per client
  address.
- ``naming``: Names of administrative objects (groups, projects, service accounts).
- ``oidc``: OpenID Connect single sign-on: the protocol half (discovery, JWKS, authorization
  code with PKCE, id_token validation). Linking the verified claims to an account is
  :mod:`backend.services.identity.sso`.
- ``password_links``: One-time links to set a password: admin-initiated resets and
  invitations.
- ``passwords``: Password hashing (argon2id) and the password policy.
- ``references``: What a workflow references (credentials, and workflows it calls as
  Sub-workflow or For-each steps) and whether its author may use them.
- ``service_accounts``: Service accounts: users of kind ``service`` for automation. They
  cannot log in interactively (they have no password, and
  :func:`backend.services.identity.accounts.sign_in` refuses them) and act only through API
  tokens they own, within their role and grants. Created by admins; audited as
  ``user.create`` with ``details.kind = "service"``.
- ``sso``: Single sign-on accounts: from verified id_token claims to a Railyard user.

Private modules (imported only inside the package):

- none
"""
