"""Shared fixtures: real PostgreSQL and Redis servers (see tests/servers.py)."""

from tests.servers import *  # noqa: F403
