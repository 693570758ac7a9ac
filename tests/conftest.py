"""Shared fixtures: real PostgreSQL and Redis servers (see tests/servers.py), an IMAP
server (tests/imap_server.py), the message brokers of the broker trigger tests
(tests/broker_servers.py), MariaDB for the database nodes (tests/database_servers.py),
S3 and SFTP servers for the storage nodes (tests/storage_servers.py), and xdist groups
that work (tests/xdist_groups.py)."""

from tests.broker_servers import *  # noqa: F403
from tests.database_servers import *  # noqa: F403
from tests.imap_server import *  # noqa: F403
from tests.servers import *  # noqa: F403
from tests.storage_servers import *  # noqa: F403
from tests.xdist_groups import pytest_collection_modifyitems  # noqa: F401
