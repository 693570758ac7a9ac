"""Files & formats nodes: CSV, JSON Lines, Excel, XML, HTML, ZIP and gzip, with the
malformed and hostile inputs each must refuse with a clear step error."""

from __future__ import annotations

import base64
import gzip
import io
import zipfile
from typing import Any

import openpyxl
import pytest

from connectors import sdk
from connectors.builtin.files import archives, excel, markup, tables
from connectors.testing import ActionTestEnvironment
from tests.unit.connectors.output_schema import assert_declared_output


async def _run(action: sdk.ActionDefinition, input: Any = None, **config: Any) -> Any:
    out = await ActionTestEnvironment().run(action, config, input)
    assert_declared_output(action, out)
    return out


def _bytes(ref: dict[str, Any]) -> bytes:
    assert ref["size"] == len(base64.b64decode(ref["base64"]))
    return base64.b64decode(ref["base64"])


def _ref(data: bytes, name: str = "f.bin") -> dict[str, Any]:
    return {
        "filename": name,
        "content_type": "",
        "size": len(data),
        "base64": base64.b64encode(data).decode(),
    }


# -- CSV -------------------------------------------------------------------------------


async def test_csv_round_trip_with_quoting_and_formula_escaping() -> None:
    items = [
        {"name": "Ada, Countess", "note": 'says "hi"\ntwice', "n": 3},
        {"name": '=HYPERLINK("http://x")', "tags": ["a", "b"], "n": None},
    ]
    ref = await _run(tables.csv_write, items=items, filename="people.csv")
    assert ref["filename"] == "people.csv" and ref["content_type"] == "text/csv"
    text = _bytes(ref).decode()
    assert text.splitlines()[0] == "name,note,n,tags"
    assert "'=HYPERLINK" in text
    back = await _run(tables.csv_read, file=ref)
    assert back["columns"] == ["name", "note", "n", "tags"]
    assert back["items"][0] == {
        "name": "Ada, Countess",
        "note": 'says "hi"\ntwice',
        "n": "3",
        "tags": "",
    }
    assert back["items"][1]["tags"] == '["a", "b"]' and back["count"] == 2


async def test_csv_read_sniffs_delimiters_and_fills_short_rows() -> None:
    out = await _run(tables.csv_read, "\ufeffa;b;c\r\n1;2;3\r\n4;5\r\n")
    assert out["items"] == [{"a": "1", "b": "2", "c": "3"}, {"a": "4", "b": "5", "c": ""}]
    plain = await _run(tables.csv_read, file="x\ty\n", header=False, delimiter="\t")
    assert plain["items"] == [{"column_1": "x", "column_2": "y"}]


async def test_malformed_csv_is_a_clear_error() -> None:
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(tables.csv_read, file="a,b\n1,2\n3,4,5\n")
    assert err.value.kind == "csv_malformed" and "line 3" in err.value.message
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(tables.csv_read, file='a,b\n"open,2\n', delimiter=",")
    assert err.value.kind == "csv_malformed"
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(tables.csv_read, file=_ref(b"a\n\xff\xfe\n"))
    assert err.value.kind == "file_encoding"
    latin = await _run(
        tables.csv_read, file=_ref("a\ncafé\n".encode("latin-1")), encoding="latin-1"
    )
    assert latin["items"] == [{"a": "café"}]
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(tables.csv_read, file="a\n" + "x\n" * 11, max_rows=10)
    assert err.value.kind == "too_many_rows"
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(tables.csv_read, file="a\n" * 100, max_bytes=50)
    assert err.value.kind == "file_too_large"
    with pytest.raises(sdk.ConfigError):
        await _run(tables.csv_read, file={"base64": "not base64!"})
    with pytest.raises(sdk.ConfigError):
        await _run(tables.csv_write, items=[1, 2])


# -- JSON Lines ------------------------------------------------------------------------


async def test_jsonl_round_trip_and_bad_line() -> None:
    ref = await _run(tables.jsonl_write, {"items": [{"a": 1}, [2], "x"]})
    assert _bytes(ref) == b'{"a":1}\n[2]\n"x"\n'
    assert (await _run(tables.jsonl_read, file=ref))["items"] == [{"a": 1}, [2], "x"]
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(tables.jsonl_read, file='{"a": 1}\n\n{oops}\n')
    assert err.value.kind == "jsonl_malformed" and err.value.details == {"line": 3}


# -- Excel -----------------------------------------------------------------------------


async def test_excel_round_trip_keeps_types_and_never_writes_formulas() -> None:
    items = [
        {"name": "Ada", "born": 1815, "score": 1.5, "ok": True},
        {"name": "=1+1", "born": None, "meta": {"k": 1}},
    ]
    ref = await _run(excel.excel_write, items=items, sheet="People")
    workbook = openpyxl.load_workbook(io.BytesIO(_bytes(ref)))
    assert workbook["People"]["A3"].value == "=1+1" and workbook["People"]["A3"].data_type == "s"
    out = await _run(excel.excel_read, file=ref)
    assert out["sheet"] == "People" and out["sheets"] == ["People"]
    assert out["columns"] == ["name", "born", "score", "ok", "meta"]
    assert out["items"][0] == {"name": "Ada", "born": 1815, "score": 1.5, "ok": True, "meta": None}
    assert out["items"][1]["name"] == "=1+1" and out["items"][1]["meta"] == '{"k": 1}'


async def test_excel_dates_sheets_and_bad_workbooks() -> None:
    import datetime

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "First"
    second = workbook.create_sheet("Second")
    second.append(["when", "n"])
    second.append([datetime.datetime(2024, 3, 1, 10, 30), 2])
    buffer = io.BytesIO()
    workbook.save(buffer)
    ref = _ref(buffer.getvalue(), "book.xlsx")
    out = await _run(excel.excel_read, file=ref, sheet="Second")
    assert out["items"] == [{"when": "2024-03-01T10:30:00", "n": 2}]
    assert (await _run(excel.excel_read, file=ref, sheet="Second", header=False))["items"][0] == {
        "A": "when",
        "B": "n",
    }
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(excel.excel_read, file=ref, sheet="Nope")
    assert err.value.kind == "excel_sheet_missing" and "First, Second" in err.value.message
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(excel.excel_read, file="just text, not a workbook")
    assert err.value.kind == "excel_malformed"
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(excel.excel_read, file=_bomb_zip())
    assert err.value.kind == "file_too_large"


# -- XML and HTML ----------------------------------------------------------------------


async def test_xml_read_and_write() -> None:
    doc = (
        '<?xml version="1.0"?><order id="7"><item sku="a">2</item><item sku="b">1</item>'
        "<note>hi &amp; bye</note><empty/></order>"
    )
    out = await _run(markup.xml_read, doc)
    assert out["data"] == {
        "order": {
            "@id": "7",
            "item": [{"@sku": "a", "#text": "2"}, {"@sku": "b", "#text": "1"}],
            "note": "hi & bye",
            "empty": None,
        }
    }
    latin = '<?xml version="1.0" encoding="ISO-8859-1"?><a>caf\xe9</a>'.encode("latin-1")
    assert (await _run(markup.xml_read, file=_ref(latin)))["data"] == {"a": "caf\xe9"}
    ref = await _run(markup.xml_write, data=out["data"])
    assert (await _run(markup.xml_read, file=ref))["data"] == out["data"]
    assert b"hi &amp; bye" in _bytes(ref)


async def test_hostile_and_malformed_xml_are_refused() -> None:
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]><lolz>&lol2;</lolz>'
    )
    external = (
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>'
    )
    for doc in (laughs, external):
        with pytest.raises(sdk.NonRetryableError) as err:
            await _run(markup.xml_read, doc)
        assert err.value.kind == "xml_forbidden"
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(markup.xml_read, "<a>\n<b></a>")
    assert err.value.kind == "xml_malformed" and err.value.details["line"] == 2
    with pytest.raises(sdk.ConfigError):
        await _run(markup.xml_write, data={"a": 1, "b": 2})
    with pytest.raises(sdk.ConfigError):
        await _run(markup.xml_write, data={"bad name": 1})


async def test_html_extract_with_css_selectors() -> None:
    page = {
        "status": 200,
        "body": "<html><body><h1> Title\n here </h1><ul><li><a href='/a'>A</a></li>"
        "<li><a href='/b'>B</a></li></ul><script>alert(1)</script></body></html>",
    }
    out = await _run(
        markup.html_extract,
        page,
        extractions=[
            {"key": "title", "selector": "h1"},
            {
                "key": "links",
                "selector": "li a",
                "value": "attribute",
                "attribute": "href",
                "all": True,
            },
            {"key": "first", "selector": "li", "value": "html"},
            {"key": "none", "selector": "table td"},
        ],
    )
    assert out["data"] == {
        "title": "Title here",
        "links": ["/a", "/b"],
        "first": '<li><a href="/a">A</a></li>',
        "none": None,
    }
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(markup.html_extract, "<p>x</p>", extractions=[{"key": "k", "selector": "p[[["}])
    assert err.value.kind == "html_selector"


# -- compression -----------------------------------------------------------------------


def _bomb_zip() -> dict[str, Any]:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/zeros.bin", b"\0" * (20 * 1024 * 1024))
    return _ref(out.getvalue(), "bomb.zip")


async def test_zip_and_gzip_round_trips() -> None:
    files = [_ref(b"alpha", "a.txt"), {**_ref(b"beta", "dir/b.csv")}]
    packed = await _run(archives.compress, files=files)
    assert packed["filename"] == "archive.zip" and packed["content_type"] == "application/zip"
    out = await _run(archives.decompress, file=packed)
    assert [(f["filename"], _bytes(f), f["content_type"]) for f in out["files"]] == [
        ("a.txt", b"alpha", "text/plain"),
        ("dir/b.csv", b"beta", "text/csv"),
    ]
    gz = await _run(archives.compress, files=files[0], format="gzip")
    assert gz["filename"] == "a.txt.gz" and gzip.decompress(_bytes(gz)) == b"alpha"
    back = await _run(archives.decompress, file=gz)
    assert back["files"][0]["filename"] == "a.txt" and _bytes(back["files"][0]) == b"alpha"
    with pytest.raises(sdk.ConfigError):
        await _run(archives.compress, files=files, format="gzip")


async def test_decompression_bombs_and_corrupt_archives_are_refused() -> None:
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(archives.decompress, file=_bomb_zip())
    assert err.value.kind == "file_too_large"
    # a gzip bomb declares nothing: the bytes really unpacked are counted
    bomb = gzip.compress(b"\0" * (8 * 1024 * 1024))
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(archives.decompress, file=_ref(bomb), max_unpacked_bytes=1024 * 1024)
    assert err.value.kind == "file_too_large"
    many = io.BytesIO()
    with zipfile.ZipFile(many, "w") as archive:
        for n in range(5):
            archive.writestr(f"{n}.txt", b"x")
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(archives.decompress, file=_ref(many.getvalue()), max_files=3)
    assert err.value.kind == "file_too_large"
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(archives.decompress, file=_ref(b"plain bytes"))
    assert err.value.kind == "archive_malformed"
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(archives.decompress, file=_ref(gzip.compress(b"x" * 1000)[:-12]))
    assert err.value.kind == "archive_malformed"
