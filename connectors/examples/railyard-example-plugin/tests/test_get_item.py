from railyard_example_plugin import EXAMPLE_KEY, get_item

from connectors.testing import ActionTestEnvironment


async def test_get_item(example_api_url):
    env = ActionTestEnvironment(
        settings={"example.api_url": example_api_url},
        credentials={"k": {"type": "example.api_key", "api_key": "test-key"}},
        credential_types=[EXAMPLE_KEY],
    )
    out = await env.run(get_item, {"credential": "k", "item_id": "42"}, input=None)
    assert out["id"] == "42"
    assert env.credential_uses == [("k", "credential")]
