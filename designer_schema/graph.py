"""The executable form of a workflow: frozen step specs and transitions.

A :class:`WorkflowGraph` is produced by the compiler from a diagram and stored in a
workflow version; runs read it and never change it. Run and step *state* lives in
``backend.engine.states`` (spec vs runtime kept apart).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any, Literal

import msgspec

from designer_schema.errors import SchemaDecodeError

GRAPH_SCHEMA_VERSION = 2
"""2: steps pin their node-type version (``Step.type_version``) and a Join node's
``mode``/``count`` are compiled into ``Step.join``. A graph of schema 1 decodes with every
step at node-type version 1; stored ones were upgraded by migration ``0012_graph_v2``."""

JoinMode = Literal["all", "first", "n_of_m"]


class JoinSpec(msgspec.Struct, frozen=True):
    """What a step with several incoming transitions waits for.

    ``all``: every *activated* incoming branch (branches not taken never block:
    dead-path elimination); ``first``: the first arrival fires, later ones are ignored;
    ``n_of_m``: fires after ``count`` arrivals.
    """

    mode: JoinMode = "all"
    count: int = 0


class RetryPolicy(msgspec.Struct, frozen=True):
    """Retry policy of a step (Temporal's vocabulary).

    Intervals are in seconds. ``max_attempts`` counts the first attempt (1 = no retry).
    The delay before attempt n+1 is
    ``min(initial_interval * backoff_coefficient ** (n - 1), max_interval)``, with
    ``jitter`` (a fraction, 0.1 = +-10 %) applied on top; when a server's Retry-After is
    longer, the delay is that times a factor in ``[1, 1 + jitter]``.
    """

    max_attempts: int = 1
    initial_interval: float = 1.0
    backoff_coefficient: float = 2.0
    max_interval: float = 100.0
    jitter: float = 0.1
    non_retryable_error_kinds: tuple[str, ...] = ()


OnError = Literal["fail", "error_port", "continue"]

ERROR_PORT = "error"
"""Name of the extra output port of a step whose ``on_error`` is ``error_port``."""


class Step(msgspec.Struct, frozen=True):
    """One step of the graph, compiled from one diagram node.

    - ``config``: the node's whole config. Literal values are kept as drawn (an escaped
      ``==...`` string in an expression field is stored with one ``=`` removed); every
      expression leaf is replaced by ``None``.
    - ``expressions``: maps a config field path to the JSONata source (without the leading
      ``=``) that computes that leaf at run time. Paths join dict keys with ``.`` and list
      indexes as numbers: ``condition``, ``mapping.total``, ``headers.X-Token``, ``items.0``.
    - ``outputs``: the step's output port names: the node type's ``outputs``, then the
      strings of its ``dynamic_outputs`` config field (Switch cases), then ``error`` when
      the step has an error port.
    - ``on_error``: what a final failure (after the last attempt) does. ``fail`` (default):
      the step fails the run. ``error_port``: the step completes through its ``error``
      output port (:data:`ERROR_PORT`) with the error as its output, and the run continues
      there; set by the node config ``"on_error": "error_port"`` or by a node type with
      ``error_port``, and the compiler then adds ``error`` to ``outputs``. ``continue``: the
      step completes through its regular output ports with the error as its output. The
      raw ``on_error`` value also stays in ``config``.
    - ``type_version``: the version of node type ``type`` this step runs (pinned when the
      graph is compiled; ``1`` when a stored graph predates versions). The engine runs that
      version's behaviour, so a published graph keeps its meaning when a node evolves.
    - ``join``: what the step waits for when several transitions come in; from the
      reserved config key ``join``, or from a Join node's own ``mode``/``count`` fields
      (``NodeTypeSpec.config_join``). The engine reads only this, never the config.
    - ``retry``: parsed from the reserved config key ``retry``.
    - ``timeout``: seconds per attempt, from the reserved config key ``timeout``
      (``None`` = no step timeout).
    """

    id: str
    type: str
    kind: Literal["trigger", "action", "control"]
    label: str = ""
    config: dict[str, Any] = msgspec.field(default_factory=dict)
    expressions: dict[str, str] = msgspec.field(default_factory=dict)
    outputs: tuple[str, ...] = ("out",)
    join: JoinSpec = JoinSpec()
    retry: RetryPolicy = RetryPolicy()
    timeout: float | None = None
    on_error: OnError = "fail"
    type_version: int = 1


class Transition(msgspec.Struct, frozen=True):
    """Control and data flow from ``source``'s output port to ``target``'s input port."""

    source: str
    target: str
    source_port: str = "out"
    target_port: str = "in"


class WorkflowGraph(msgspec.Struct, frozen=True, dict=True):
    """A compiled workflow.

    ``trigger`` is the id of the trigger step; ``steps`` keeps diagram order.
    ``content_hash`` is the hex SHA-256 of the canonical JSON of the graph without the
    hash itself; two diagrams that compile to the same graph share a hash.
    """

    # Lookups by step id (step, incoming, outgoing) use indexes built on first use:
    # dict=True lets the frozen struct cache them, and as they are not fields they are
    # never encoded. A graph is not mutated after it is built.

    trigger: str
    steps: list[Step]
    transitions: list[Transition]
    content_hash: str = ""
    schema_version: int = GRAPH_SCHEMA_VERSION

    def step(self, step_id: str) -> Step:
        """Return the step named ``step_id``; raises ``KeyError`` when absent."""
        return self._steps_by_id[step_id]

    def incoming(self, step_id: str) -> list[Transition]:
        """Transitions whose target is ``step_id``, in graph order (a new list)."""
        return list(self._incoming.get(step_id, ()))

    def outgoing(self, step_id: str) -> list[Transition]:
        """Transitions whose source is ``step_id``, in graph order (a new list)."""
        return list(self._outgoing.get(step_id, ()))

    @functools.cached_property
    def _steps_by_id(self) -> dict[str, Step]:
        found: dict[str, Step] = {}
        for step in self.steps:
            found.setdefault(step.id, step)  # the first one, as a linear search would
        return found

    @functools.cached_property
    def _incoming(self) -> dict[str, tuple[Transition, ...]]:
        return _group(self.transitions, lambda t: t.target)

    @functools.cached_property
    def _outgoing(self) -> dict[str, tuple[Transition, ...]]:
        return _group(self.transitions, lambda t: t.source)


def _group(
    transitions: list[Transition], key: Callable[[Transition], str]
) -> dict[str, tuple[Transition, ...]]:
    """``transitions`` grouped by ``key``, each group in graph order."""
    groups: dict[str, list[Transition]] = {}
    for t in transitions:
        groups.setdefault(key(t), []).append(t)
    return {k: tuple(v) for k, v in groups.items()}


class GraphDecodeError(SchemaDecodeError):
    """Stored graph JSON is malformed, does not match :class:`WorkflowGraph`, or (when
    asked to verify) its ``content_hash`` does not match its content."""


def canonical_hash(graph: WorkflowGraph) -> str:
    """Hex SHA-256 of the canonical JSON of ``graph`` with ``content_hash`` set to ``""``.

    Canonical JSON is ``msgspec.json.encode(..., order="sorted")``: struct fields and dict
    keys sorted, compact separators. The hash ignores the graph's current ``content_hash``.
    Raises ``TypeError`` when a config holds a value that is not JSON-encodable.
    """
    blank = msgspec.structs.replace(graph, content_hash="")
    return hashlib.sha256(msgspec.json.encode(blank, order="sorted")).hexdigest()


def graph_to_json(graph: WorkflowGraph) -> bytes:
    """Encode ``graph`` as canonical JSON bytes (sorted keys), as stored in a version."""
    return msgspec.json.encode(graph, order="sorted")


def graph_from_json(data: bytes | str, *, verify_hash: bool = False) -> WorkflowGraph:
    """Decode a graph stored with :func:`graph_to_json`.

    Raises :class:`GraphDecodeError` when the JSON is malformed or does not match
    :class:`WorkflowGraph` (``path`` says where), and, with ``verify_hash=True``, when
    ``content_hash`` differs from :func:`canonical_hash` of the decoded graph.
    """
    try:
        graph = msgspec.json.decode(data, type=WorkflowGraph)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise GraphDecodeError.from_msgspec(exc) from exc
    if verify_hash and graph.content_hash != canonical_hash(graph):
        raise GraphDecodeError("content_hash does not match the graph", "$.content_hash")
    return graph


def graph_json_schema() -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) of :class:`WorkflowGraph`."""
    return msgspec.json.schema(WorkflowGraph)
