"""Integers beyond ``Number.MAX_SAFE_INTEGER`` cross into and out of the Code step's V8
isolate exactly (connectors/builtin/code/scripts.py), run in an isolate of this process
(:func:`~connectors.builtin.code.sandbox_process.run_job`, no sandbox process)."""

from __future__ import annotations

from typing import Any

import msgspec
from py_mini_racer import MiniRacer

from connectors.builtin.code.protocol import Job, Limits, Reply
from connectors.builtin.code.sandbox_process import run_job

LIMITS = Limits(
    cpu_ms=2000, wall_ms=20_000, heap_bytes=64 * 2**20, output_chars=100_000,
    log_lines=100, log_chars=10_000,
)  # fmt: skip

BODY = {"order_id": 12345678901234567891, "b53": 9007199254740993, "safe": 9007199254740991}


async def run(source: str, data: Any) -> Reply:
    racer = MiniRacer()
    try:
        job = Job(source, "null", msgspec.json.encode(data).decode(), LIMITS)
        return await run_job(racer, job)
    finally:
        racer.close()


async def result(source: str, data: Any) -> Any:
    reply = await run(source, data)
    assert reply.status == "ok", reply
    return msgspec.json.decode(reply.output_json)


async def test_big_ids_are_read_and_returned_unchanged() -> None:
    out = await result("return {v: data.b53, o: data.order_id, all: data}", BODY)
    assert out == {"v": 9007199254740993, "o": 12345678901234567891, "all": BODY}
    nested = {"tweets": [{"id": 1850000000000000001, "text": "12345678901234567890"}]}
    assert await result("return data", nested) == nested  # digits in a string stay a string


async def test_unsafe_integers_arrive_as_bigint_and_safe_ones_as_numbers() -> None:
    data = {**BODY, "edge": 2**53, "neg": -(2**53) - 1, "float": 1.5e300, "huge": 10**30}
    source = "return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, typeof v]))"
    assert await result(source, data) == {
        "order_id": "bigint",
        "b53": "bigint",
        "safe": "number",
        "edge": "bigint",
        "neg": "bigint",
        "float": "number",
        "huge": "bigint",
    }


async def test_bigint_arithmetic_is_returned_exact() -> None:
    source = "return [data.b53 + 1n, data.order_id * 10n, String(data.order_id), 2n ** 64n]"
    assert await result(source, BODY) == [
        9007199254740994,
        123456789012345678910,
        "12345678901234567891",
        2**64,
    ]


async def test_json_stringify_and_console_show_bigints_exactly() -> None:
    reply = await run(
        "console.log({id: data.order_id}, data.b53); return JSON.stringify(data)", BODY
    )
    assert msgspec.json.decode(reply.output_json) == msgspec.json.encode(BODY).decode()
    assert reply.logs == [("log", '{"id":12345678901234567891} 9007199254740993')]


async def test_mixing_bigint_and_number_is_the_codes_type_error() -> None:
    reply = await run("const next = data.b53 + 1;\nreturn next", BODY)
    assert reply.status == "error"
    assert reply.error_name == "TypeError"
    assert "Cannot mix BigInt and other types" in reply.message
    assert reply.line == 1


async def test_an_unsafe_number_the_code_computes_is_returned_as_js_writes_it() -> None:
    assert await result("return 2 ** 60 + 1", None) == 1152921504606847000
