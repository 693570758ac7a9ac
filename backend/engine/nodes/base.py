"""What a node type is to the engine: its spec plus a behaviour of one of five kinds.

Each built-in node type has one module in this package holding its
:class:`~designer_schema.catalog.NodeTypeSpec` (config schema, ports, output schema) and its
behaviour, bundled as a :class:`NodeType` and registered by ``(type, version)`` in a
:class:`~backend.engine.nodes.registry.NodeRegistry` (SpiffWorkflow's TaskSpec subclasses;
n8n's versioned node implementations). The behaviour's *kind* tells the orchestrator how
to run a step; the orchestrator never branches on type strings:

============  ==============================================================================
kind          how a step of it runs
============  ==============================================================================
``trigger``   completed when the run starts, with the run input as output (no behaviour code)
``inline``    evaluated inside the orchestration transaction (:class:`InlineBehaviour`)
``timer``     a durable timer: ready with ``not_before`` = its due time (:class:`TimerBehaviour`)
``call``      runs without a worker until its child runs end (:class:`CallBehaviour`)
``action``    dispatched to a worker that runs a connector (the engine has no code for it)
============  ==============================================================================

Behaviours are pure: they get the step's resolved config (expressions evaluated; decoded
into the behaviour's ``config_type``, a msgspec Struct, when it declares one:
:mod:`backend.engine.nodes.config`) and its input and return what happened; the
orchestrator applies it to the run state. They raise :class:`NodeError` for bad config
and for deliberate failures (Stop and Error).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal

from backend.engine.model import ChildRun, ChildSummary
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step

BehaviourKind = Literal["trigger", "inline", "timer", "call", "action"]

WAITING_KINDS: frozenset[BehaviourKind] = frozenset({"timer", "call"})
"""Kinds whose steps wait durably without a worker: while only such steps are unfinished,
the run is ``waiting``."""

SAME_AS_INPUT: dict[str, Any] = {
    "description": "The step input, unchanged.",
    "x-same-as-input": True,
}
"""Output schema of pass-through nodes: the output is the step input (``x-same-as-input``
tells the designer to carry the input's schema over)."""


class NodeError(Exception):
    """A step of a built-in node failed: ``kind`` classifies it (error kind of the step),
    ``field`` names the config field at fault (``None`` when no single field is)."""

    def __init__(self, message: str, *, kind: str = "control_error", field: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.field = field


def truthy(value: Any) -> bool:
    """JSONata's ``$boolean`` casting: empty string, 0, null, empty array/object and false
    are false; an array is true when any member is."""
    if isinstance(value, list):
        return any(truthy(v) for v in value)
    return bool(value)


class Behaviour:
    """Base of every behaviour. ``keyed_input``: the step's input is always an object
    ``{predecessor step id: its output}``, even when one branch arrived (Join)."""

    kind: ClassVar[BehaviourKind]
    keyed_input: ClassVar[bool] = False
    config_type: ClassVar[type[Any] | None] = None
    """The node's config Struct: the behaviour's ``config`` is the step's resolved config
    decoded into it (``None``: the resolved dict)."""


class TriggerBehaviour(Behaviour):
    """A trigger: its step completes with the run input when the run starts."""

    kind: ClassVar[BehaviourKind] = "trigger"

    def problem(self, config: dict[str, Any], run_input: Any) -> dict[str, Any] | None:
        """The error the trigger step fails with instead of completing (``None``: it
        completes): a run input its trigger marked invalid."""
        return None


class ActionBehaviour(Behaviour):
    """A connector action: its step is dispatched to a worker (``ConnectorRegistry``)."""

    kind: ClassVar[BehaviourKind] = "action"


@dataclass(frozen=True)
class InlineResult:
    """What an inline step produced: ``output``, the output ``ports`` it takes, and for a
    Respond to Webhook step the webhook ``response`` ``{"status", "headers", "body"}``."""

    output: Any
    ports: tuple[str, ...] = ("out",)
    response: dict[str, Any] | None = None


class InlineBehaviour(Behaviour):
    """A cheap, deterministic node evaluated inline (If, Set, Switch, Join, ...)."""

    kind: ClassVar[BehaviourKind] = "inline"

    def input_blind(self, step: Step) -> bool:
        """Whether :meth:`evaluate` never looks at its ``data`` for ``step``'s config: its
        output comes from the resolved config alone (its expressions still read the
        input; backend/engine/input_reads.py checks those). Default ``False``."""
        return False

    def evaluate(self, step: Step, config: Any, data: Any) -> InlineResult:
        """Evaluate ``step`` with its resolved ``config`` on input ``data``.

        Raises :class:`NodeError` for bad config or a deliberate failure."""
        raise NotImplementedError


class TimerBehaviour(Behaviour):
    """A durable timer (Delay, Wait Until): the step fires at :meth:`due` with its input
    as output."""

    kind: ClassVar[BehaviourKind] = "timer"

    def due(self, config: Any, now: datetime) -> datetime:
        """When the step fires (timezone-aware), from its resolved ``config``.

        Raises :class:`NodeError` (kind ``invalid_config``) for an unusable time."""
        raise NotImplementedError


@dataclass(frozen=True)
class CallWaiting:
    """The call goes on; ``request`` lists children to start now as ``(index, input)``."""

    request: tuple[tuple[int, Any], ...] = ()


@dataclass(frozen=True)
class CallSucceeded:
    """The call step succeeds with ``output``; ``details`` go into its event."""

    output: Any
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CallFailed:
    """The call step fails with ``error``; ``cancel`` lists child run ids to cancel."""

    error: dict[str, Any]
    cancel: tuple[str, ...] = ()


CallProgress = CallWaiting | CallSucceeded | CallFailed


class CallBehaviour(Behaviour):
    """A step that runs other workflows as child runs (Sub-workflow, For-each).

    The orchestrator stores what :meth:`start` returns as the step's durable ``data``
    (the *call*: at least ``workflow_id``, ``version`` and ``wait``) and asks
    :meth:`progress` whenever the run advances. Child run ids are deterministic per
    ``(run, step, index)``.
    """

    kind: ClassVar[BehaviourKind] = "call"

    def start(self, config: Any, data: Any) -> dict[str, Any]:
        """The call of a step with resolved ``config`` and input ``data``.

        Raises :class:`NodeError` (kind ``invalid_config``, ``field`` set) for bad config."""
        raise NotImplementedError

    def forget(self, call: Mapping[str, Any], data: Any) -> list[Any]:
        """Fire and forget (``call["wait"]`` false): the inputs of every child to start,
        in index order."""
        raise NotImplementedError

    def forgotten_output(self, run_ids: list[str]) -> Any:
        """Output of a fire-and-forget step that started the children ``run_ids``."""
        raise NotImplementedError

    def progress(
        self,
        call: Mapping[str, Any],
        data: Any,
        children: Mapping[int, ChildRun],
        requested: frozenset[int],
        summary: ChildSummary | None = None,
    ) -> CallProgress:
        """Next move of a waiting call: ``children`` are the child runs by index (with
        their status and result), ``requested`` the indexes asked for but not created yet.
        Until the call has all its children (:meth:`children_total`) and every one ended,
        the succeeded ones are left out of ``children`` and counted in ``summary`` (a
        parent of 10,000 children reads the few that run or failed, not 10,000); the last
        move gets them all, with their outputs."""
        raise NotImplementedError

    def children_total(self, call: Mapping[str, Any]) -> int:
        """How many child runs a waiting ``call`` makes in all (1 unless overridden)."""
        return 1


@dataclass(frozen=True)
class NodeType:
    """One version of a node type: its ``spec`` (what the designer and compiler see;
    ``spec.version`` is the version) and its ``behaviour`` (what the engine runs)."""

    spec: NodeTypeSpec
    behaviour: Behaviour

    @property
    def key(self) -> tuple[str, int]:
        """``(type, version)``."""
        return (self.spec.type, self.spec.version)
