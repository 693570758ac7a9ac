"""The import contracts of pyproject.toml that hold the layers: no import is ignored by the
acyclic and layers contracts, and execution's internals are protected (docs/architecture.md,
"Layers")."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _contracts() -> list[dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _layered(container: str) -> set[str]:
    """The names the layers contract of ``container`` puts in a layer."""
    (layers,) = [
        c for c in _contracts() if c["type"] == "layers" and c["containers"] == [container]
    ]
    return {part.strip() for layer in layers["layers"] for part in layer.split("|")}


def test_the_acyclic_and_layers_contracts_ignore_no_import() -> None:
    structural = [c for c in _contracts() if c["type"] in ("acyclic_siblings", "layers")]
    assert {c["type"] for c in structural} == {"acyclic_siblings", "layers"}
    for contract in structural:
        assert not contract.get("ignore_imports"), contract["name"]


def test_the_layers_of_backend_cover_its_packages() -> None:
    """Every package of backend (a directory with modules) is a layer of the contract."""
    named = _layered("backend")
    packages = {p.name for p in (ROOT / "backend").iterdir() if (p / "__init__.py").exists()}
    assert packages <= named, sorted(packages - named)


def test_the_domain_layers_of_services_cover_its_modules() -> None:
    """Every package and module at backend/services/ is a layer of the domains' contract."""
    services = ROOT / "backend" / "services"
    here = {p.stem for p in services.glob("*.py") if p.stem != "__init__"}
    here |= {p.name for p in services.iterdir() if (p / "__init__.py").exists()}
    assert _layered("backend.services") == here


def test_execution_internals_are_protected() -> None:
    protected = [c for c in _contracts() if c["type"] == "protected"]
    assert any(
        c["protected_modules"] == ["backend.services.runs.execution.*"]
        and c["allowed_importers"] == ["backend.services.runs.execution"]
        for c in protected
    )
