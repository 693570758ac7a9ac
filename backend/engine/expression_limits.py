"""The budget of one JSONata evaluation: wall time, nesting depth and the size of what it makes.

jsonata-python evaluates an expression tree in Python; a few of its built-in functions do
their work in one call (a regular-expression match, ``$pad``, ``$join``, ``$replace``) or in
a loop that never returns to the evaluator (``$distinct`` is quadratic). This module bounds
every evaluation with four mechanisms, each naming the limit it enforces when it stops one:

- **regular expressions** run on RE2 (package ``google-re2``), whose matching time is
  linear in the input: no pattern can backtrack catastrophically (``/^(a+)+$/`` on 10,000
  characters takes microseconds). RE2 has no backreferences (``\\1``) or lookaround
  (``(?=...)``); such a pattern is a compile error (see :func:`re2_engine`).
- **time**: the evaluator's entry/exit hooks check the deadline at every node, and a
  watchdog thread interrupts a built-in function still running at the deadline
  (:class:`backend.engine.watchdog.Watchdog`: an asynchronous exception delivered between
  Python bytecodes; a single C call, such as one RE2 match or one sort, finishes first, and
  is bounded by the sizes below).
- **size**: a string or array the evaluation produces (the result of a function, operator
  or constructor; values read from the input pass as they are) may not exceed
  :attr:`ExpressionLimits.max_string_length` characters or
  :attr:`ExpressionLimits.max_array_length` items, and all produced values together may not
  exceed :attr:`ExpressionLimits.max_produced` characters plus items. ``$pad``, ``$join``
  and ``$replace`` compute the size of their result *before* building it, so a request for
  100 MB is refused without allocating it; ``$fromMillis``/``$now`` pictures may not ask for
  a field width over :attr:`ExpressionLimits.max_picture_width`.
- **depth**: nested evaluation (recursion) deeper than :attr:`ExpressionLimits.max_depth`.

Every stop raises :class:`LimitExceeded`, a ``BaseException`` so that no ``except
Exception`` inside the library can swallow it; :mod:`backend.engine.expressions` turns it
into an ``ExpressionError`` whose message names the limit.
"""

from __future__ import annotations

import copy
import functools
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import re2
from jsonata import Jsonata
from jsonata.functions import Functions
from jsonata.regex_engine import RegexFlags
from jsonata.utils import Utils

__all__ = [
    "DEFAULT_LIMITS",
    "BoundedFunctions",
    "Budget",
    "ExpressionLimits",
    "LimitExceeded",
    "charged_environment",
    "re2_engine",
]


@dataclass(frozen=True)
class ExpressionLimits:
    """What one evaluation may spend (docs/expressions.md, "Limits").

    Attributes:
        timeout_ms: wall-clock budget in milliseconds (``None``: no time limit).
        max_depth: deepest nesting of evaluated nodes (function calls, blocks, ...).
        max_string_length: longest string a function or operator may produce, characters.
        max_array_length: longest array a function, operator or constructor may produce.
        max_produced: characters plus array items produced by the whole evaluation.
        max_picture_width: largest field width a date/time picture may ask for.
    """

    timeout_ms: int | None = 1000
    max_depth: int = 1000
    max_string_length: int = 5_000_000
    max_array_length: int = 1_000_000
    max_produced: int = 20_000_000
    max_picture_width: int = 100


DEFAULT_LIMITS = ExpressionLimits()
"""The limits every step evaluation runs with."""


class LimitExceeded(BaseException):
    """An evaluation hit one of its limits.

    Attributes:
        limit: which one: ``"time"``, ``"depth"``, ``"string length"``, ``"array length"``,
            ``"produced size"`` or ``"picture width"``.
        message: a sentence naming the limit and its value.
        code: JSONata's error code for the limits JSONata defines (``D1012`` time,
            ``D1011`` depth), else ``None``.
    """

    _CODES = {"time": "D1012", "depth": "D1011"}

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.message = message
        self.code = self._CODES.get(limit)


# Node types whose result is read from the input or passed through unchanged, or was
# charged where it was made (a function call's result is charged by the built-in that made
# it, see _ChargedFunction); everything else (operators, constructors, ...) is counted.
_NOT_CHARGED = frozenset(
    {"path", "name", "variable", "string", "number", "value", "regex", "parent"}
    | {"function", "partial", "apply"}
)


class Budget:
    """The spending of one evaluation; install it with :meth:`install` on its frame.

    Raises :class:`LimitExceeded` from the evaluator's hooks as soon as a limit is passed.
    One ``Budget`` serves one evaluation in one thread.
    """

    def __init__(self, limits: ExpressionLimits, deadline: float | None = None) -> None:
        """``deadline`` (``time.monotonic()`` seconds) ends the evaluation before its own
        ``limits.timeout_ms`` when it comes first (a budget shared with other evaluations)."""
        self.limits = limits
        own = None if limits.timeout_ms is None else time.monotonic() + limits.timeout_ms / 1000
        ends = [d for d in (own, deadline) if d is not None]
        self.deadline = min(ends) if ends else None
        self.depth = 0
        self.produced = 0

    def install(self, frame: Jsonata.Frame) -> None:
        """Bind the entry/exit hooks into ``frame`` (the evaluation's bindings; the instance
        evaluated must have been made with :func:`charged_environment`)."""
        frame.bind("__evaluate_entry", self._entry)
        frame.bind("__evaluate_exit", self._exit)

    def time_exceeded(self) -> LimitExceeded:
        """The error for a spent time budget."""
        return LimitExceeded(
            "time", f"expression stopped: time limit of {self.limits.timeout_ms} ms exceeded"
        )

    def check_time(self) -> None:
        """Raise when the deadline has passed."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise self.time_exceeded()

    def _entry(self, expr: Any, _input: Any, env: Any) -> None:
        if not env.is_parallel_call:
            self.depth += 1
            if self.depth > self.limits.max_depth:
                raise LimitExceeded(
                    "depth",
                    f"expression stopped: nesting depth limit of {self.limits.max_depth} exceeded",
                )
        self.check_time()

    def _exit(self, expr: Any, _input: Any, env: Any, result: Any) -> None:
        if not env.is_parallel_call:
            self.depth -= 1
        self.check_time()
        if getattr(expr, "type", None) not in _NOT_CHARGED:
            self.charge(result)

    def charge(self, value: Any) -> None:
        """Count a produced value against the size limits (raises when one is passed)."""
        if isinstance(value, str):
            self.check_string(len(value))
            self.add(len(value))
        elif isinstance(value, list):
            # a range's len() counts one item too many (jsonata-python); its items do not
            length = (
                len(range(value.a, value.b)) if isinstance(value, Utils.RangeList) else len(value)
            )
            self.check_array(length)
            self.add(length)

    def check_string(self, length: int) -> None:
        """Raise when a string of ``length`` characters is over the limit."""
        if length > self.limits.max_string_length:
            raise LimitExceeded(
                "string length",
                f"expression stopped: a string of {length:,} characters is over the limit "
                f"of {self.limits.max_string_length:,}",
            )

    def check_array(self, length: int) -> None:
        """Raise when an array of ``length`` items is over the limit."""
        if length > self.limits.max_array_length:
            raise LimitExceeded(
                "array length",
                f"expression stopped: an array of {length:,} items is over the limit "
                f"of {self.limits.max_array_length:,}",
            )

    def add(self, amount: int) -> None:
        """Add ``amount`` characters/items to the evaluation's total."""
        self.produced += amount
        if self.produced > self.limits.max_produced:
            raise LimitExceeded(
                "produced size",
                "expression stopped: it produced more than "
                f"{self.limits.max_produced:,} characters and array items in total",
            )


_current = threading.local()


@contextmanager
def active(budget: Budget) -> Iterator[None]:
    """Make ``budget`` the one the bounded built-ins of this thread charge."""
    previous = getattr(_current, "budget", None)
    _current.budget = budget
    try:
        yield
    finally:
        _current.budget = previous


def _budget() -> Budget:
    budget: Budget | None = getattr(_current, "budget", None)
    return budget if budget is not None else Budget(DEFAULT_LIMITS)


_WIDTH = re.compile(r"\d+")


class BoundedFunctions:
    """Built-ins that size their result before building it (same signatures as JSONata's).

    Each raises :class:`LimitExceeded` (``"string length"``, ``"picture width"``) instead of
    allocating an oversized string, then delegates to jsonata-python's implementation.
    """

    @staticmethod
    def pad(string: str | None, width: int | None, char: str | None) -> Any:
        """``$pad``: refuse a width over the string limit."""
        if isinstance(width, int | float) and string is not None:
            _budget().check_string(int(abs(width)))
        return Functions.pad(string, width, char)

    @staticmethod
    def join(strs: list[str] | None, separator: str | None) -> Any:
        """``$join``: refuse a result over the string limit."""
        if strs is not None and isinstance(strs, list):
            size = sum(len(s) for s in strs if isinstance(s, str))
            size += max(len(strs) - 1, 0) * len(separator or "")
            _budget().check_string(size)
        return Functions.join(strs, separator)

    @staticmethod
    def replace(string: str | None, pattern: Any, replacement: Any, limit: int | None) -> Any:
        """``$replace``: refuse a result over the string limit (text replacements only).

        The result is at most ``len(string) + matches * len(replacement) + refs * len(string)``
        characters, where ``refs`` counts the ``$`` group references of the replacement
        (each group lies inside its non-overlapping match).
        """
        if isinstance(string, str) and isinstance(replacement, str) and replacement:
            matches = _count_matches(string, pattern, limit)
            refs = replacement.count("$")
            _budget().check_string(len(string) + matches * len(replacement) + refs * len(string))
        return Functions.replace(string, pattern, replacement, limit)

    @staticmethod
    def datetime_from_millis(millis: Any, picture: str | None, timezone: str | None) -> Any:
        """``$fromMillis``: refuse picture widths over the limit."""
        _check_picture(picture)
        return Functions.datetime_from_millis(millis, picture, timezone)

    @staticmethod
    def now(picture: str | None, timezone: str | None) -> Any:
        """``$now``: refuse picture widths over the limit."""
        _check_picture(picture)
        return Functions.now(picture, timezone)


def _count_matches(string: str, pattern: Any, limit: int | None) -> int:
    cap = limit if isinstance(limit, int) and limit >= 0 else None
    if isinstance(pattern, str):
        found = string.count(pattern) if pattern else 0
    elif hasattr(pattern, "finditer"):
        found = 0
        for _ in pattern.finditer(string):
            found += 1
            if cap is not None and found >= cap:
                break
    else:
        return 0
    return found if cap is None else min(found, cap)


def _check_picture(picture: str | None) -> None:
    if not picture:
        return
    widest = _budget().limits.max_picture_width
    for number in _WIDTH.findall(picture):
        if len(number) > 6 or int(number) > widest:
            raise LimitExceeded(
                "picture width",
                f"expression stopped: the picture asks for a width of {number}, over the "
                f"limit of {widest}",
            )


class _ChargedFunction(Jsonata.JNativeFunction):  # type: ignore[misc]
    """A built-in whose result is charged to the thread's budget.

    Charging here rather than at the call node's exit also counts calls in tail position,
    which jsonata-python evaluates outside the exit hook (tail-call optimisation).
    """

    def call(self, input: Any, args: Any) -> Any:
        result = super().call(input, args)
        _budget().charge(result)
        return result


def charged_environment() -> Jsonata.Frame:
    """A root frame for a compiled expression whose built-ins charge the budget.

    It holds every built-in of jsonata-python as a :class:`_ChargedFunction` (the ones of
    :data:`_BOUNDED` replaced by their :class:`BoundedFunctions` versions) in front of the
    library's own frame; give it to ``Jsonata.environment`` after compiling.
    """
    frame = Jsonata.Frame(Jsonata.static_frame)
    frame.bindings.update(_charged_builtins())
    return frame


@functools.cache
def _charged_builtins() -> dict[str, Jsonata.JNativeFunction]:
    """Every built-in of jsonata-python as a :class:`_ChargedFunction`."""
    builtins = {
        name: value
        for name, value in Jsonata.static_frame.bindings.items()
        if isinstance(value, Jsonata.JNativeFunction)
    }
    for name, signature, method in _BOUNDED:
        builtins[name] = Jsonata.function(name, signature, BoundedFunctions, method)
    charged: dict[str, Jsonata.JNativeFunction] = {}
    for name, function in builtins.items():
        wrapped = copy.copy(function)
        wrapped.__class__ = _ChargedFunction
        charged[name] = wrapped
    return charged


_BOUNDED: tuple[tuple[str, str, str], ...] = (
    ("pad", "<s-ns?:s>", "pad"),
    ("join", "<a<s>s?:s>", "join"),
    ("replace", "<s-(sf)(sf)n?:s>", "replace"),
    ("fromMillis", "<n-s?s?:s>", "datetime_from_millis"),
    ("now", "<s?s?:s>", "now"),
)
"""(JSONata name, signature as jsonata-python declares it, BoundedFunctions method)."""


def re2_engine(pattern: str, flags: RegexFlags) -> Any:
    """Compile a JSONata regex literal with RE2 (linear-time matching, no backtracking).

    ``flags.case_insensitive`` and ``flags.multiline`` map to RE2's ``(?i)`` and ``(?m)``.
    Raises ``ValueError`` naming the pattern when RE2 cannot compile it (backreferences and
    lookaround are not supported), which the compiler reports as a syntax error.
    """
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not flags.case_insensitive
    source = f"(?m){pattern}" if flags.multiline else pattern
    try:
        return re2.compile(source, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ValueError(
            f"regular expression /{pattern}/ is not supported: {reason} (expressions use a "
            "linear-time engine without backreferences or lookaround)"
        ) from None
