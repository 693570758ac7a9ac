"""Make ``@pytest.mark.xdist_group`` work again under ``--dist loadgroup``.

pytest-xdist (3.8) puts a test in its group by renaming it ``<nodeid>@<group>`` through
``item._nodeid``, an attribute pytest 9 no longer reads (a node's id is now
``item._id``): every test then runs wherever the plain ``load`` mode sends it, and a
server a group shares (RabbitMQ boots in seconds) is started on every worker. This hook
runs after xdist's and applies the rename. It does nothing without ``--dist loadgroup``
or once xdist renames tests itself.
"""

from __future__ import annotations

import pytest

__all__ = ["pytest_collection_modifyitems"]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # a pytest whose node ids are still plain strings
        return
    for item in items:
        renamed = getattr(item, "_nodeid", None)
        if isinstance(renamed, str) and renamed != item.nodeid and hasattr(item, "_id"):
            item._id = NodeId.parse(renamed)
