"""The Code step (``code.javascript``) in its real sandbox processes: results, console
lines, errors with the user's line and column, and every limit as a clear step error
that does not hold up other steps; then a workflow run through a worker."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest

from backend.runtime import Runtime
from backend.settings import Settings
from connectors import sdk
from connectors.builtin import code
from connectors.testing import ActionTestEnvironment
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, start_manual, steps_by_id

LIMITS = {
    "code.cpu_limit_ms": 400,
    "code.wall_limit_ms": 10_000,
    "code.memory_limit_mb": 64,
    "code.max_output_chars": 1_000_000,
    "code.processes": 2,
}

# ECMAScript's own globals (ECMA-262 section 19 and the proposals V8 ships), plus the
# step's console and its two fixed entry points: nothing of a host.
ECMASCRIPT_GLOBALS = {
    "globalThis", "Infinity", "NaN", "undefined", "eval", "isFinite", "isNaN", "parseFloat",
    "parseInt", "decodeURI", "decodeURIComponent", "encodeURI", "encodeURIComponent",
    "escape", "unescape", "AggregateError", "Array", "ArrayBuffer", "BigInt", "BigInt64Array",
    "BigUint64Array", "Boolean", "DataView", "Date", "Error", "EvalError",
    "FinalizationRegistry", "Float16Array", "Float32Array", "Float64Array", "Function",
    "Int8Array", "Int16Array", "Int32Array", "Iterator", "Map", "Number", "Object", "Promise",
    "Proxy", "RangeError", "ReferenceError", "RegExp", "Set", "String", "Symbol", "SyntaxError",
    "TypeError", "Uint8Array", "Uint8ClampedArray", "Uint16Array", "Uint32Array", "URIError",
    "WeakMap", "WeakRef", "WeakSet", "JSON", "Math", "Reflect", "Intl", "Temporal",
    "SuppressedError", "DisposableStack", "AsyncDisposableStack",
    "console", "__railyard_define", "__railyard_call", "__railyard_logs",
    # mini-racer's timer globals are `var`s that cannot be deleted: left undefined
    "setTimeout", "clearTimeout", "__timer_manager",
}  # fmt: skip


def env(**settings: Any) -> ActionTestEnvironment:
    return ActionTestEnvironment(settings={**LIMITS, **settings})


async def run(source: str, input: Any = None, **settings: Any) -> Any:
    return await env(**settings).run(code.javascript, {"code": source}, input)


async def failure(source: str, input: Any = None, **settings: Any) -> sdk.ActionError:
    with pytest.raises(sdk.ActionError) as err:
        await run(source, input, **settings)
    assert not err.value.retryable
    return err.value


async def test_returns_the_result_and_the_console_lines() -> None:
    out = await env().run(
        code.javascript,
        {
            "code": "console.log('n =', input.length, {a: 1});\n"
            "console.warn('careful');\n"
            "return input.map((x) => ({ x, double: x * data.factor }));",
            "data": {"factor": 2},
        },
        [1, 2],
    )
    assert out == {
        "result": [{"x": 1, "double": 2}, {"x": 2, "double": 4}],
        "logs": [
            {"level": "log", "message": 'n = 2 {"a":1}'},
            {"level": "warn", "message": "careful"},
        ],
        "dropped_logs": 0,
    }
    assert (await run("let x = 1;"))["result"] is None  # no return: null


async def test_console_lines_are_capped() -> None:
    source = "for (let i = 0; i < 50; i++) console.log(i); return 1"
    out = await run(source, **{"code.log_lines": 10})
    assert [line["message"] for line in out["logs"]] == [str(i) for i in range(10)]
    assert out["dropped_logs"] == 40


async def test_an_infinite_loop_stops_at_the_cpu_limit_with_its_console_lines() -> None:
    err = await failure("console.log('before');\nwhile (true) {}")
    assert err.kind == "code_cpu_limit"
    assert "400 ms of CPU time" in err.message
    assert err.details["logs"] == [{"level": "log", "message": "before"}]
    assert err.details["cpu_ms"] >= 400


async def test_a_memory_bomb_stops_at_the_heap_limit() -> None:
    err = await failure("const a = [];\nwhile (true) a.push(new Array(100000).fill(1.5));")
    assert err.kind == "code_memory_limit"
    assert "64 MiB" in err.message


async def test_memory_outside_the_heap_is_capped_too() -> None:
    """ArrayBuffer contents are not V8 heap: the process's RLIMIT_DATA refuses them, as
    a RangeError in the script or, when the heap then has no room left to grow, as the
    end of the process; either way the step fails on its memory limit, and the next step
    runs in a fresh process. The CPU limit is 5 s here, so only memory can stop it:
    filling the pages is CPU (kernel) time, which on a loaded machine once passed the
    suite's 400 ms first."""
    for size_mb in (64, 30):
        err = await failure(
            "const kept = [];\nfor (let i = 0; i < 100; i++)\n"
            f"  kept.push(new Uint8Array({size_mb} * 1024 * 1024).fill(1));",
            **{"code.cpu_limit_ms": 5000},
        )
        assert err.kind == "code_memory_limit"
        assert "64 MiB" in err.message
    assert (await run("return 7"))["result"] == 7


async def test_a_huge_output_is_refused() -> None:
    err = await failure("return 'x'.repeat(2000000)")
    assert err.kind == "code_output_too_large"
    assert "2000002 characters of JSON, over the limit of 1000000" in err.message
    err = await failure("let s = 'x';\nwhile (true) s += s;")  # past V8's longest string
    assert err.kind == "code_error"
    assert "Invalid string length" in err.message


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("return fetch('http://127.0.0.1/')", "fetch"),
        ("const fs = require('fs');", "require"),
        ("return process.env", "process"),
        ("return Deno.env.toObject()", "Deno"),
        ("return new XMLHttpRequest()", "XMLHttpRequest"),
    ],
)
async def test_host_apis_do_not_exist(source: str, name: str) -> None:
    err = await failure(f"// reach the host\n{source}")
    assert err.kind == "code_error"
    assert err.message.startswith(f"ReferenceError: {name} is not defined (line 2, column")
    assert err.details["line"] == 2


async def test_the_global_object_holds_ecmascript_only() -> None:
    out = await run(
        "const names = Object.getOwnPropertyNames(globalThis);\n"
        "const sloppy = Function('return this')();\n"
        "return { names, same: sloppy === globalThis,\n"
        "  timers: [typeof setTimeout, typeof clearTimeout, typeof __timer_manager],\n"
        "  gone: [typeof WebAssembly, typeof SharedArrayBuffer, typeof Atomics],\n"
        "  console: Object.keys(console) };"
    )
    result = out["result"]
    assert set(result["names"]) <= ECMASCRIPT_GLOBALS, set(result["names"]) - ECMASCRIPT_GLOBALS
    assert result["same"] is True
    assert result["timers"] == ["undefined"] * 3
    assert result["gone"] == ["undefined"] * 3
    assert result["console"] == ["log", "info", "warn", "error", "debug"]


async def test_nothing_of_one_run_is_seen_by_the_next() -> None:
    await run("globalThis.secret = input; Object.prototype.leak = input; return 1", "run-1")
    out = await run("return [typeof secret, ({}).leak === undefined]", "run-2")
    assert out["result"] == ["undefined", True]


async def test_a_syntax_error_names_the_line_and_column() -> None:
    err = await failure("const a = 1;\nconst b = ;\n")
    assert err.kind == "code_syntax_error"
    assert err.message == "SyntaxError: Unexpected token ';' (line 2, column 11)"
    assert (err.details["line"], err.details["column"]) == (2, 11)


async def test_a_thrown_error_names_the_line_column_and_stack() -> None:
    err = await failure(
        "function total(rows) {\n  return rows.reduce((s, r) => s + r.price.amount, 0);\n}\n"
        "console.log('summing');\nreturn total(input);",
        [{"price": {"amount": 1}}, {}],
    )
    assert err.kind == "code_error"
    assert err.message == (
        "TypeError: Cannot read properties of undefined (reading 'amount') (line 2, column 44)"
    )
    assert err.details["stack"].splitlines()[-1] == "at code.js:5:8"
    assert err.details["logs"] == [{"level": "log", "message": "summing"}]
    err = await failure("throw 'plain text';")
    assert err.message == "Error: plain text"


async def test_a_promise_is_refused() -> None:
    err = await failure("return (async () => 1)()")
    assert "synchronous" in err.message


async def test_a_looping_step_holds_up_no_other_step() -> None:
    """Two processes: while one step loops until its CPU limit, ten other steps run in
    the other process and all finish before the loop is stopped."""
    slow = {"code.cpu_limit_ms": 1500, "code.wall_limit_ms": 120_000}
    looping = asyncio.create_task(run("while (true) {}", **slow))
    await asyncio.sleep(0.2)
    for k in range(10):
        assert (await run("return input * 2", k))["result"] == k * 2
    assert not looping.done()
    with pytest.raises(sdk.ActionError) as err:
        await looping
    assert err.value.kind == "code_cpu_limit"


async def test_a_cancelled_step_kills_its_process() -> None:
    """A step cancelled mid-run (its run cancelled, its step timeout) ends its process."""
    looping = asyncio.create_task(run("while (true) {}", **{"code.cpu_limit_ms": 30000}))
    await asyncio.sleep(0.5)
    before = _sandbox_processes()
    assert before
    looping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await looping
    for _ in range(100):
        if len(_sandbox_processes()) < len(before):
            break
        await asyncio.sleep(0.05)
    assert len(_sandbox_processes()) < len(before)


def _sandbox_processes() -> list[int]:
    """Pids of this test process's live sandbox children."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                argv = cmdline.read()
        except OSError:
            continue
        state, parent = fields[0], int(fields[1])
        if parent == os.getpid() and state != "Z" and b"sandbox_process" in argv:
            pids.append(int(entry))
    return pids


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("code.cpu_limit_ms", "fast", "setting code.cpu_limit_ms must be a whole number"),
        ("code.memory_limit_mb", -1, "setting code.memory_limit_mb must not be negative"),
        ("code.max_output_chars", 0, "setting code.max_output_chars must be at least 1"),
    ],
)
async def test_bad_settings_are_named(name: str, value: Any, message: str) -> None:
    with pytest.raises(sdk.ConfigError, match=message):
        await run("return 1", **{name: value})


# -- through a workflow ------------------------------------------------------------------


@pytest.fixture(scope="module")
def settings(settings: Settings) -> Iterator[Settings]:
    """The session settings with the Code step's limits of this module."""
    extra = {name.replace(".", "_"): value for name, value in LIMITS.items()}
    yield msgspec.structs.replace(settings, extra={**settings.extra, **extra})


@pytest.mark.integration
async def test_a_workflow_runs_code_steps_and_records_their_errors(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node(
                    "shape",
                    "code.javascript",
                    code="console.log('rows', input.rows.length);\n"
                    "return input.rows.map((r) => ({ ...r, total: r.qty * r.price }));",
                ),
                node("loop", "code.javascript", code="while (true) {}"),
            ],
            [edge("start", "shape"), edge("shape", "loop")],
        ),
    )
    row = {"id": 12345678901234567891, "qty": 2, "price": 3}  # an id beyond 2^53: a BigInt
    run_id = await start_manual(client, wf, {"rows": [row]})
    assert await wait_for_run(runtime, run_id, timeout=30) == "failed"
    steps = steps_by_id(await run_detail(client, run_id))
    assert steps["shape"]["output"] == {
        "result": [{**row, "total": 6}],
        "logs": [{"level": "log", "message": "rows 1"}],
        "dropped_logs": 0,
    }
    assert steps["loop"]["error"]["kind"] == "code_cpu_limit"
    assert len(steps["loop"]["attempts"]) == 1  # never retried
