"""Connector discovery: the ``railyard.connectors`` entry points in load order, each known
as built-in or plugin, with the distribution it comes from.

The built-in connectors (entry points of the ``railyard`` distribution into
``connectors.builtin``) come first, by name, then the plugins, by distribution and
entry-point name, so no plugin can take a built-in name
(:func:`backend.services.connectors.catalog.load_catalog` loads them in this order).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

ENTRY_POINT_GROUP = "railyard.connectors"

BUILTIN_DISTRIBUTION = "railyard"
BUILTIN_PACKAGE = "connectors.builtin"
"""A built-in connector is an entry point of :data:`BUILTIN_DISTRIBUTION` whose object
lives in this package."""


def is_builtin(ep: EntryPoint) -> bool:
    """Whether ``ep`` is a built-in connector: its object is in :data:`BUILTIN_PACKAGE`
    and it comes from the ``railyard`` distribution (or from no distribution at all)."""
    dist = getattr(ep, "dist", None)
    return _builtin(ep, None if dist is None else dist.name)


def _builtin(ep: EntryPoint, distribution: str | None) -> bool:
    module = ep.value.partition(":")[0].strip()
    if module != BUILTIN_PACKAGE and not module.startswith(BUILTIN_PACKAGE + "."):
        return False
    return distribution is None or _normalised(distribution) == BUILTIN_DISTRIBUTION


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class ConnectorEntryPoint:
    """A ``railyard.connectors`` entry point with what the catalog needs of its
    distribution: ``source`` (``"<distribution> <version>"``, ``""`` when it has none) and
    whether it is ``builtin`` (:func:`is_builtin`)."""

    entry_point: EntryPoint
    source: str
    builtin: bool


def connector_sources() -> list[ConnectorEntryPoint]:
    """The ``railyard.connectors`` entry points in load order (the built-in ones first, by
    name, then the plugins, by distribution, then entry-point name), each distribution's
    name and version read once: ``Distribution.name`` and ``.version`` parse its whole
    METADATA file (the project's long description included) on every access, and the
    entry points of one distribution share its object."""
    read: dict[int, tuple[str, str]] = {}  # id(distribution) -> (name, version), this call
    found: list[tuple[tuple[bool, str, str], ConnectorEntryPoint]] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        if dist is None:
            name, source = None, ""
        else:
            if id(dist) not in read:
                read[id(dist)] = (dist.name, dist.version)
            name, version = read[id(dist)]
            source = f"{name} {version}"
        builtin = _builtin(ep, name)
        order = (not builtin, _normalised(name) if name else "", ep.name)
        found.append((order, ConnectorEntryPoint(ep, source, builtin)))
    found.sort(key=lambda item: item[0])
    return [described for _, described in found]


def connector_entry_points() -> list[EntryPoint]:
    """The ``railyard.connectors`` entry points in load order (:func:`connector_sources`)."""
    return [described.entry_point for described in connector_sources()]
