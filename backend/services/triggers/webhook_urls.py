"""Public URLs of a workflow's webhook (``/hooks/<token>``) and of its test endpoint
(``/hooks/test/<token>``), built from the ``base_url`` setting."""

from __future__ import annotations


def hook_urls(base_url: str, token: str, suffix: str = "") -> tuple[str, str]:
    """``(webhook URL, test URL)`` of ``token`` under ``base_url`` (e.g.
    ``https://railyard.example.com``), with an optional path ``suffix`` (slashes around it
    are ignored; an empty suffix adds nothing)."""
    base = base_url.rstrip("/")
    tail = f"/{suffix.strip('/')}" if suffix.strip("/") else ""
    return f"{base}/hooks/{token}{tail}", f"{base}/hooks/test/{token}{tail}"


def webhook_url(base_url: str, token: str) -> str:
    """The webhook URL of ``token`` under ``base_url`` (see :func:`hook_urls`)."""
    return hook_urls(base_url, token)[0]
