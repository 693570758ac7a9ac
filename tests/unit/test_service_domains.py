"""The domain packages of backend/services and their public surfaces (docs/architecture.md,
"Services: one package per domain").

Each domain package's ``__init__.py`` docstring lists its modules under "Public modules"
and "Private modules" (items ``- ``name``: ...``). The lists must be exactly the package's
modules, a private module is imported by nothing outside its package, and a public one is
imported from outside (else it belongs in the private list). ``backend/services/`` itself
holds only the domain packages and the shared kernel its own docstring names.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "backend" / "services"
DOMAINS = (
    "identity",
    "connectors",
    "runs",
    "triggers",
    "workflows",
    "search",
    "operations",
    "subscriptions",
)
ITEM = re.compile(r"^- ``(\w+)``", re.M)


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def listed(docstring: str) -> tuple[set[str], set[str]]:
    """``(public, private)`` module names of a domain package's docstring."""
    public_part, sep, private_part = docstring.partition("\nPrivate modules")
    assert sep, "the docstring has no 'Private modules' list"
    _, sep, public_part = public_part.partition("\nPublic modules")
    assert sep, "the docstring has no 'Public modules' list"
    return set(ITEM.findall(public_part)), set(ITEM.findall(private_part))


def modules_of(package: Path) -> set[str]:
    """The modules and subpackages directly inside ``package``."""
    names = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    return names | {p.name for p in package.iterdir() if (p / "__init__.py").exists()}


@cache
def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("backend", "frontend", "connectors", "designer_schema")


def imported_from_outside(package: str) -> set[str]:
    """Names of ``package``'s modules that product code outside it imports."""
    graph = _graph()
    found: set[str] = set()
    for child in graph.find_children(package):
        for module in {child} | graph.find_descendants(child):
            importers = graph.find_modules_that_directly_import(module)
            if any(i != package and not i.startswith(package + ".") for i in importers):
                found.add(child.rsplit(".", 1)[1])
    return found


def test_listed_reads_both_lists() -> None:
    doc = (
        "Title.\n\nPublic modules (x):\n\n- ``a``: one\n- ``b``: two\n\n"
        "Private modules:\n\n- ``c``: three"
    )
    assert listed(doc) == ({"a", "b"}, {"c"})


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_package_lists_its_modules(domain: str) -> None:
    public, private = listed(_docstring(SERVICES / domain / "__init__.py"))
    assert not public & private, sorted(public & private)
    assert public | private == modules_of(SERVICES / domain)


@pytest.mark.parametrize("domain", DOMAINS)
def test_only_public_modules_are_imported_from_outside(domain: str) -> None:
    public, _ = listed(_docstring(SERVICES / domain / "__init__.py"))
    outside = imported_from_outside(f"backend.services.{domain}")
    assert outside <= public, f"private modules imported from outside: {sorted(outside - public)}"
    assert public <= outside, f"listed public, used only inside: {sorted(public - outside)}"


def test_the_root_holds_the_domains_and_the_named_kernel() -> None:
    """A module at backend/services/ is the shared kernel only if the root's docstring
    names it (with why it cannot live in a domain)."""
    doc = _docstring(SERVICES / "__init__.py")
    kernel = set(ITEM.findall(doc))
    domains = set(re.findall(r"^``(\w+)/``", doc, re.M))
    assert domains == set(DOMAINS)
    assert modules_of(SERVICES) == kernel | domains
