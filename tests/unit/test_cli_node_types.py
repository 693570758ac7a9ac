"""``railyard node-types`` lists the installed plugins' node types beside the built-in
ones, and names the connectors that failed to load."""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from backend.cli import main
from backend.services.connectors import discovery
from connectors import sdk


class Config(msgspec.Struct):
    text: str = ""


@sdk.action("acme.shout", label="Shout", config=Config, icon="type")
async def shout(config: Config, input: Any) -> str:
    return config.text.upper()


acme = sdk.Connector("acme", "Acme", "2.0", actions=[shout])
evil = sdk.Connector("evil", "Evil", "1.0", actions=[shout])  # acme.shout is not evil's


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real entry points plus two plugins: railyard-acme and railyard-evil."""
    found = list(entry_points(group=discovery.ENTRY_POINT_GROUP))
    for name, dist in (("acme", "railyard-acme"), ("evil", "railyard-evil")):
        ep = EntryPoint(name=name, value=f"{__name__}:{name}", group="railyard.connectors")
        found.append(ep._for(SimpleNamespace(name=dist, version="2.0")))  # type: ignore[attr-defined]
    monkeypatch.setattr(discovery, "entry_points", lambda group: found)


def test_node_types_lists_plugins_and_names_those_refused(
    installed: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["node-types"]) == 1
    out, err = capsys.readouterr()
    lines = {line.split("\t")[0]: line.split("\t") for line in out.splitlines()}
    assert lines["acme.shout"] == ["acme.shout", "1", "action", "Shout", "railyard-acme 2.0"]
    assert lines["control.if"][-1] == "core"
    assert lines["http.request"][-1].startswith("railyard ")
    assert err.strip() == (
        "railyard: not loaded: connector evil (railyard-evil 2.0) declares acme.shout, which "
        "belongs to connector acme (railyard-acme 2.0)"
    )


def test_node_types_builtin_and_markdown(
    installed: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["node-types", "--builtin"]) == 0
    out, err = capsys.readouterr()
    assert "http.request" in out and "acme.shout" not in out and err == ""
    assert main(["node-types", "--markdown"]) == 1
    out, _ = capsys.readouterr()
    assert "`acme.shout`" in out and "`http.request`" in out
