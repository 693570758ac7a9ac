"""Operator commands of ``railyard``: ``settings`` (the settings table) and
``restore-drill`` (a backup restored and checked; backend/cli/restore_drill.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def cmd_settings(args: argparse.Namespace) -> int:
    """Print every setting as a Markdown table (``--markdown``), or rewrite the generated
    table of a document (``--update FILE``); backend/settings_table.py."""
    from backend import settings_table

    if args.update:
        try:
            changed = settings_table.update_document(Path(args.update))
        except (OSError, ValueError) as exc:
            print(f"railyard: {exc}", file=sys.stderr)
            return 2
        print(f"{args.update}: {'updated' if changed else 'already up to date'}")
        return 0
    if args.markdown:
        print(settings_table.markdown_table())
        return 0
    for row in settings_table.setting_rows():
        print(f"{row.variable}\t{row.type}\t{row.default}\t{row.meaning}")
    return 0


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
    """Add ``settings`` and ``restore-drill`` to the ``railyard`` subparsers ``sub``."""
    settings = sub.add_parser(
        "settings", help="list every setting (variable, type, default, meaning)"
    )
    settings.add_argument("--markdown", action="store_true", help="print a Markdown table")
    settings.add_argument(
        "--update", metavar="FILE", help="rewrite the generated settings table of FILE"
    )
    settings.set_defaults(func=cmd_settings)
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
