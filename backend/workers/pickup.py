"""Take due arq jobs off the queue in ONE atomic Redis script call and run them.

arq 0.28 (``arq/worker.py``) picks up each job with about a dozen commands in five round
trips: ``ZRANGEBYSCORE`` over the queue; per job ``WATCH`` of the in-progress key,
``EXISTS``, ``ZSCORE``, ``MULTI`` / ``PSETEX`` in-progress / ``EXEC`` (a lost race costs
the whole attempt, and every idle worker races for every job); ``GET`` of the job with
``INCR`` + ``EXPIRE`` of its retry counter; after the job ``DEL`` of the keys and
``ZREM``. :data:`TAKE_JOBS_LUA` does the taking in one ``EVALSHA``: Redis runs a script
atomically, so each due job is handed to exactly one caller, whole (id, score, body).

The job format and queue stay arq's (``arq:queue`` scored by due time in ms, the body
under ``arq:job:<id>`` written by arq's ``serialize_job``), so ``arq`` tooling and
``ArqRedis.enqueue_job`` keep working. What the lean pickup leaves out, and why our jobs
(``max_tries=1``, ``keep_result=0``, no abort) do not need it:

- the in-progress key (``arq:in-progress:<id>``) only stops a second worker from starting
  a job that is still in the queue; a taken job is no longer in the queue;
- the retry counter (``arq:retry:<id>``) only serves ``job_try`` for re-runs of a job kept
  in the queue after a ``Retry`` or a cancellation; with ``max_tries=1`` arq would fail
  such a second try anyway ("max 1 retries exceeded"), so there is nothing to count;
- the result key is written only when ``keep_result`` > 0 (ours is 0), and the abort set
  is read only with ``allow_abort_jobs`` (off).

What is not lost: a job taken but not run (the worker killed, Redis gone between the take
and the run) is the same as a lost job. PostgreSQL is the truth; the sweeper
(backend/services/runs/recovery.py) dispatches again a step that stayed ready, and one whose
attempt's lease ran out, and advances a run that was left without a job.

The script reads and writes job keys it builds from ``ARGV`` (not only ``KEYS``), which
standalone Redis and Sentinel set-ups allow; Redis Cluster (not supported by Railyard's
transport) would need the keys in one hash slot.
"""

from __future__ import annotations

from dataclasses import dataclass

from arq.connections import ArqRedis
from arq.constants import job_key_prefix
from redis.commands.core import AsyncScript

TAKE_JOBS_LUA = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
local taken = {}
for i = 1, #due, 2 do
  local id = due[i]
  local key = ARGV[3] .. id
  redis.call('ZREM', KEYS[1], id)
  local body = redis.call('GET', key)
  if body then
    redis.call('DEL', key)
  else
    body = ''
  end
  taken[#taken + 1] = id
  taken[#taken + 1] = due[i + 1]
  taken[#taken + 1] = body
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
taken[#taken + 1] = first[2] or ''
return taken
"""
"""``KEYS[1]``: the queue; ``ARGV``: now (ms), the most jobs to take, the job key prefix.
Returns a flat list ``id, score, body, ...`` of the jobs due by now in due order, each
removed from the queue with its body deleted (body ``''`` when it had expired), then the
score of the first job left in the queue (``''`` when none is left): the worker sleeps
until then without asking again."""


@dataclass(frozen=True, slots=True)
class TakenJob:
    """One job taken off the queue: ``job_id``, ``score`` (its due time, epoch ms) and
    ``body`` (arq's serialized job; ``b""`` when the body had expired)."""

    job_id: str
    score: int
    body: bytes


class JobTaker:
    """Takes due jobs of one queue with :data:`TAKE_JOBS_LUA` (one round trip per call).

    redis-py's registered script sends ``EVALSHA`` and falls back to ``EVAL`` once when the
    server does not know the script (first call, or after a restart or ``SCRIPT FLUSH``).
    """

    def __init__(self, pool: ArqRedis, queue_name: str) -> None:
        self.queue_name = queue_name
        self._script: AsyncScript = pool.register_script(TAKE_JOBS_LUA)

    async def take(self, now_ms: int, limit: int) -> tuple[list[TakenJob], int | None]:
        """Up to ``limit`` (> 0) jobs whose score is at most ``now_ms``, oldest first, and
        the score (epoch ms) of the first job left in the queue (``None``: queue empty).

        Jobs scored later (deferred: retry backoff, durable timers) stay queued. Raises
        ``redis.exceptions.RedisError`` / ``OSError`` when Redis cannot be reached; the
        script then either ran whole or not at all.
        """
        flat = await self._script(keys=[self.queue_name], args=[now_ms, limit, job_key_prefix])
        *jobs, first_left = flat
        taken = [
            TakenJob(_text(jobs[i]), int(float(jobs[i + 1])), bytes(jobs[i + 2]))
            for i in range(0, len(jobs), 3)
        ]
        return taken, int(float(first_left)) if first_left else None


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
