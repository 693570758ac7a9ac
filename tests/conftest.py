"""Shared fixtures: real PostgreSQL and Redis servers (see tests/servers.py) and an IMAP
server (tests/imap_server.py)."""

from tests.imap_server import *  # noqa: F403
from tests.servers import *  # noqa: F403
