"""Parts of a run's input left as their references while the run is advanced.

A For-each child's input holds the calling step's whole input by reference
(``NewRun.by_reference``, backend/db/payloads.py). Reading a child used to decode that
value (about 1.5 ms for the 109 kB list of 10,000 items) and each write to encode and
hash it again (0.5 ms), in every child: the work per item grew with the list. When the
child's graph cannot observe a top-level field of its run input
(:func:`backend.engine.input_reads.reads_input_field` answers ``False``), the store
now leaves that field's reference unread, as a :class:`~backend.db.payloads.Unresolved`,
in the places that hold the run input as it is:

- the run's input;
- the trigger step's input and output (the trigger passes the run input on untouched);
- the input of each step the trigger leads to (their input is the trigger's output).

No other step's input or output can hold it (the rule guarantees that those steps build
their output from their expressions, which do not read the field). Writes put the same
reference back, so the stored rows, the run page, retention, replay and re-run see
exactly what they saw before; a graph that may read the field gets it in full, as ever.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.db.payloads import Unresolved, reference_of
from backend.engine.input_reads import reads_input_field
from backend.engine.model import StepRecord
from designer_schema.graph import WorkflowGraph

__all__ = ["UnreadInput", "started_input", "unread_input"]


@dataclass(frozen=True)
class UnreadInput:
    """The run-input ``fields`` left unread, the ``trigger`` step and the steps it leads
    to (``first``)."""

    fields: frozenset[str]
    trigger: str
    first: frozenset[str]

    def value(self, stored: Any) -> Any:
        """``stored`` (a column's value: references not yet resolved) with the reference
        of each unread field made :class:`Unresolved` (a shallow copy; ``stored`` itself
        when it has none)."""
        if not isinstance(stored, dict) or not any(name in stored for name in self.fields):
            return stored
        return {
            name: Unresolved(part) if name in self.fields and reference_of(part) else part
            for name, part in stored.items()
        }

    def records(self, records: dict[str, StepRecord]) -> None:
        """Leave the fields unread in the step records read from their rows (in place)."""
        trigger = records.get(self.trigger)
        if trigger is not None:
            trigger.input = self.value(trigger.input)
            trigger.output = self.value(trigger.output)
        for step_id in self.first:
            rec = records.get(step_id)
            if rec is not None:
                rec.input = self.value(rec.input)


def unread_input(graph: WorkflowGraph, stored_input: Any) -> UnreadInput | None:
    """What of run input ``stored_input`` (as its column holds it) may stay unread while
    a run of ``graph`` advances: the top-level fields stored by reference that the graph
    cannot observe (``None``: none)."""
    if not isinstance(stored_input, dict):
        return None
    fields = frozenset(
        name
        for name, part in stored_input.items()
        if reference_of(part) is not None and not reads_input_field(graph, name)
    )
    if not fields:
        return None
    first = frozenset(t.target for t in graph.outgoing(graph.trigger))
    return UnreadInput(fields, graph.trigger, first)


def started_input(stored: Any) -> Any:
    """Run input ``stored`` (as its column holds it) as the engine holds it once the run
    has started: its top-level references (the whole input when it is one) left unread,
    as :class:`Unresolved`. The engine reads a run's input only to start the run (the
    trigger's record holds it from then on), so a calling run stored by reference
    (backend/services/runs/execution/parent_parts.py) is not decoded again by each pass
    of its parent."""
    if reference_of(stored) is not None:
        return Unresolved(stored)
    if not isinstance(stored, dict) or not any(reference_of(p) for p in stored.values()):
        return stored
    return {name: Unresolved(p) if reference_of(p) else p for name, p in stored.items()}
