"""Request ids made by the request context middleware (backend/web/authentication.py)."""

from __future__ import annotations

import os
import re

from backend.web.authentication import _REQUEST_ID_RE, new_request_id


def test_request_ids_are_32_hex_digits_accepted_as_incoming_ids() -> None:
    ids = [new_request_id() for _ in range(2000)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert all(_REQUEST_ID_RE.match(i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_a_forked_child_makes_other_request_ids_than_its_parent() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write its next id and leave at once
        os.write(write, new_request_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert len(child) == 32 and child != new_request_id()
