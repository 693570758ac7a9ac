"""JSONata expressions: compile once, evaluate per step, resolve a step's config.

Railyard maps data between steps with JSONata (package ``jsonata-python``). In a diagram a
config field whose value is a string starting with ``=`` is an expression; the compiler
strips the marker and stores the source in ``Step.expressions`` (field path -> source).
Literal fields never go through the evaluator.

Evaluation context (the contract every caller of :func:`resolve_config` and
:meth:`CompiledExpression.evaluate` follows)
---------------------------------------------------------------------------------------------

- ``$`` (the root input document, also what a bare path such as ``body.x`` reads) is the
  step's *input*: the output of the predecessor step whose transition activated it.
- Bindings (pass them without the leading ``$``; ``{"trigger": ...}`` is ``$trigger``):

  ===========  =====================================================================
  ``$trigger`` the trigger step's output (e.g. the webhook request ``{"body": ...}``)
  ``$steps``   object: step id -> output of every completed step of this run
               (``$steps.set1.total``)
  ``$run``     ``{"id": str, "workflow_id": str, "version": int}``
  ``$item``    reserved: the current item inside a for-each
  ``$index``   reserved: the 0-based index of ``$item``
  ===========  =====================================================================

- Secrets are never in the context; connectors receive credentials separately.
- ``$now()`` and ``$millis()`` return the time the evaluation started (one value per
  evaluation, as JSONata specifies).

Results are plain Python JSON values: ``dict``, ``list``, ``str``, ``int``, ``float``,
``bool`` and ``None``. JSONata's *undefined* (no match) and ``null`` both become ``None``;
JSONata sequences become ``list``; numbers are returned as jsonata-python computes them
(arithmetic yields ``int`` for integral results, a float read from the input stays a
float); a function value becomes ``None`` (it has no JSON form).

Performance: compiling costs about as much as evaluating a small mapping, so sources are
compiled once (an LRU cache of 4096 entries keyed by source) and each evaluation reuses
the parsed tree. The plainest expressions (a field reference, a literal, one arithmetic or
comparison operator) are evaluated directly, with jsonata-python deciding every input the
direct evaluation is not certain of (:mod:`backend.engine.expression_plain`).

Limits: a source longer than :data:`MAX_SOURCE_LENGTH` characters is refused at compile;
each evaluation runs within :class:`~backend.engine.expression_limits.ExpressionLimits`
(1000 ms of wall time, nesting depth, size of the strings and arrays it produces) and
regular expressions run on RE2 (linear time), so a runaway expression
(``($f := function(){$f()}; $f())``, ``$contains(s, /^(a+)+$/)``, ``$pad("", 1e8)``) fails
with an :class:`ExpressionError` naming the limit (``limit`` attribute) instead of blocking
the worker or exhausting its memory (see :mod:`backend.engine.expression_limits`).

jsonata-python quirks handled here (see the module-level helpers):

- the library keeps the "current instance" in a thread-local and evaluates against it, so
  :meth:`CompiledExpression.evaluate` installs a shallow per-evaluation copy first;
- the constructor's ``timeout`` is measured from *compile* time, so the budget's hooks
  are attached to a fresh frame per evaluation instead;
- runtime failures surface as ``JException`` but also as plain ``ValueError`` /
  ``ZeroDivisionError`` / ``RecursionError``; all become :class:`ExpressionError`;
- an integer turned into text is rounded to 15 digits; Railyard keeps every digit
  (:mod:`backend.engine.expression_numbers`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import time
from collections.abc import Mapping
from typing import Any

from jsonata import JException, Jsonata
from jsonata.utils import Utils

from backend.engine.expression_limits import (
    DEFAULT_LIMITS,
    Budget,
    ExpressionLimits,
    LimitExceeded,
    active,
    charged_environment,
    re2_engine,
)
from backend.engine.expression_numbers import InexactNumber
from backend.engine.expression_numbers import install as _exact_integers
from backend.engine.expression_plain import Unsure, plain_evaluator
from backend.engine.expression_slice import Deferred, current_slice
from backend.engine.unstorable import storable_problem
from backend.engine.watchdog import WATCHDOG

_exact_integers()

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "MAX_SOURCE_LENGTH",
    "CompiledExpression",
    "ExpressionError",
    "ExpressionLimits",
    "JsonataChecker",
    "compile_expression",
    "resolve_config",
]

DEFAULT_TIMEOUT_MS = DEFAULT_LIMITS.timeout_ms
"""Default wall-clock budget of one evaluation, in milliseconds."""

MAX_SOURCE_LENGTH = 10_000
"""Longest expression source accepted, in characters (a longer one is a compile error)."""


class ExpressionError(Exception):
    """A JSONata expression failed to compile or evaluate.

    Attributes:
        message: the human-readable message (also ``str(error)``).
        source: the expression source (without the leading ``=``).
        position: 0-based character offset into ``source`` where the parser or evaluator
            located the problem, or ``None`` when unknown.
        code: the JSONata error code (``S0201``, ``T2001``, ...) or ``None``.
        field: the config field path the expression belongs to, when known.
        limit: the limit that stopped it (``"time"``, ``"depth"``, ``"string length"``,
            ``"array length"``, ``"produced size"``, ``"picture width"``,
            ``"expression length"``), or ``None`` for any other error.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str,
        position: int | None = None,
        code: str | None = None,
        field: str | None = None,
        limit: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.source = source
        self.position = position
        self.code = code
        self.field = field
        self.limit = limit


def _position(err: JException) -> int | None:
    location = getattr(err, "location", None)
    if isinstance(location, int) and location >= 0:
        return location
    return None


def _code(err: JException) -> str | None:
    code = getattr(err, "error", None)
    return code if isinstance(code, str) else None


class CompiledExpression:
    """A parsed JSONata expression; cheap to evaluate many times, safe to share.

    Build it with :func:`compile_expression` (cached) rather than directly.
    """

    __slots__ = ("_jsonata", "_plain", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        if len(source) > MAX_SOURCE_LENGTH:
            raise ExpressionError(
                f"expression of {len(source):,} characters is over the limit of "
                f"{MAX_SOURCE_LENGTH:,}",
                source=source[:100],
                limit="expression length",
            )
        previous = getattr(Jsonata.CURRENT, "jsonata", None)
        try:
            self._jsonata = Jsonata(source, re2_engine)
            self._jsonata.environment = charged_environment()
        except JException as err:
            raise ExpressionError(
                f"syntax error: {err}", source=source, position=_position(err), code=_code(err)
            ) from None
        except Exception as err:  # the tokenizer can raise plain Python errors
            raise ExpressionError(f"syntax error: {err}", source=source) from None
        finally:
            # Jsonata() installs itself as the thread's "current" instance; undo that so a
            # compile in the middle of another evaluation cannot disturb it.
            _restore_current(previous)
        # The documents are JSON already (decoded JSON, or built by the engine from it);
        # jsonata-python's own check walks the whole input on every evaluation (1.5 s for
        # a 5 MB list on a 2-core machine, over the time budget), so it is switched off.
        self._jsonata.set_validate_input(False)
        errors = self._jsonata.errors
        if errors:
            first = errors[0]
            position = _position(first) if isinstance(first, JException) else None
            raise ExpressionError(f"syntax error: {first}", source=source, position=position)
        # the plainest shapes (a field, a literal, one operator) are evaluated directly
        self._plain = plain_evaluator(self._jsonata.ast)

    def __repr__(self) -> str:
        return f"CompiledExpression({self.source!r})"

    @property
    def tree(self) -> Any:
        """The parse tree (jsonata-python's ``Parser.Symbol`` nodes; read-only, shared)."""
        return self._jsonata.ast

    def evaluate(
        self,
        data: Any,
        bindings: Mapping[str, Any] | None = None,
        *,
        timeout_ms: int | None = DEFAULT_TIMEOUT_MS,
        limits: ExpressionLimits = DEFAULT_LIMITS,
        deadline: float | None = None,
    ) -> Any:
        """Evaluate against ``data`` (the ``$`` document) with variable ``bindings``.

        ``bindings`` keys are variable names without ``$`` (``{"steps": {...}}``).
        ``data`` and binding values must be JSON-like (dict, list, str, int, float, bool,
        None). Returns a plain JSON-like value (see the module docstring; undefined ->
        ``None``). ``limits`` bound the evaluation, with ``timeout_ms`` milliseconds of
        wall time (``None`` = no time limit); ``deadline`` (``time.monotonic()`` seconds),
        when given, ends it earlier: the time budget several evaluations share. Raises
        :class:`ExpressionError` on any runtime error; one that stopped at a limit has
        ``limit`` set and says which.
        """
        plain = self._plain
        if (
            plain is not None
            and plain.depth <= limits.max_depth
            and (timeout_ms is None or timeout_ms > 0)
            and (deadline is None or time.monotonic() < deadline)
        ):
            try:
                return _to_plain(plain(data, bindings))
            except Unsure:
                pass  # jsonata-python decides (backend/engine/expression_plain.py)
        if timeout_ms != limits.timeout_ms:
            limits = dataclasses.replace(limits, timeout_ms=timeout_ms)
        budget = Budget(limits, deadline)
        frame = Jsonata.Frame(None)
        budget.install(frame)
        if bindings:
            for name, value in bindings.items():
                frame.bind(name, value)
        # jsonata-python evaluates against the thread's "current" instance (a thread-local
        # set by the last Jsonata() constructed in this thread). Give every evaluation its
        # own shallow copy (the parsed tree is shared, read-only) so $now() reads the right
        # timestamp and concurrent threads never share mutable evaluation state.
        instance = copy.copy(self._jsonata)
        previous = getattr(Jsonata.CURRENT, "jsonata", None)
        Jsonata.CURRENT.jsonata = instance
        try:
            with active(budget):
                result = WATCHDOG.call(
                    budget.deadline, lambda: instance.evaluate(data, frame), budget.time_exceeded
                )
        except LimitExceeded as err:
            raise ExpressionError(
                err.message, source=self.source, code=err.code, limit=err.limit
            ) from None
        except JException as err:
            raise ExpressionError(
                str(err), source=self.source, position=_position(err), code=_code(err)
            ) from None
        except RecursionError:
            raise ExpressionError(
                "expression recursed too deeply", source=self.source, code="D1011", limit="depth"
            ) from None
        except InexactNumber as err:
            raise ExpressionError(str(err), source=self.source, code="inexact_number") from None
        except Exception as err:
            raise ExpressionError(f"{type(err).__name__}: {err}", source=self.source) from None
        finally:
            _restore_current(previous)
        return _to_plain(result)


def _restore_current(previous: Any) -> None:
    """Put back the thread's previous "current" Jsonata instance (or none at all)."""
    if previous is None:
        if hasattr(Jsonata.CURRENT, "jsonata"):
            del Jsonata.CURRENT.jsonata
    else:
        Jsonata.CURRENT.jsonata = previous


def _to_plain(value: Any) -> Any:
    """Convert a jsonata-python result into fresh plain JSON-like Python values.

    Containers are rebuilt, so the result never aliases the input document.
    """
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if value is Utils.NULL_VALUE:
        return None
    if isinstance(value, dict):
        return {str(k): _to_plain(v) for k, v in value.items()}
    if isinstance(value, Utils.RangeList):
        # RangeList.__iter__ is off by one (it stops before the upper bound); index it.
        return [value[i] for i in range(len(value))]
    if isinstance(value, (list, tuple)):
        return [_to_plain(v) for v in value]
    # functions, regex matchers and other internal values have no JSON form
    return None


@functools.lru_cache(maxsize=4096)
def compile_expression(source: str) -> CompiledExpression:
    """Parse ``source`` (without the leading ``=``) into a :class:`CompiledExpression`.

    Results are cached by source (LRU, 4096 entries), so compiling the expressions of a
    workflow version once and looking them up again later is cheap. Raises
    :class:`ExpressionError` with the parser's message, ``position`` and ``code`` on a
    syntax error (errors are not cached).
    """
    return CompiledExpression(source)


class JsonataChecker:
    """``designer_schema.catalog.ExpressionChecker`` backed by jsonata-python."""

    def check(self, source: str) -> str | None:
        """Return ``None`` when ``source`` parses, else a one-line message with position."""
        try:
            compile_expression(source)
        except ExpressionError as err:
            if err.position is not None:
                return f"{err.message} (at position {err.position})"
            return err.message
        return None


def _copied(value: Any) -> Any:
    """A deep copy of ``value``: new dicts and lists, the same strings, numbers, booleans
    and ``None`` (immutable); ``copy.deepcopy`` for anything else. A config is JSON, and
    this is about five times faster on it than ``copy.deepcopy``, whose memo and dispatch
    were a sixth of the engine's start of a Set -> If run."""
    kind = type(value)
    if kind is dict:
        return {key: _copied(item) for key, item in value.items()}
    if kind is list:
        return [_copied(item) for item in value]
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    return copy.deepcopy(value)


def _split_path(path: str) -> list[str]:
    return path.split(".")


def _assign(target: Any, parts: list[str], value: Any, path: str) -> None:
    node = target
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        if isinstance(node, dict):
            if last:
                node[part] = value
                return
            child = node.get(part)
            if child is None:
                child = {}
                node[part] = child
            node = child
        elif isinstance(node, list):
            try:
                index = int(part)
            except ValueError:
                raise ExpressionError(
                    f"field {path!r}: {part!r} is not a list index",
                    source="",
                    field=path,
                ) from None
            if index < 0:
                index += len(node)
            if index == len(node):
                node.append(None if last else {})
            if not 0 <= index < len(node):
                raise ExpressionError(
                    f"field {path!r}: list index {part} out of range", source="", field=path
                )
            if last:
                node[index] = value
                return
            if node[index] is None:
                node[index] = {}
            node = node[index]
        else:
            prefix = ".".join(parts[:depth])
            raise ExpressionError(
                f"field {path!r}: {prefix!r} is a {type(node).__name__}, not an object or list",
                source="",
                field=path,
            )


def resolve_config(
    config: Mapping[str, Any],
    expressions: Mapping[str, str],
    data: Any,
    bindings: Mapping[str, Any] | None = None,
    *,
    timeout_ms: int | None = DEFAULT_TIMEOUT_MS,
) -> dict[str, Any]:
    """Return a deep copy of ``config`` with every expression replaced by its value.

    ``expressions`` maps a *field path* to a JSONata source. A path is dotted: ``"url"``,
    ``"mapping.total"``, ``"headers.X-Token"``, ``"items.0"`` (a list index). Missing
    intermediate objects are created; an index equal to the list's length appends. Keys
    that themselves contain a dot cannot be addressed (not supported). ``data`` and
    ``bindings`` follow the module's evaluation context contract.

    All the expressions of one config share one time budget of ``timeout_ms``
    milliseconds, so a config with many fields cannot multiply it. Within
    :func:`~backend.engine.expression_slice.loop_slice` they share the slice too, and
    running past it raises :class:`~backend.engine.expression_slice.Deferred` (the step
    is left for a worker) instead of failing at the time limit.

    Raises :class:`ExpressionError` whose message starts with ``field '<path>':`` and
    whose ``field`` attribute is the path, for syntax errors, runtime errors (``limit``
    set when a limit stopped it), paths that cannot be assigned, and values PostgreSQL
    cannot store (U+0000, a lone surrogate: :mod:`backend.engine.unstorable`; ``field``
    then names where inside the value, e.g. ``mapping.s`` or ``mapping.s.items[0]``).
    """
    resolved: dict[str, Any] = {key: _copied(value) for key, value in config.items()}
    now = time.monotonic()
    deadline = None if timeout_ms is None else now + timeout_ms / 1000
    sliced = current_slice()
    held = None if sliced is None else now + sliced.ms / 1000  # the loop's slice (module)
    if held is not None and (deadline is None or held < deadline):
        deadline = held
    else:
        held = None
    for path, source in expressions.items():
        try:
            value = compile_expression(source).evaluate(
                data, bindings, timeout_ms=timeout_ms, deadline=deadline
            )
        except ExpressionError as err:
            if held is not None and sliced is not None and err.limit == "time":
                sliced.deferred = True  # too long for here: a worker evaluates it
                raise Deferred(path) from None
            raise ExpressionError(
                f"field {path!r}: {err.message}",
                source=err.source,
                position=err.position,
                code=err.code,
                field=path,
                limit=err.limit,
            ) from None
        found = storable_problem(value, path)
        if found is not None:  # PostgreSQL could not store it: fail the step, name the field
            raise ExpressionError(
                f"field {found.field!r}: {found.value_message}", source=source, field=found.field
            )
        try:
            _assign(resolved, _split_path(path), value, path)
        except ExpressionError as err:
            err.source = source
            raise
    return resolved
