"""Whether a workflow graph can observe one top-level field of its run input.

A For-each child's input is ``{"item", "index", "input"}``, where ``input`` is the whole
calling step's input (at 10,000 items, the 109 kB list), stored once by reference
(backend/db/payloads.py). Reading it back costs every child a decoding of that list, and
each write of the child an encoding and SHA-256 of it; a body that never looks at
``input`` then costs per item in proportion to the list. When :func:`reads_input_field`
answers ``False``, the store leaves that field as its reference while it runs the child
(``payloads.Unresolved``: written back as the same reference, never read as data), so
the child's work no longer depends on the list's size; what is stored, shown and
replayed is the same.

The answer must never be ``False`` for a graph that could see the field, so it is
conservative: ``False`` only when all of these hold (anything else answers ``True``):

- the trigger is a :class:`~backend.engine.nodes.base.TriggerBehaviour` that does not
  look at the run input (it does not override ``problem``); its step's input and output
  are then the run input, passed on untouched;
- the trigger has at least one outgoing transition, and every step it leads to is an
  inline step whose behaviour is ``input_blind`` for its config (its output is built
  from its resolved config alone, e.g. a Set without *Keep input fields*) and does not
  take a keyed input: those are the only steps whose input holds the field, and no step
  output (so neither the run's output) can hold it;
- each expression of those steps reads its input (``$``, ``$$`` or a bare name) only
  through a chain of field names whose first name is not the field, and is built only of
  literals, such paths, operators, conditions, parentheses, array and object
  constructors and function calls given every parameter (a missing parameter may be the
  context, i.e. the whole input); no filter, wildcard, lambda, variable binding,
  ``$eval`` or other construct is accepted there;
- no expression of any step names ``$trigger`` or ``$steps`` except as a chain of field
  names that does not reach the field (``$trigger.item.n``, ``$steps.<trigger>.index``,
  ``$steps.<other step>...``) and none calls ``$eval`` (which could name them in text).

The answer is a pure function of the graph (cached by its content hash).
"""

from __future__ import annotations

import functools
from typing import Any, Final

from backend.engine.expression_limits import charged_environment
from backend.engine.expressions import ExpressionError, compile_expression
from backend.engine.nodes import NODE_TYPES
from backend.engine.nodes.base import InlineBehaviour, TriggerBehaviour
from backend.engine.nodes.registry import NodeRegistry
from designer_schema.graph import WorkflowGraph

__all__ = ["reads_input_field"]


@functools.cache
def _builtins() -> Any:
    """The frame of the built-in functions expressions are evaluated with."""
    return charged_environment()


_CACHE: dict[tuple[str, str], bool] = {}
_CACHE_MAX: Final = 4096
_LITERALS: Final = frozenset({"string", "number", "value"})
# every attribute of jsonata-python's parse-tree nodes that holds sub-expressions
_CHILDREN: Final = (
    "expression", "arguments", "predicate", "stages", "expr", "group", "lhs", "rhs",
    "lhs_object", "rhs_object", "terms", "condition", "then", "_else", "expressions",
    "update", "delete", "procedure", "body", "steps",
)  # fmt: skip
_ANY_TYPE: Final = "[asnblfom]"  # jsonata-python's regex of the signature type x
_ROOT_VARIABLES: Final = frozenset({"", "$"})  # ``$`` and ``$$``: the input document


def reads_input_field(graph: WorkflowGraph, name: str, nodes: NodeRegistry = NODE_TYPES) -> bool:
    """Whether any step of ``graph`` can observe field ``name`` of the run input (see the
    module docstring for the rule; ``True`` whenever in doubt)."""
    key = (graph.content_hash, name)
    cacheable = bool(graph.content_hash) and nodes is NODE_TYPES
    if cacheable and key in _CACHE:
        return _CACHE[key]
    answer = _reads(graph, name, nodes)
    if cacheable:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[key] = answer
    return answer


def _reads(graph: WorkflowGraph, name: str, nodes: NodeRegistry) -> bool:
    trigger = graph.step(graph.trigger)
    behaviour = nodes.behaviour(trigger)
    if not isinstance(behaviour, TriggerBehaviour) or (
        type(behaviour).problem is not TriggerBehaviour.problem
    ):
        return True
    first = {t.target for t in graph.outgoing(graph.trigger)}
    if not first:
        return True  # the trigger's output would be the run's output
    for step_id in first:
        step = graph.step(step_id)
        inline = nodes.behaviour(step)
        if not isinstance(inline, InlineBehaviour) or inline.keyed_input:
            return True
        if not inline.input_blind(step):
            return True
    for step in graph.steps:
        for source in step.expressions.values():
            try:
                tree = compile_expression(source).tree
            except ExpressionError:
                return True
            if not _names_safely(tree, graph.trigger, name):
                return True
            if step.id in first and not _root_safe(tree, name):
                return True
    return False


_STEP_EXTRAS: Final = ("stages", "predicate", "group", "focus", "index", "tuple", "ancestor")
"""Attributes of a path step that make it more than a field name (filters, grouping,
``@$x`` / ``#$i`` bindings, ``%`` parents)."""


def _plain(step: Any) -> bool:
    """Whether a path step (or a path) is free of filters, grouping and bindings."""
    return not any(getattr(step, extra, None) for extra in _STEP_EXTRAS)


def _names(path: Any) -> list[str] | None:
    """The field names after a path's first step, or ``None`` when the path or any of its
    steps is anything but plain names (a filter, a block, a wildcard, a binding, ...)."""
    steps = list(path.steps or [])
    if not steps or not _plain(path) or not all(_plain(step) for step in steps):
        return None
    names: list[str] = []
    for step in steps[1:]:
        if getattr(step, "type", None) != "name":
            return None
        names.append(str(step.value))
    return names


def _variable_chain_safe(variable: str, names: list[str] | None, trigger: str, name: str) -> bool:
    """Whether ``$variable.names...`` cannot reach run-input field ``name``."""
    if variable == "trigger":
        return bool(names) and names is not None and names[0] != name
    # $steps: $steps.<trigger>.<field> must not be the field; other steps' outputs never
    # hold it (the module docstring)
    if names is None or not names:
        return False
    return names[0] != trigger or (len(names) > 1 and names[1] != name)


def _names_safely(node: Any, trigger: str, name: str) -> bool:
    """No ``$trigger`` / ``$steps`` anywhere in ``node`` but as a safe chain of names,
    no ``$eval``."""
    stack = [node]
    while stack:
        item = stack.pop()
        if item is None:
            continue
        if isinstance(item, list | tuple):
            stack.extend(item)
            continue
        kind = getattr(item, "type", None)
        if kind == "path":
            steps = list(item.steps or [])
            head: Any = steps[0] if steps else None
            if getattr(head, "type", None) == "variable" and head.value in ("trigger", "steps"):
                if not _variable_chain_safe(str(head.value), _names(item), trigger, name):
                    return False
                stack.extend(steps[1:])
                continue
        if kind == "variable" and item.value in ("trigger", "steps", "eval"):
            return False  # bare, bound elsewhere, passed on, or $eval
        for attr in _CHILDREN:
            child = getattr(item, attr, None)
            if child is not None and not isinstance(child, str | int | float | bool):
                stack.append(child)
    return True


def _root_safe(node: Any, name: str) -> bool:
    """Whether an expression whose input (``$``) holds field ``name`` reads the input only
    through chains of names not starting with it, from the accepted constructs."""
    if node is None:
        return True
    if isinstance(node, list | tuple):
        return all(_root_safe(item, name) for item in node)
    kind = getattr(node, "type", None)
    if kind in _LITERALS:
        return True
    if kind == "name":
        return str(node.value) != name and _plain(node)
    if kind == "path":
        names = _names(node)
        if names is None:
            return False
        head = node.steps[0]
        if head.type == "name":
            return str(head.value) != name
        if head.type == "variable":
            if head.value in _ROOT_VARIABLES:
                return bool(names) and names[0] != name
            return bool(head.value in ("trigger", "steps", "run"))  # see _names_safely
        return False
    if kind == "variable":
        return bool(node.value == "run")  # $run: the run's id, workflow and version
    if kind == "binary":
        return _root_safe(node.lhs, name) and _root_safe(node.rhs, name)
    if kind == "unary" and node.value == "-":
        return _root_safe(node.expression, name)
    if kind == "unary" and node.value == "[":
        return _root_safe(node.expressions, name)
    if kind == "unary" and node.value == "{":
        return _root_safe(node.lhs_object, name)
    if kind == "condition":
        return all(_root_safe(getattr(node, a, None), name) for a in ("condition", "then", "_else"))
    if kind == "block":
        return _root_safe(node.expressions, name)
    if kind == "function":
        return _call_safe(node, name)
    return False


def _call_safe(node: Any, name: str) -> bool:
    """A call of a built-in function given every parameter of its signature (none left
    for the context to fill), with safe arguments."""
    procedure: Any = getattr(node, "procedure", None)
    if getattr(procedure, "type", None) != "variable" or procedure.value == "eval":
        return False
    function = _builtins().lookup(str(procedure.value))
    signature = getattr(function, "signature", None)
    params = getattr(signature, "_params", None)
    arguments = list(getattr(node, "arguments", None) or [])
    if params is None or not _fills_every_parameter(params, len(arguments)):
        return False
    return _root_safe(arguments, name)


def _fills_every_parameter(params: list[Any], given: int) -> bool:
    """Whether ``given`` arguments leave no context parameter for the context to fill.

    jsonata-python matches the arguments' type symbols against one regular expression with
    a group per parameter (``signature.py``) and passes the context for a context
    parameter whose group matched nothing: that cannot happen when every parameter has
    an argument, nor when the only context parameter comes first, accepts every type
    (``x``) and the ones after it are optional (``$string(item.id)``)."""
    if given >= len(params):
        return True
    first, rest = params[0], params[1:]
    return (
        given >= 1
        and first.context
        and first.regex == _ANY_TYPE + "?"
        and all(not p.context and str(p.regex).endswith("?") for p in rest)
    )
