"""The threaded HTTP server every local stand-in for a third-party API serves with."""

from __future__ import annotations

from http.server import ThreadingHTTPServer


class LocalHTTPServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` with a listen backlog of a real server's size.

    :mod:`socketserver` listens with a backlog of 5 (``request_queue_size``). A worker
    opening a hundred connections at once to a stand-in API on a loaded machine overflows
    it: the kernel drops handshakes (``ListenOverflows`` in ``nstat``) and some calls fail
    with a reset the product rightly reports as a failed step, which a real API, listening
    with a backlog of 511 (nginx) or 2048 (uvicorn), would never have caused. 1024 here;
    Linux caps it at ``net.core.somaxconn`` (4096 by default since 5.4).
    """

    request_queue_size = 1024
    daemon_threads = True
