"""Retention's statements on ``events``, whose ``created_at`` index is a BRIN index
(migration 0034_events_created_brin): it finds the ranges of pages before a cutoff but
cannot return rows in order, so what needs an order reads the primary key. Events are
numbered in the order they are inserted and stamped at their insert, so id order is
creation order.

- :data:`NEWEST_EVENT`: the creation time of the ``:o``-th newest event (the count rule).
- :data:`LAST_DUE_EVENT`: the id of the last event created before ``:c``. ``offset 0``
  keeps PostgreSQL from turning ``max(id)`` into a backward walk of the primary key from
  the newest event, which would read every event kept; this reads the BRIN ranges before
  ``:c`` only.
- :data:`DELETE_DUE_EVENTS`: one batch of at most ``:n`` events created before
  ``:cutoff``, ids up to ``:last``: a bounded scan of the primary key that skips the
  entries of the batches before it (a batch through the BRIN index would read every page
  of the ranges before the cutoff again).
"""

NEWEST_EVENT = "select created_at from events order by id desc offset :o limit 1"
LAST_DUE_EVENT = "select max(id) from (select id from events where created_at < :c offset 0) due"
DELETE_DUE_EVENTS = (
    "delete from events where id in (select id from events where id <= :last"
    " and created_at < :cutoff order by id limit :n for update skip locked)"
)
