"""Finding text PostgreSQL cannot store, and naming where it is."""

from __future__ import annotations

import json

import pytest

from backend.api.storable_input import might_hold_unstorable
from backend.services.runs.storable import UnstorableInput, check_storable, find_unstorable


@pytest.mark.parametrize(
    ("value", "field", "character", "in_key"),
    [
        ({"a": {"b": ["ok", "x\x00"]}}, "body.a.b[1]", "U+0000", False),
        ({"a b": "\ud800"}, 'body["a b"]', "U+D800", False),
        ({"k\udfff": 1}, "body", "U+DFFF", True),
        ("plain\x00", "body", "U+0000", False),
    ],
)
def test_the_place_and_character_are_named(
    value: object, field: str, character: str, in_key: bool
) -> None:
    found = find_unstorable(value, "body")
    assert found is not None
    assert (found.field, found.character, found.in_key) == (field, character, in_key)
    with pytest.raises(UnstorableInput, match="cannot be stored") as caught:
        check_storable(value, "body")
    assert caught.value.field == field


def test_storable_text_passes_at_any_depth() -> None:
    deep: object = "\u2028 \ufeff \U0001f600 \\u0000"
    for _ in range(50_000):
        deep = [deep]
    assert find_unstorable(deep, "body") is None
    assert find_unstorable({"n": 1, "f": 1.5, "t": True, "z": None}, "body") is None


@pytest.mark.parametrize(
    "raw", [b'{"a": "\\u0000"}', b'["\\uD83D"]', b"a\x00", b"q=%00", b"q=%ed%a0%80"]
)
def test_the_prefilter_lets_no_suspect_through(raw: bytes) -> None:
    assert might_hold_unstorable(raw)


def test_the_prefilter_skips_ordinary_bodies() -> None:
    assert not might_hold_unstorable('{"emoji": "\U0001f600", "q": "100%", "n": 0}'.encode())
    # an escaped surrogate pair is a suspect, and decodes to storable text
    raw = b'{"emoji": "\\ud83d\\ude00"}'
    assert might_hold_unstorable(raw)
    assert find_unstorable(json.loads(raw), "body") is None
