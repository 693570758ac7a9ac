"""The non-public parts of libraries Railyard relies on, each pinned and tested.

A speed or correctness device may rely on a library's private API only where no public
one does the job; then the library is pinned (``==`` in pyproject.toml, the same version
in the image's hash-pinned deploy/requirements.lock) and the module says why. This test
keeps the list honest: every import of a private module (a dotted name with a part that
starts with ``_``) in the product must be one of :data:`SEAMS`, and every library of a
seam must be pinned to one version in both files and installed at that version, so an
upgrade fails here until the seam has been checked again (each seam's behaviour has its
own tests, named in :data:`SEAMS`).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("backend", "connectors", "designer_schema", "frontend")

SEAMS: dict[str, tuple[str, str, str]] = {
    # module importing it: (distribution, what it relies on, its tests)
    "backend/api/telemetry.py": (
        "litestar",
        "litestar.middleware._internal.exceptions.middleware.ExceptionHandlerMiddleware: the "
        "status a client got when a middleware inside the telemetry one raised (Litestar "
        "removed the class from its public API in 2.9 and offers no other way to apply the "
        "app's exception handlers inside a middleware)",
        "tests/integration/test_metrics.py",
    ),
    "backend/api/openapi.py": (
        "litestar",
        "litestar._openapi...StructSchemaPlugin: subclassed to document forbid_unknown_fields "
        "Structs with additionalProperties: false (no public hook for Struct schemas)",
        "tests/integration/test_api_contract.py",
    ),
    "backend/cli/http_protocol.py": (
        "uvicorn",
        "uvicorn.protocols.http.httptools_impl.HttpToolsProtocol: subclassed to gather an "
        "answer's writes into one (uvicorn documents no protocol extension point)",
        "tests/integration/test_http_protocol.py",
    ),
    "backend/db/fast_path.py": (
        "sqlalchemy",
        "QueuePool.connect()/checkedin()/size() called outside a greenlet, relying on the pool "
        "raising MissingGreenlet before any I/O, and sqlalchemy.util.greenlet_spawn",
        "tests/integration/test_fast_path.py",
    ),
}

_PRIVATE = re.compile(r"(^|\.)_[a-z]")
_LOCKED = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s\\]+)", re.MULTILINE)


def _private_imports(path: Path) -> list[str]:
    """The private third-party modules ``path`` imports (its own packages excluded)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if name.split(".")[0] in PRODUCT or name == "__future__":
                continue
            if _PRIVATE.search(name):
                found.append(name)
    return found


def test_every_private_import_is_a_listed_seam() -> None:
    unlisted = {}
    for top in PRODUCT:
        for path in (ROOT / top).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if ".venv" in path.parts or "node_modules" in path.parts:
                continue
            private = _private_imports(path)
            if private and rel not in SEAMS:
                unlisted[rel] = private
    assert unlisted == {}, "private imports not listed in SEAMS (pin the library, say why)"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pyproject_pins() -> dict[str, str]:
    text = (ROOT / "pyproject.toml").read_text()
    return {
        _normal(m.group(1)): m.group(2)
        for m in re.finditer(r'"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^";\s]+)"', text)
    }


def test_seam_libraries_are_pinned_locked_and_installed_at_one_version() -> None:
    pinned = _pyproject_pins()
    locked = {
        _normal(m.group(1)): m.group(2)
        for m in _LOCKED.finditer((ROOT / "deploy" / "requirements.lock").read_text())
    }
    for module, (dist, _why, tests) in SEAMS.items():
        assert (ROOT / module).exists(), module
        assert (ROOT / tests).exists(), f"{module}: its seam's tests {tests} are missing"
        name = _normal(dist)
        assert name in pinned, f"{dist} is not pinned with == in pyproject.toml ({module})"
        assert locked.get(name) == pinned[name], (
            f"{dist}: pyproject.toml pins {pinned[name]}, deploy/requirements.lock has "
            f"{locked.get(name)}"
        )
        installed = importlib.metadata.version(dist)
        assert installed == pinned[name], (
            f"{dist} {installed} is installed, the seam in {module} was checked with "
            f"{pinned[name]}: run `make install`"
        )
