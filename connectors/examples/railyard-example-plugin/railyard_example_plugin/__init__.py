"""Example Railyard plugin, the running example of docs/connectors.md.

- ``example.reverse_text`` reverses a string (optionally per word);
- ``example.get_item`` fetches an item from the Example API with an API key, at the base
  URL of the deployment setting ``example.api_url`` (``RAILYARD_EXAMPLE_API_URL``).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from connectors import sdk

EXAMPLE_KEY = sdk.credential_type(
    "example.api_key", label="Example API key", kind="api_key", fields=sdk.ApiKeyFields
)


class GetItemConfig(msgspec.Struct, kw_only=True):
    credential: Annotated[str, sdk.credential_meta("example.api_key")]
    item_id: Annotated[str, msgspec.Meta(title="Item id")]


@sdk.action(
    "example.get_item",
    label="Example: get item",
    config=GetItemConfig,
    category="Example",
    icon="box",
    expression_fields=("item_id",),
)
async def get_item(config: GetItemConfig, input: Any) -> dict[str, Any]:
    """Fetch one item."""
    key = sdk.credential("credential")["api_key"]
    base = sdk.setting("example.api_url", "https://api.example.com")
    url = f"{base}/items/{config.item_id}"
    with sdk.http_errors(url, method="GET", service="Example"):  # timeouts, refused connections
        response = await sdk.http_client().get(url, headers={"X-API-Key": key})
    sdk.raise_for_status(response)  # 429/503 retry after Retry-After, 4xx fail
    return response.json()


class ReverseConfig(msgspec.Struct, kw_only=True):
    """Config of ``example.reverse_text``."""

    text: Annotated[str, msgspec.Meta(title="Text", description="What to reverse")]
    per_word: Annotated[bool, msgspec.Meta(title="Reverse each word")] = False


class ReverseOutput(msgspec.Struct):
    """Output of ``example.reverse_text``."""

    text: str
    length: int


@sdk.action(
    "example.reverse_text",
    label="Reverse text",
    config=ReverseConfig,
    category="Example",
    icon="repeat",
    expression_fields=("text",),
)
async def reverse_text(config: ReverseConfig, input: Any) -> ReverseOutput:
    """Reverse the text (or every word of it)."""
    if config.per_word:
        result = " ".join(word[::-1] for word in config.text.split(" "))
    else:
        result = config.text[::-1]
    sdk.logger().info("reversed %d characters", len(result))
    return ReverseOutput(text=result, length=len(result))


connector = sdk.Connector(
    name="example",
    label="Example",
    version="0.1.0",
    description="An example third-party plugin",
    actions=[get_item, reverse_text],
    credential_types=[EXAMPLE_KEY],
    icon="example-logo",
    icons={"example-logo": "icons/example.svg"},
)
