"""Operations: what an administrator watches and what keeps the installation tidy.

Retention of run data, audit rows and workflow versions; the dashboard's figures and
the installation-wide metrics; reading the audit log; the settings overview;
scheduler leadership; the restore check. The top domain: it reads the others and no
domain imports it.

Public modules (the surface: modules outside the package import only these):

- ``audit_log``: Reading the audit log: filtered keyset pages, a streamed export, the
  before/after diff, and retention.
- ``dashboard``: The operations dashboard's figures, read from PostgreSQL (the truth) and
  Redis.
- ``leadership``: Which ``railyard scheduler`` leads, as PostgreSQL knows it.
- ``metrics_view``: Installation-wide figures for ``/metrics`` and the dashboard: queue
  depth, oldest due job, ready steps, live workers (Redis and PostgreSQL, read at scrape
  time).
- ``restore_check``: What a restored database must still hold: row counts and secrets that
  decrypt.
- ``retention``: Retention: remove run data, events, files and audit rows once the rules say
  so.
- ``settings_view``: The settings overview: every effective setting, read-only, secrets
  masked.

Private modules (imported only inside the package):

- ``retention_report``: What the retention passes did, as the dashboard shows it (the passes
  themselves: backend/services/operations/retention.py).
- ``retention_events``: Retention's statements on ``events``, whose ``created_at`` index
  is a BRIN index (ordered reads go by the primary key).
- ``retention_versions``: Retention of workflow versions (the product brief: workflow
  metadata kept 5 years).
"""
