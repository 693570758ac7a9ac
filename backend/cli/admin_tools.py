"""One-off administration commands: ``railyard create-user`` and ``railyard rotate-key``."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import sys
from pathlib import Path
from typing import Any

from backend.engine.unstorable import find_unstorable
from backend.settings import Settings, SettingsError, load_settings

DEV_BASE_URL_FILE = "base-url.txt"
"""The file of a ``railyard dev`` data directory holding the URL its server answers at."""


def refuse_unstorable(**values: str) -> None:
    """Raise :class:`SettingsError` naming the first of ``values`` (name -> text) holding a
    character PostgreSQL cannot store (U+0000, a lone surrogate: invalid UTF-8 in argv or
    stdin arrives as one); the value itself is not echoed (it may not be printable)."""
    for name, value in values.items():
        found = find_unstorable(value, name)
        if found is not None:
            raise SettingsError(f"no account created: {name}: {found.value_message}")


def sign_in_url(settings: Settings, data_dir: Path | None) -> str:
    """Where to sign in, for ``create-user``'s last line: ``RAILYARD_BASE_URL`` when set,
    else the URL the ``railyard dev`` server of ``data_dir`` recorded (its port), else the
    default base URL marked as such."""
    login = f"{settings.base_url.rstrip('/')}/login"
    if os.environ.get("RAILYARD_BASE_URL"):
        return login
    recorded = data_dir / DEV_BASE_URL_FILE if data_dir is not None else None
    if recorded is not None and recorded.exists():
        return f"{recorded.read_text(encoding='utf-8').strip().rstrip('/')}/login"
    return f"{login} (the default RAILYARD_BASE_URL)"


def read_new_password(args: argparse.Namespace) -> str:
    """The new account's password: one line of stdin with ``--password-stdin``, else asked
    twice at a terminal prompt (getpass; never from the command line). Raises
    :class:`SettingsError` when they differ, stdin is empty or no terminal is attached."""
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            raise SettingsError("no password on stdin")
        return password
    if not sys.stdin.isatty():
        raise SettingsError("no terminal to ask for the password: pass --password-stdin")
    first = getpass.getpass(f"Password for {args.email}: ")
    if first != getpass.getpass("Repeat the password: "):
        raise SettingsError("the passwords differ; nothing was created")
    return first


def settings_for_tool(data_dir: str) -> tuple[Settings, Any]:
    """Settings of a one-off command (``create-user``): ``DATABASE_URL`` when set, else the
    embedded PostgreSQL of the ``railyard dev`` data directory ``data_dir`` (started when it
    is not running, reused when it is, migrated). Returns the settings and the embedded
    server (``None`` with ``DATABASE_URL``) for the caller to ``stop()`` (which leaves a
    server it did not start running)."""
    from backend.db.migrate import upgrade
    from backend.embedded import EmbeddedPostgres

    settings = load_settings()
    if settings.database_url:
        return settings, None
    path = Path(data_dir).resolve()
    if not (path / "postgres").exists():
        raise SettingsError(
            f"no Railyard data directory at {path}: run `railyard dev` first, pass --data-dir,"
            " or set DATABASE_URL"
        )
    pg = EmbeddedPostgres(path / "postgres")
    pg.start()
    try:
        settings = load_settings(database_url=pg.url)
        upgrade(settings.database_url)
    except BaseException:
        pg.stop()
        raise
    return settings, pg


def cmd_create_user(args: argparse.Namespace) -> int:
    """Create a local account; the password comes from a prompt or stdin, never argv."""
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.services.identity import accounts
    from backend.services.identity.passwords import WeakPassword, check_password

    refuse_unstorable(email=args.email, name=args.name)
    password = read_new_password(args)
    refuse_unstorable(password=password)
    try:
        check_password(password, email=args.email)  # before starting or reaching a database
    except WeakPassword as exc:
        print(f"railyard: no account created: password: {exc}", file=sys.stderr)
        return 1
    settings, pg = settings_for_tool(args.data_dir)
    where = (
        f"the railyard dev data directory {Path(args.data_dir).resolve()}"
        if pg
        else ("DATABASE_URL")
    )

    async def main() -> Any:
        engine = make_engine(settings.database_url, pool_size=1)
        try:
            async with make_sessionmaker(engine)() as session, session.begin():
                return await accounts.create_user(
                    session, args.email, password, role=args.role, name=args.name
                )
        finally:
            await engine.dispose()

    try:
        user = asyncio.run(main())
    except (accounts.AccountError, WeakPassword) as exc:
        print(f"railyard: no account created: {exc}", file=sys.stderr)
        return 1
    finally:
        if pg is not None:
            pg.stop()
    print(f"created {user.role} account {user.email} (id {user.id}) in {where}")
    print(f"  sign in at {sign_in_url(settings, Path(args.data_dir).resolve() if pg else None)}")
    return 0


def cmd_rotate_key(args: argparse.Namespace) -> int:
    """Re-encrypt every credential and webhook secret under RAILYARD_ENCRYPTION_KEY, in one
    transaction (a blob under a key that is not configured changes nothing).

    Rotation: (1) ``railyard rotate-key --generate-key`` prints a new key; (2) deploy with
    RAILYARD_ENCRYPTION_KEY=<new> and RAILYARD_ENCRYPTION_OLD_KEYS=<old>; (3) run
    ``railyard rotate-key``; (4) drop the old key from RAILYARD_ENCRYPTION_OLD_KEYS.
    """
    from backend import crypto

    if args.generate_key:
        print(crypto.generate_key())
        return 0
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.services.connectors.credentials import rotate_keys
    from backend.services.subscriptions.manage import rotate_secrets as rotate_signing
    from backend.services.triggers.webhooks import rotate_secrets

    settings = load_settings()
    settings.require_services()
    try:
        keyring = crypto.keyring_from_settings(settings)
    except crypto.CryptoError as exc:
        print(f"railyard: {exc}", file=sys.stderr)
        return 2

    async def main() -> tuple[int, int, int]:
        engine = make_engine(settings.database_url, pool_size=1)
        try:
            async with make_sessionmaker(engine)() as session, session.begin():
                return (
                    await rotate_keys(session, keyring),
                    await rotate_secrets(session, keyring),
                    await rotate_signing(session, keyring),
                )
        finally:
            await engine.dispose()

    try:
        credentials, hook_secrets, signing = asyncio.run(main())
    except crypto.CryptoError as exc:
        print(f"railyard: nothing changed: {exc}", file=sys.stderr)
        return 1
    print(
        f"re-encrypted {credentials} credential(s), {hook_secrets} webhook secret(s) and"
        f" {signing} event subscription secret(s) with key {keyring.current_id}"
    )
    return 0
