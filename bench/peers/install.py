"""The peers' bench-only environment: pinned versions, installed once and cached.

Everything lands under ``.bench-peers/`` at the repository root (git-ignored, never part
of the product): ``npm/`` holds the Restate server and Node-RED from npm, ``venv/`` a
virtualenv with the Restate Python SDK, hypercorn, DBOS Transact and uvicorn (with
uvloop and httptools, as Railyard's API uses) from PyPI.
A stamp file per part records the pins it was installed with; a second run with the same
pins installs nothing. Only the package registries are contacted (npm, pip), through their
own clients.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / ".bench-peers"
"""The bench-only environment (git-ignored)."""

NPM_PACKAGES = {"@restatedev/restate-server": "1.7.12", "node-red": "4.1.8"}
"""npm packages and their pinned versions (Node-RED 4.1 runs on Node.js 18.5+; 5.x needs 22.9)."""

PIP_PACKAGES = {
    "restate-sdk": "1.3.0",
    "hypercorn": "0.18.0",
    "dbos": "3.4.0",
    "uvicorn": "0.38.0",
    "uvloop": "0.22.1",
    "httptools": "0.7.1",
}
"""PyPI packages of the peers' virtualenv and their pinned versions."""


def npm_bin(name: str) -> Path:
    """Path of an installed npm command (``restate-server``, ``node-red``)."""
    return HOME / "npm" / "node_modules" / ".bin" / name


def venv_bin(name: str) -> Path:
    """Path of a command of the peers' virtualenv (``python``, ``hypercorn``, ``uvicorn``)."""
    return HOME / "venv" / "bin" / name


def _stamped(stamp: Path, pins: dict[str, str]) -> bool:
    try:
        return bool(json.loads(stamp.read_text()) == pins)
    except (FileNotFoundError, ValueError):
        return False


def _run(argv: list[str], log: Path) -> None:
    """Run an installer, its output to ``log``; RuntimeError naming the log on failure."""
    with log.open("wb") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} ... failed ({done.returncode}); see {log}")


def install_npm() -> bool:
    """Install :data:`NPM_PACKAGES` into ``.bench-peers/npm``; False when already there.

    Raises RuntimeError when npm is missing or fails."""
    stamp = HOME / "npm.installed"
    if _stamped(stamp, NPM_PACKAGES) and all(
        npm_bin(b).exists() for b in ("restate-server", "node-red")
    ):
        return False
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is needed for the Restate server and Node-RED (install Node.js)")
    (HOME / "npm").mkdir(parents=True, exist_ok=True)
    specs = [f"{name}@{version}" for name, version in NPM_PACKAGES.items()]
    argv = [npm, "install", "--prefix", str(HOME / "npm"), "--no-audit", "--no-fund", *specs]
    _run(argv, HOME / "npm.log")
    stamp.write_text(json.dumps(NPM_PACKAGES))
    return True


def install_pip() -> bool:
    """Create ``.bench-peers/venv`` and install :data:`PIP_PACKAGES`; False when already there.

    Raises RuntimeError when pip fails."""
    stamp = HOME / "venv.installed"
    if _stamped(stamp, PIP_PACKAGES) and venv_bin("python").exists():
        return False
    HOME.mkdir(parents=True, exist_ok=True)
    if not venv_bin("python").exists():
        _run([sys.executable, "-m", "venv", str(HOME / "venv")], HOME / "venv.log")
    specs = [f"{name}=={version}" for name, version in PIP_PACKAGES.items()]
    argv = [str(venv_bin("python")), "-m", "pip", "install", "-q"]
    _run([*argv, "--disable-pip-version-check", *specs], HOME / "pip.log")
    stamp.write_text(json.dumps(PIP_PACKAGES))
    return True


def ensure(skip: bool) -> None:
    """Install what is missing (``skip``: only check it is there).

    Raises RuntimeError when a part is missing and ``skip`` is set, or an install fails."""
    if skip:
        missing = [
            str(p)
            for p in (npm_bin("restate-server"), npm_bin("node-red"), venv_bin("python"))
            if not p.exists()
        ]
        if missing:
            raise RuntimeError(f"--skip-install but not installed: {', '.join(missing)}")
        return
    for part, install in (("npm", install_npm), ("pip", install_pip)):
        print(f"# peers: {part} packages {'installed' if install() else 'cached'}", flush=True)


def versions() -> dict[str, str]:
    """The pinned versions in use, by package name (for the method section of the report)."""
    return {**NPM_PACKAGES, **PIP_PACKAGES}
