"""A connector package written by ``railyard connector new``, "installed" without touching
the test virtualenv: setuptools writes the distribution's metadata (``egg_info``) into a
folder which, with the package folder, goes on the ``PYTHONPATH`` of the Python that
should see it (tests/integration/test_connector_new.py, e2e/test_generated_connector.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TIMEOUT = 120.0


def generate(root: Path, name: str = "acme") -> Path:
    """Run ``railyard connector new NAME --dir <root>/railyard-<name>`` (the console
    script, as a user would); returns the package folder. Raises
    ``subprocess.CalledProcessError`` when the command fails."""
    package = root / f"railyard-{name.replace('_', '-')}"
    railyard = Path(sys.executable).parent / "railyard"
    subprocess.run(
        [str(railyard), "connector", "new", name, "--dir", str(package)],
        check=True,
        capture_output=True,
        timeout=TIMEOUT,
    )
    return package


def build_metadata(package: Path, site: Path) -> Path:
    """Write the distribution metadata of ``package`` into ``site`` (created) with
    setuptools' ``egg_info``; returns the ``*.egg-info`` folder."""
    site.mkdir(parents=True, exist_ok=True)
    egg_info = ["-c", "from setuptools import setup; setup()", "-q", "egg_info"]
    subprocess.run(
        [sys.executable, *egg_info, "--egg-base", str(site)],
        cwd=package,
        env=clean_env(),
        check=True,
        capture_output=True,
        timeout=TIMEOUT,
    )
    [info] = site.glob("*.egg-info")
    return info


def python_path(package: Path, site: Path) -> str:
    """The ``PYTHONPATH`` under which the package counts as installed."""
    return os.pathsep.join([str(site), str(package)])


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without pytest's variables and ``PYTHONPATH``, plus
    ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.pop("PYTHONPATH", None)
    return {**env, **extra}
