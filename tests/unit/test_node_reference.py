"""docs/node-types.md is generated from the node types' specs
(backend/services/connectors/node_reference.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.cli import main
from backend.generated_docs import generated_part
from backend.services.connectors.catalog import AppCatalog, load_catalog
from backend.services.connectors.node_reference import (
    BEGIN,
    END,
    builtin_catalog,
    config_rows,
    markdown_reference,
    type_words,
)
from connectors import sdk

NODE_TYPES_PAGE = Path(__file__).resolve().parents[2] / "docs" / "node-types.md"


def test_node_types_md_is_generated_from_the_specs() -> None:
    documented = generated_part(NODE_TYPES_PAGE.read_text(encoding="utf-8"), BEGIN, END)
    assert documented is not None, f"docs/node-types.md lacks the {BEGIN!r} ... {END!r} part"
    assert documented == markdown_reference(), (
        "docs/node-types.md differs from the node types' specs; regenerate it with"
        " `.venv/bin/railyard node-types --update docs/node-types.md`"
    )


def test_every_built_in_node_type_and_config_key_is_described() -> None:
    text = markdown_reference()
    for spec in builtin_catalog().all():
        assert f"### {spec.label} (`{spec.type}`)" in text
        for key, words, _, _, meaning in config_rows(spec):
            assert words and meaning, f"{spec.type} config {key} needs a title or description"
    template = next(s for s in builtin_catalog().all() if s.type == "data.template")
    rows = {row[0]: row for row in config_rows(template)}
    assert rows["`template`"][1:3] == ("text", "yes")
    assert "takes an `=expression`" in rows["`data`"][4]


def test_only_the_built_in_connectors_are_listed() -> None:
    built_in = builtin_catalog()
    assert {c.name for c in built_in.connectors} == {
        "airtable",
        "amqp",
        "code",
        "data",
        "discord",
        "email",
        "files",
        "github",
        "http",
        "hubspot",
        "imap",
        "jira",
        "mqtt",
        "mysql",
        "nats",
        "notion",
        "postgres",
        "redis",
        "redis_streams",
        "rss",
        "s3",
        "sftp",
        "slack",
        "stripe",
        "teams",
        "telegram",
        "twilio",
        "webhook",
    }
    everything = {spec.type for spec in load_catalog().all()}
    assert {spec.type for spec in built_in.all()} <= everything


def test_a_connectors_node_type_is_rendered_from_its_config_type() -> None:
    import msgspec

    class Config(msgspec.Struct):
        channel: str = msgspec.field(default="general")
        retries: int = 2

    @sdk.action("demo.ping", label="Ping", config=Config, description="Pings a channel.")
    async def ping(config: Config, input: object) -> dict[str, str]:
        return {"ok": "yes"}

    catalog = AppCatalog(nodes=builtin_catalog().nodes)
    catalog.add_connector(sdk.Connector(name="demo", label="Demo", version="1", actions=[ping]))
    text = markdown_reference(catalog)
    assert "| [Ping](#ping-demoping) | `demo.ping` | action | Pings a channel. |" in text
    assert '| `channel` | text |  | `"general"` |' in text
    assert "| `retries` | integer |  | `2` |" in text


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "integer", "minimum": 0}, "integer >= 0"),
        ({"type": "number", "exclusiveMinimum": 0, "maximum": 60}, "number > 0, <= 60"),
        ({"enum": ["a", "b"]}, 'one of `"a"`, `"b"`'),
        ({"type": ["integer", "null"]}, "integer or `null`"),
        (
            {"type": "array", "items": {"type": "string", "format": "email"}},
            "list of email address",
        ),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "object of name -> text"),
        (
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"field": {"type": "string"}, "n": {"type": "integer"}},
                    "required": ["field"],
                },
            },
            "list of objects with `field` (text), `n`? (integer)",
        ),
        ({}, "any JSON value"),
    ],
)
def test_schemas_in_words(schema: dict[str, object], words: str) -> None:
    assert type_words(schema) == words


def test_the_command_rewrites_only_the_generated_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "nodes.md"
    page.write_text(f"# Mine\n\nkept\n\n{BEGIN}\nold\n{END}\n\nalso kept\n", encoding="utf-8")
    assert main(["node-types", "--update", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Mine\n\nkept\n\n") and text.endswith(f"{END}\n\nalso kept\n")
    assert generated_part(text, BEGIN, END) == markdown_reference()
    assert main(["node-types", "--update", str(page)]) == 0
    assert "already up to date" in capsys.readouterr().out
    (tmp_path / "plain.md").write_text("# no markers\n", encoding="utf-8")
    assert main(["node-types", "--update", str(tmp_path / "plain.md")]) == 2
    assert "has no part between" in capsys.readouterr().err


def test_a_blank_enum_value_is_escaped_in_the_label_note() -> None:
    text = markdown_reference()
    assert "`\\t`: Tab" in text
    assert "` `: Tab" not in text
