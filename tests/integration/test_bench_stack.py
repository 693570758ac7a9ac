"""The one embedded stack of the benches (bench/cluster.py's Stack): started, migrated,
its environment and processes, and nothing left behind."""

from __future__ import annotations

import pytest

from bench.cluster import Stack
from bench.common import postmaster_pid

pytestmark = pytest.mark.integration


def test_a_stack_without_redis_is_migrated_and_removed_on_exit() -> None:
    with Stack("railyard-test-stack-", redis=False, fast=True, env={"X_BENCH": "1"}) as stack:
        data = stack.data
        assert stack.env["DATABASE_URL"] == stack.pg.url
        assert stack.env["X_BENCH"] == "1"
        assert stack.env["RAILYARD_ACCESS_LOG"] == "0"
        assert stack.env["RAILYARD_ENCRYPTION_KEY"]
        assert stack.pg.psql("select count(*) from runs", database=stack.pg.database).strip() == "0"
        assert stack.postmaster_pid() == postmaster_pid(stack.pg) > 0
        with pytest.raises(RuntimeError, match="without Redis"):
            _ = stack.redis_url
        assert stack.settings().database_url == stack.pg.url
        probe = stack.spawn("probe", "--help")
        assert stack.kinds[probe.pid] == "probe"
        assert probe.wait(60) == 0
        assert (data / "logs" / "probe-0.log").read_text()
    assert not data.exists()
    assert not stack.procs and not stack.kinds


def test_a_stack_that_fails_to_start_cleans_up() -> None:
    stack = Stack("railyard-test-stack-", redis=False, fast=True)
    stack.pg.max_connections = -5  # PostgreSQL refuses to start
    with pytest.raises(Exception), stack:  # noqa: B017 (whatever the server's error is)
        pass
    assert not stack.data.exists()
