"""``test.pinned``: a step whose output was pinned for a test run.

Test runs (backend/services/workflows/draft_runs.py) execute a snapshot of the draft in which every
step with pinned data (or, for "Test step", with data from the last run) is replaced by a
step of this type: it is not executed; it outputs ``config.data`` through ``config.port``
(the replaced step's main output port) at once. The type never appears in the catalog
(diagrams cannot hold it); :meth:`backend.engine.nodes.registry.NodeRegistry.behaviour`
finds it by :data:`PINNED_TYPE`, whatever version a graph pins.
"""

from __future__ import annotations

from typing import Any

import msgspec

from backend.engine.nodes.base import InlineBehaviour, InlineResult
from designer_schema.graph import Step

PINNED_TYPE = "test.pinned"


class PinnedConfig(msgspec.Struct, kw_only=True, frozen=True):
    """``data``: the pinned output; ``port``: the output port it leaves by (empty: ``out``)."""

    data: Any = None
    port: str = "out"


class Pinned(InlineBehaviour):
    """Outputs the pinned data (``config.data``) through ``config.port`` (default ``out``)."""

    config_type = PinnedConfig

    def evaluate(self, step: Step, config: PinnedConfig, data: Any) -> InlineResult:
        return InlineResult(config.data, (config.port or "out",))


PINNED = Pinned()
