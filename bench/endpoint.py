"""A local HTTP/1.1 endpoint that stands in for a remote API taking a fixed time per request.

Run as its own process so its work never competes for the benchmark's interpreter lock:
``python bench/endpoint.py --sleep 0.010`` listens on 127.0.0.1 (an ephemeral port,
printed as the first line of stdout) and answers every request with ``{"ok": true}``
after ``--sleep`` seconds (``time.sleep``: precise to ~0.1 ms, where asyncio's timers
round to 1 ms). Connections are kept alive (one thread each), Nagle is off, and no more
is parsed than the header block and ``Content-Length``.

``GET /marks`` answers the ``[arrived, answered]`` ``time.perf_counter()`` pairs (seconds,
CLOCK_MONOTONIC: comparable with other processes on the machine) of every other request
so far, in arrival order, and ``DELETE /marks`` clears them.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time

_ANSWER = (
    b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 12\r\n\r\n{"ok": true}'
)


def _answer_json(body: bytes) -> bytes:
    head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


class _Server:
    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s
        self.marks: list[tuple[float, float]] = []
        self.lock = threading.Lock()

    def serve(self, listener: socket.socket) -> None:
        while True:
            conn, _ = listener.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self.connection, args=(conn,), daemon=True).start()

    def connection(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                arrived = time.perf_counter()
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buffer) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                buffer = buffer[length:]
                method, path = lines[0].split(b" ")[:2]
                if path == b"/marks":
                    with self.lock:
                        body = json.dumps(self.marks).encode()
                        if method == b"DELETE":
                            self.marks.clear()
                    conn.sendall(_answer_json(body))
                    continue
                if self.sleep_s:
                    time.sleep(self.sleep_s)
                conn.sendall(_ANSWER)
                with self.lock:
                    self.marks.append((arrived, time.perf_counter()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds per request")
    args = parser.parse_args()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    print(listener.getsockname()[1], flush=True)
    _Server(args.sleep).serve(listener)


if __name__ == "__main__":
    main()
