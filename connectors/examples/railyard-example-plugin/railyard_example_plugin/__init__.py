"""Example Railyard plugin: ``example.reverse_text`` reverses a string (optionally per word)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from connectors import sdk


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
    actions=[reverse_text],
    icon="repeat",
)
