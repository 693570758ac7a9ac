"""Runs: starting, executing, following and reading them.

The run writer (:mod:`backend.services.runs.execution`: every run decision applied in
one place), the workers' side of an attempt (leases, cancellation, draining, recovery,
timeouts), run queries and the audited run requests of users, live watching, child
runs and large values. Triggers start runs through it; it reads no workflow use case.

Public modules (the surface: modules outside the package import only these):

- ``cancellation``: Stopping running attempts at once when their run is cancelled or times
  out.
- ``channels``: Names of the Redis pub/sub channels that announce run changes (best effort,
  not truth), and what a run-change notice says.
- ``deadlines``: Run timeouts: which runs are past their due time (``runs.deadline_at``),
  and when the next one falls due.
- ``draining``: A stopping worker's hand-back of its running attempts (graceful shutdown).
- ``execution``: Run execution use cases, split by use case around one transition helper.
- ``recovery``: Recovery: the sweeper's pass over PostgreSQL, the truth (DESIGN.md: anything
  lost in Redis, or with a worker, is recovered from PostgreSQL).
- ``run_children``: The child runs of a run (Sub-workflow, For-each), a page at a time.
- ``run_values``: Large run values as the API and pages show them, and their downloads.
- ``run_watch``: Following a run as it changes: the webhook's wait for an answer, the run
  page's live feed.
- ``runs``: Run queries (lists, the run detail with steps and attempts) and the audited run
  requests of users and API tokens (start, pause, resume, cancel, re-run, replay).
- ``storable``: Text PostgreSQL cannot store, found before it reaches the database.

Private modules (imported only inside the package):

- ``attempts``: Running one attempt of a connector action: lease heartbeats, step timeout,
  cancellation.
"""
