"""Transport: the Redis client and the arq dispatcher (the ``Dispatcher`` port's adapter).

Redis and arq only carry work and notices; PostgreSQL holds the truth (DESIGN.md). This
package sits below the composition root (``backend.runtime``) and the worker processes
(``backend.workers``), which both use it.
"""
