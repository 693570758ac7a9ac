"""``railyard connector new``: the package it writes passes its own tests as written, its
metadata names the entry point Railyard discovers, and Railyard loads it with its icon;
bad names and used folders are refused with the reason.

Nothing is installed into the test virtualenv (tests run in parallel): the generated tests
run with the package on ``sys.path`` (its pytest settings say ``pythonpath = ["."]``), and
the distribution's metadata is built by setuptools into a folder that a separate Python
process puts on its path, as an installed distribution would be
(tests/generated_connector.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from backend.cli import main
from tests.generated_connector import build_metadata, clean_env, python_path

TIMEOUT = 120

LOADED = """
import json
from importlib.metadata import distribution
from backend.services.connectors.catalog import load_catalog

eps = [
    (ep.name, ep.value)
    for ep in distribution("railyard-acme").entry_points
    if ep.group == "railyard.connectors"
]
catalog = load_catalog()
acme = catalog.connector("acme")
print(json.dumps({
    "entry_points": eps,
    "errors": catalog.errors,
    "source": acme and acme.source,
    "icon": acme and acme.icon,
    "node_types": acme and acme.node_types,
    "kinds": [catalog.get(t).kind for t in (acme.node_types if acme else [])],
    "svg": (catalog.icon_svg("acme", "acme") or b"").decode(),
}))
"""


def test_connector_new_writes_a_package_whose_tests_pass_and_that_railyard_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package = tmp_path / "railyard-acme"
    assert main(["connector", "new", "acme", "--dir", str(package)]) == 0
    out = capsys.readouterr().out
    written = {
        "pyproject.toml",
        "README.md",
        "railyard_acme/__init__.py",
        "railyard_acme/icons/acme.svg",
        "tests/conftest.py",
        "tests/test_acme.py",
    }
    assert {str(p.relative_to(package)) for p in package.rglob("*") if p.is_file()} == written
    assert f"wrote the connector acme to {package}" in out

    # The generated tests pass as generated.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=package,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout

    # Its metadata declares the entry point and ships the icon ...
    project = tomllib.loads((package / "pyproject.toml").read_text())
    assert project["project"]["name"] == "railyard-acme"
    assert project["project"]["entry-points"]["railyard.connectors"] == {
        "acme": "railyard_acme:connector"
    }
    site = tmp_path / "site"
    info = build_metadata(package, site)
    assert "railyard_acme/icons/acme.svg" in (info / "SOURCES.txt").read_text()

    # ... and a Railyard that has it on its path discovers and loads it, icon included.
    loaded = subprocess.run(
        [sys.executable, "-c", LOADED],
        env=clean_env(PYTHONPATH=python_path(package, site)),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert loaded.returncode == 0, loaded.stderr
    found = json.loads(loaded.stdout)
    assert found["entry_points"] == [["acme", "railyard_acme:connector"]]
    assert found["errors"] == []
    assert found["source"] == "railyard-acme 0.1.0"
    assert found["icon"] == "acme/acme"
    assert found["node_types"] == ["acme.create_item", "acme.new_item"]
    assert found["kinds"] == ["action", "trigger"]
    assert found["svg"].startswith('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">')


def test_a_label_and_a_name_with_underscores(tmp_path: Path) -> None:
    package = tmp_path / "crm"
    assert main(["connector", "new", "acme_crm", "--dir", str(package), "--label", "Acme CRM"]) == 0
    source = (package / "railyard_acme_crm" / "__init__.py").read_text()
    assert 'label="Acme CRM"' in source and '"acme_crm.create_item"' in source
    assert 'icons={"acme-crm": "icons/acme_crm.svg"}' in source
    project = tomllib.loads((package / "pyproject.toml").read_text())
    assert project["project"]["name"] == "railyard-acme-crm"
    assert project["project"]["entry-points"]["railyard.connectors"] == {
        "acme_crm": "railyard_acme_crm:connector"
    }


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("Acme", "use a Python identifier in lower case"),
        ("acme-co", "use a Python identifier in lower case"),
        ("9lives", "use a Python identifier in lower case"),
        ("class", "use a Python identifier in lower case"),
        ("a" * 41, "at most 40 characters"),
        ("http", "is taken by the built-in connector http (railyard "),
        ("control", "is a prefix of Railyard's core node types"),
    ],
)
def test_bad_names_are_refused(
    name: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "out"
    assert main(["connector", "new", name, "--dir", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"railyard: connector name {name!r}") and reason in err, err
    assert not target.exists()


def test_a_folder_with_files_is_not_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    assert main(["connector", "new", "acme", "--dir", str(tmp_path)]) == 2
    assert "exists and is not an empty folder" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
