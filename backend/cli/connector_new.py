"""``railyard connector new NAME [--dir PATH] [--label LABEL]``: write a working connector
package from the plugin template (``connectors/template``, a copier template).

The package (``railyard-<name>``, import name ``railyard_<name>``) holds the
``railyard.connectors`` entry point, one action (``<name>.create_item``) and one polling
trigger (``<name>.new_item``) against an example API, the connector's own SVG icon, tests
that run them with ``connectors.testing`` against a local server, and a README; its tests
pass as written (``pytest`` in the new folder).

A name is refused when it is not a lower-case Python identifier (it prefixes the
connector's node types), is a core prefix (``control``, ``trigger``, ...) or is already
the name of an installed connector (a built-in one, say ``http``): Railyard would refuse
the connector at load.
"""

from __future__ import annotations

import argparse
import keyword
import sys
from pathlib import Path
from typing import Any

import connectors

TEMPLATE = Path(connectors.__file__).resolve().parent / "template"
"""The copier template of a connector package."""


class BadConnectorName(ValueError):
    """A name ``railyard connector new`` refuses; the message says why."""


def check_name(name: str) -> None:
    """Raise :class:`BadConnectorName` unless ``name`` may name a new connector: a
    lower-case Python identifier of at most 40 characters, starting with a letter, not a
    keyword, not a core prefix and not the name of an installed connector."""
    from backend.services.connectors.catalog import CONNECTOR_NAME, load_catalog

    if not (name.isidentifier() and CONNECTOR_NAME.match(name)) or keyword.iskeyword(name):
        raise BadConnectorName(
            f"connector name {name!r}: use a Python identifier in lower case (letters, digits "
            "and underscores, starting with a letter, at most 40 characters), e.g. acme_crm; "
            "it prefixes the connector's node types (acme_crm.create_item)"
        )
    catalog = load_catalog()
    if name in catalog.reserved_names():
        raise BadConnectorName(
            f"connector name {name!r} is a prefix of Railyard's core node types; choose another"
        )
    taken = catalog.connector(name)
    if taken is not None:
        raise BadConnectorName(
            f"connector name {name!r} is taken by {taken.who()}; choose another "
            "(Railyard would refuse a second connector of that name)"
        )


def new_connector(name: str, target: Path, label: str = "") -> list[Path]:
    """Render the template for connector ``name`` into ``target`` (created; it must not
    exist or be empty); returns the files written, relative to ``target``.

    Raises :class:`BadConnectorName` for a refused name (see :func:`check_name`) and
    ``FileExistsError`` when ``target`` holds files."""
    from copier import run_copy

    check_name(name)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise FileExistsError(f"{target} exists and is not an empty folder; choose another --dir")
    data: dict[str, Any] = {"name": name}
    if label:
        data["label"] = label
    run_copy(
        str(TEMPLATE),
        str(target),
        data=data,
        defaults=True,
        quiet=True,
        unsafe=False,
        overwrite=False,
    )
    return sorted(p.relative_to(target) for p in target.rglob("*") if p.is_file())


def cmd_connector_new(args: argparse.Namespace) -> int:
    """Write the package; exit 2 naming the problem for a bad name or a used folder."""
    name: str = args.name
    target = Path(args.dir or f"railyard-{name.replace('_', '-')}")
    try:
        files = new_connector(name, target, label=args.label or "")
    except (BadConnectorName, FileExistsError) as exc:
        print(f"railyard: {exc}", file=sys.stderr)
        return 2
    print(f"railyard: wrote the connector {name} to {target}:")
    for path in files:
        print(f"  {path}")
    print(
        f"next: cd {target} && pytest   (tests; needs pytest and pytest-asyncio)\n"
        f"      pip install -e {target}   (then restart Railyard: {name} is in the palette)"
    )
    return 0


def add_command(sub: Any) -> None:
    """Add ``railyard connector new`` to the ``railyard`` subparsers ``sub``."""
    connector = sub.add_parser("connector", help="write connector plugins")
    actions = connector.add_subparsers(dest="connector_command", required=True)
    new = actions.add_parser(
        "new",
        help="write a working connector package (action, polling trigger, icon, tests)",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    new.add_argument("name", help="the connector's name: a lower-case Python identifier")
    new.add_argument("--dir", help="the folder to write (default: ./railyard-<name>)")
    new.add_argument("--label", help="how the palette names it (default: from the name)")
    new.set_defaults(func=cmd_connector_new)
