"""Operator commands of ``railyard``: ``settings`` (the settings table), ``node-types``
(the node-type reference) and ``restore-drill`` (a backup restored and checked;
backend/cli/restore_drill.py)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def _generated_doc_command(
    args: argparse.Namespace,
    markdown: Callable[[], str],
    update: Callable[[Path], bool],
    lines: Callable[[], Iterable[str]],
) -> int:
    """A command printing a generated part of the docs: ``--update FILE`` rewrites it in
    FILE with ``update`` (exit 2 naming the problem when FILE lacks its markers or cannot
    be written), ``--markdown`` prints ``markdown()``, else ``lines()`` one by one."""
    if args.update:
        try:
            changed = update(Path(args.update))
        except (OSError, ValueError) as exc:
            print(f"railyard: {exc}", file=sys.stderr)
            return 2
        print(f"{args.update}: {'updated' if changed else 'already up to date'}")
        return 0
    if args.markdown:
        print(markdown())
        return 0
    for line in lines():
        print(line)
    return 0


def cmd_settings(args: argparse.Namespace) -> int:
    """Print every setting as a Markdown table (``--markdown``), or rewrite the generated
    table of a document (``--update FILE``); backend/settings_table.py."""
    from backend import settings_table

    return _generated_doc_command(
        args,
        settings_table.markdown_table,
        settings_table.update_document,
        lambda: (
            f"{row.variable}\t{row.type}\t{row.default}\t{row.meaning}"
            for row in settings_table.setting_rows()
        ),
    )


def cmd_node_types(args: argparse.Namespace) -> int:
    """List every node type, the installed plugins' included, a line each (type, version,
    kind, label, where it comes from: ``core`` or the connector's distribution), or print
    their reference as Markdown (``--markdown``); ``--builtin`` keeps to the node types
    shipped with Railyard. ``--update FILE`` rewrites the generated part of a document
    with the built-in reference (what docs/node-types.md holds);
    backend/services/connectors/node_reference.py.

    Connectors that failed to load are named on stderr, and the exit code is then 1."""
    from backend.generated_docs import update_generated
    from backend.services.connectors import node_reference as ref
    from backend.services.connectors.catalog import load_catalog

    if args.update:
        return _generated_doc_command(
            args,
            ref.markdown_reference,
            lambda path: update_generated(path, ref.BEGIN, ref.END, ref.markdown_reference()),
            list,
        )
    quiet = logging.getLogger("backend.services.connectors.catalog")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # the errors are printed below, once, not logged too
    try:
        catalog = ref.builtin_catalog() if args.builtin else load_catalog()
    finally:
        quiet.setLevel(level)
    if args.markdown:
        print(ref.markdown_reference(catalog))
    else:
        sources = {info.name: info.source or "extra" for info in catalog.connectors}
        for spec in catalog.all():
            source = sources.get(spec.connector, "core")
            print(f"{spec.type}\t{spec.version}\t{spec.kind}\t{spec.label}\t{source}")
    for error in catalog.errors:
        print(f"railyard: not loaded: {error}", file=sys.stderr)
    return 1 if catalog.errors else 0


def cmd_restore_drill(args: argparse.Namespace) -> int:
    """Run the restore drill (backend/cli/restore_drill.py); exit 0 when it passed."""
    from backend.cli.restore_drill import DrillError, run_drill
    from backend.settings import load_settings

    settings = load_settings()
    settings.require_services(redis=False)
    try:
        report = run_drill(
            settings,
            args.target_url,
            dump_path=Path(args.dump) if args.dump else None,
            keep=args.keep,
            bin_dir=Path(args.pg_bin) if args.pg_bin else None,
        )
    except DrillError as exc:
        print(f"railyard: restore drill failed: {exc}", file=sys.stderr)
        return 1
    for line in report.lines():
        print(line)
    return 0 if report.passed else 1


def add_commands(sub: Any) -> None:
    """Add ``settings``, ``node-types`` and ``restore-drill`` to the ``railyard``
    subparsers ``sub``."""
    generated = (
        ("settings", "list every setting (variable, type, default, meaning)", cmd_settings),
        (
            "node-types",
            "list every node type, installed plugins included (--markdown: the reference"
            " of their config)",
            cmd_node_types,
        ),
    )
    for name, about, func in generated:
        command = sub.add_parser(name, help=about)
        command.add_argument("--markdown", action="store_true", help="print it as Markdown")
        command.add_argument(
            "--update", metavar="FILE", help="rewrite the generated part of FILE with it"
        )
        command.set_defaults(func=func)
        if name == "node-types":
            command.add_argument(
                "--builtin",
                action="store_true",
                help="only the node types shipped with Railyard (--update always is)",
            )
    drill = sub.add_parser(
        "restore-drill",
        help="dump DATABASE_URL, restore it into a fresh database and check it",
        description="Take a pg_dump (custom format) of DATABASE_URL in one snapshot, restore"
        " it into the fresh database --target-url (created; refused when it exists), bring"
        " it to the latest migration, and check that workflows, versions, runs and"
        " credentials match the snapshot and that every credential and webhook secret"
        " decrypts with RAILYARD_ENCRYPTION_KEY. Exit 0 when every check passed.",
    )
    drill.add_argument(
        "--target-url", required=True, help="postgresql://user:pass@host:5432/<new database>"
    )
    drill.add_argument("--dump", help="keep the dump at this path (default: a temporary file)")
    drill.add_argument(
        "--keep", action="store_true", help="keep the restored database (default: drop it)"
    )
    drill.add_argument(
        "--pg-bin", help="folder of pg_dump and pg_restore (default: PATH, else embedded)"
    )
    drill.set_defaults(func=cmd_restore_drill)
