"""Security regression tests (issue 29: each finding an attacker probed, reproduced and
refused). They run against real PostgreSQL and Redis with the integration fixtures."""

from tests.integration.conftest import (  # noqa: F401
    client,
    migrated_url,
    runtime,
    settings,
    sink,
    worker,
    worker_factory,
)
