"""Webhook and test URLs built from the base_url setting."""

from __future__ import annotations

import pytest

from backend.services.triggers.webhook_urls import hook_urls, webhook_url


@pytest.mark.parametrize(
    ("base", "suffix", "expected"),
    [
        ("http://127.0.0.1:8000", "", ("/hooks/tok", "/hooks/test/tok")),
        ("http://127.0.0.1:8000/", "", ("/hooks/tok", "/hooks/test/tok")),
        ("http://127.0.0.1:8000", "/orders/", ("/hooks/tok/orders", "/hooks/test/tok/orders")),
        ("http://127.0.0.1:8000", "a/b", ("/hooks/tok/a/b", "/hooks/test/tok/a/b")),
        ("http://127.0.0.1:8000", "/", ("/hooks/tok", "/hooks/test/tok")),
    ],
)
def test_hook_urls(base: str, suffix: str, expected: tuple[str, str]) -> None:
    live, test = hook_urls(base, "tok", suffix)
    assert (live, test) == tuple("http://127.0.0.1:8000" + p for p in expected)


def test_webhook_url_is_the_live_url() -> None:
    assert webhook_url("https://ry.example.com/", "abc") == "https://ry.example.com/hooks/abc"
