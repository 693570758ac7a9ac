"""Reading a ``multipart/form-data`` body a local API received (shared by the OpenAPI
multipart tests)."""

from __future__ import annotations

import email.parser
import email.policy

from tests.openapi_server import Call


def parts(call: Call) -> list[tuple[str, str | None, str, bytes]]:
    """The parts of a multipart body: ``(name, filename, media type, bytes)``."""
    head = f"Content-Type: {call.headers['content-type']}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + call.body)
    assert message.is_multipart()
    out = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_param("filename", header="content-disposition")
        payload = part.get_payload(decode=True)
        out.append((str(name), filename, part.get_content_type(), payload))
    return out
