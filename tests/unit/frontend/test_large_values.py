"""Download links of large values and uploaded files on the run page (frontend/large_values.py)."""

from __future__ import annotations

from frontend.large_values import large_values


def test_uploaded_file_descriptors_get_a_download_link() -> None:
    value = {
        "body": {"note": "hi"},
        "files": [
            {
                "field": "doc",
                "filename": "report.pdf",
                "content_type": "application/pdf",
                "size": 2048,
                "sha256": "0" * 64,
                "ref": "file:6f1d0f52-0000-4000-8000-000000000000",
            }
        ],
    }
    [found] = large_values(value)
    assert found.file is True
    assert found.path == "$.files[0]"
    assert found.url == "/api/v1/files/6f1d0f52-0000-4000-8000-000000000000"
    assert found.summary == "uploaded file report.pdf"
    assert found.size == "2 KB"


def test_large_value_previews_keep_their_download_link() -> None:
    preview = {
        "$railyard.payload": "a" * 64,
        "bytes": 5_000_000,
        "summary": "list of 10000 items",
        "preview": "[...",
        "download_url": "/api/runs/r/values/" + "a" * 64,
    }
    [found] = large_values({"out": preview})
    assert (found.file, found.path, found.size) == (False, "$.out", "5.0 MB")


def test_a_ref_that_is_not_a_file_is_no_link() -> None:
    assert large_values({"ref": "main", "filename": "x"}) == []
    assert large_values({"ref": "file:1"}) == []  # no filename: not a descriptor
