"""Large values by reference: which parts are stored, references, substitution (no I/O)."""

from __future__ import annotations

import hashlib
import importlib
import sys
from typing import Any

import msgspec

from backend.db.payloads import (
    ESCAPE,
    MARKER,
    Externalizer,
    Unresolved,
    preview_of,
    reference_of,
    references,
    substitute,
    unescaped,
)

LIMIT = 1024


def ref_of(value: Any) -> dict[str, Any]:
    data = msgspec.json.encode(value)
    return {MARKER: hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def test_small_values_stay_inline_and_are_the_same_object() -> None:
    ext = Externalizer(LIMIT)
    value = {"a": [1, 2, 3], "b": "x" * 100}
    assert ext.value(value) is value
    assert ext.payloads == {}


def test_the_large_part_is_stored_and_the_rest_stays_inline() -> None:
    ext = Externalizer(LIMIT)
    rows = [{"i": i, "text": "t" * 50} for i in range(100)]
    stored = ext.value({"body": {"records": rows, "source": "crm"}, "method": "POST"})
    assert stored == {"body": {"records": ref_of(rows), "source": "crm"}, "method": "POST"}
    (payload,) = ext.payloads.values()
    assert payload.data == msgspec.json.encode(rows)
    assert payload.summary == "list of 100 items"
    assert payload.preview.startswith('[{"i":0,') and payload.preview.endswith("…")


def test_the_same_content_is_one_payload() -> None:
    ext = Externalizer(LIMIT)
    big = "x" * 5000
    assert ext.value({"a": big}) == {"a": ref_of(big)}
    assert ext.value([big, big]) == [ref_of(big), ref_of(big)]
    assert len(ext.payloads) == 1


def test_a_container_of_many_small_parts_is_stored_whole() -> None:
    ext = Externalizer(LIMIT)
    many = list(range(2000))
    assert ext.value(many) == ref_of(many)


def test_user_data_with_the_marker_key_is_never_stored_inline() -> None:
    ext = Externalizer(LIMIT)
    tricky = {MARKER: "not a reference", "bytes": 1}
    stored = ext.value({"x": tricky})
    assert stored == {"x": ref_of({ESCAPE: tricky})}  # escaped, then stored by reference
    table = {d: msgspec.json.decode(p.data) for d, p in ext.payloads.items()}
    assert unescaped(substitute(stored, table)) == {"x": tricky}


def test_a_forged_reference_in_user_data_is_data_at_any_depth() -> None:
    """A caller's body naming someone's large value by the engine's own wrapper: stored
    escaped, never followed, given back as sent (issue 29, finding 2)."""
    forged = {MARKER: "a" * 64, "bytes": 300_000}
    deep: Any = forged
    for _ in range(40):  # past the depth where parts are stored whole
        deep = [deep]
    for body in ({"x": forged}, {"y": [{"z": forged}]}, deep, {ESCAPE: 1, "k": forged}):
        ext = Externalizer(LIMIT)
        stored = ext.value(body)
        table = {d: msgspec.json.decode(p.data) for d, p in ext.payloads.items()}
        assert "a" * 64 not in references(stored, set())
        for value in table.values():
            assert "a" * 64 not in references(value, set())
        for d, v in table.items():
            table[d] = substitute(v, table)
        assert unescaped(substitute(stored, table)) == body
    assert reference_of(forged) == "a" * 64  # the shape itself is a reference's
    assert reference_of({MARKER: "a" * 64, "bytes": 1, "more": 2}) is None
    assert reference_of({MARKER: "not hex", "bytes": 1}) is None


def test_references_and_substitute_put_values_back() -> None:
    ext = Externalizer(LIMIT)
    inner = ["y" * 2000]
    outer = {"inner": inner, "pad": ["z" * 300] * 5}
    stored = ext.value({"v": outer})
    found = references(stored, set())
    table = {d: msgspec.json.decode(p.data) for d, p in ext.payloads.items()}
    assert found <= table.keys()
    for d, v in table.items():
        table[d] = substitute(v, table)
    assert substitute(stored, table) == {"v": outer}


def test_preview_is_bounded() -> None:
    assert preview_of(b'"' + b"a" * 5000 + b'"') == '"' + "a" * 999 + "…"
    assert preview_of(b"[1,2]") == "[1,2]"


def test_deeply_nested_values_are_handled_without_recursion_errors() -> None:
    # every process that stores values (API, worker, scheduler) loads the expression
    # engine, whose jsonata raises the recursion limit to 10,000 on import
    # (jsonata/jsonata.py, Jsonata._static_initializer); this test alone must not depend
    # on another test having imported it first
    importlib.import_module("backend.engine.expressions")
    assert sys.getrecursionlimit() >= 10_000
    deep: Any = ["x" * 2000]
    for _ in range(900):
        deep = [deep]
    ext = Externalizer(LIMIT)
    stored = ext.value({"deep": deep})
    table = {d: msgspec.json.decode(p.data) for d, p in ext.payloads.items()}
    assert references(stored, set()) <= table.keys()
    assert references(deep, set()) == set()
    for d, v in table.items():
        table[d] = substitute(v, table)
    assert substitute(stored, table) == {"deep": deep}


def test_an_unresolved_reference_is_written_as_it_is_and_never_followed() -> None:
    parent_input = {"items": [{"n": i, "pad": "p" * 40} for i in range(100)]}
    ref = ref_of(parent_input)
    child_input = {"item": {"n": 3}, "index": 3, "input": Unresolved(ref)}
    # written back as the same reference: not escaped as user data, no payload to store
    for known in (None, {id(parent_input): (parent_input, ref[MARKER])}):
        ext = Externalizer(LIMIT, known=known)
        stored = ext.value(child_input)
        assert stored == {"item": {"n": 3}, "index": 3, "input": ref}
        assert ESCAPE not in msgspec.json.encode(stored).decode()
        assert ext.payloads == {}
        assert ext.rows([{"input": child_input}], ["input"]) == [{"input": stored}]
    # resolving passes it by: nothing to read, and it stays the unread reference
    assert references(child_input, set()) == set()
    assert substitute(child_input, {ref[MARKER]: parent_input})["input"] is child_input["input"]
    # a plain reference beside it is still followed
    beside = {"unread": Unresolved(ref), "read": dict(ref)}
    assert references(beside, set()) == {ref[MARKER]}
    assert substitute(beside, {ref[MARKER]: parent_input})["read"] is parent_input


def test_a_copy_of_a_value_read_by_reference_is_written_as_its_reference() -> None:
    items = [{"n": i, "pad": "p" * 40} for i in range(100)]
    ref = ref_of(items)
    known = {id(items): (items, ref[MARKER])}
    # a For-each's items: a copy of the list its expression read, beside other fields;
    # the limit is high, so only the match by content stores it by reference
    data = {"items": [dict(item) for item in items], "concurrency": 20}
    ext = Externalizer(1024 * 1024, known=known)
    assert ext.value(data) == {"items": ref, "concurrency": 20}
    assert ext.payloads == {}
    # a different list, or one that is not a member, is written as it is
    other = {"items": [*items, {"n": 100}]}
    assert Externalizer(1024 * 1024, known=known).value(other) == other
    assert Externalizer(1024 * 1024, known=known).value(list(items)) == items
    # text with a reserved key never matches a payload's: a forged reference stays data
    forged = {"items": ref}
    nested = ref_of(forged)
    wrapper = {"x": {"items": dict(ref)}, "pad": "p" * 2000}
    ext = Externalizer(1024 * 1024, known={id(forged): (forged, nested[MARKER])})
    assert reference_of(ext.value(wrapper)["x"]) is None
