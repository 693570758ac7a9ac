"""The JavaScript a sandbox process runs around the user's code, and how its errors are read.

Three scripts run in a fresh V8 isolate per job:

1. :func:`prelude` removes what is not ECMAScript or could wait (``setTimeout``,
   ``clearTimeout`` and the timer manager mini-racer installs, ``WebAssembly``,
   ``SharedArrayBuffer``, ``Atomics``; the timer globals are declared with ``var`` and
   cannot be deleted, so they become ``undefined``, and the timer class left in scope
   needs ``SharedArrayBuffer`` and ``Atomics``, which are gone), installs a
   ``console`` that records calls within the log limits, keeps ``JSON.parse`` and
   ``JSON.stringify`` where the user's code cannot replace them, and fixes
   ``BigInt.prototype.toJSON`` to answer ``JSON.rawJSON`` of the digits, so a ``BigInt``
   is written as its exact JSON integer.
2. :func:`user_script` wraps the user's code as the body of ``function (input, data)``,
   on lines of its own, named ``code.js`` (``//# sourceURL``), so V8's positions are the
   user's lines plus :data:`LINE_OFFSET`.
3. :func:`call_script` parses the two arguments (an integer beyond
   ``Number.MAX_SAFE_INTEGER``, 2**53 - 1, becomes a ``BigInt`` read from its source text
   by a ``JSON.parse`` reviver, used only when the text has 16 digits in a row), calls
   the function, and answers one
   JSON text: ``{"ok": true, "logs", "dropped", "output"}`` or ``{"ok": false,
   "kind", "name", "message", "stack", "logs", "dropped"}``. After a stop (a limit),
   ``__railyard_logs()`` answers ``{"logs", "dropped"}`` recorded until then.

The isolate itself is the boundary: a user who rewrites ``Array.prototype`` only spoils
their own answer, which the host then refuses as unreadable.
"""

from __future__ import annotations

import json
import re

from .protocol import Limits

__all__ = [
    "LINE_OFFSET",
    "SCRIPT_NAME",
    "call_script",
    "prelude",
    "syntax_error_position",
    "user_frames",
    "user_script",
]

SCRIPT_NAME = "code.js"
LINE_OFFSET = 1
"""Lines :func:`user_script` puts before the user's first line."""

_PRELUDE = """
(() => {
  "use strict";
  const g = globalThis;
  for (const name of ["setTimeout", "clearTimeout", "__timer_manager", "WebAssembly",
                      "SharedArrayBuffer", "Atomics", "console"]) {
    try {
      delete g[name];
    } catch (err) {
      g[name] = undefined; // mini-racer's `var setTimeout` cannot be deleted
    }
  }
  const stringify = JSON.stringify, parse = JSON.parse, rawJSON = JSON.rawJSON, toText = String;
  const isSafeInteger = Number.isSafeInteger, toBigInt = BigInt;
  const bigText = BigInt.prototype.toString, DIGITS = /[0-9]{16}/, INTEGER = /^-?[0-9]+$/;
  // an integer beyond Number.MAX_SAFE_INTEGER, read from its source text, is a BigInt
  const exact = (key, value, context) =>
    typeof value === "number" && !isSafeInteger(value) && INTEGER.test(context.source)
      ? toBigInt(context.source) : value;
  // only a text with 16 digits in a row can hold one (a reviver makes parsing ~10x slower)
  const read = (text) => (DIGITS.test(text) ? parse(text, exact) : parse(text));
  // a BigInt is written as its exact JSON integer, by JSON.stringify anywhere
  const fixed = (value) => ({ value, writable: false, configurable: false, enumerable: false });
  Object.defineProperty(BigInt.prototype, "toJSON", fixed(function () {
    return rawJSON(bigText.call(this));
  }));
  const MAX_LINES = %(log_lines)d, MAX_CHARS = %(log_chars)d, MAX_OUTPUT = %(output_chars)d;
  const logs = [];
  let logChars = 0, dropped = 0, userFn = null;
  const show = (value) => {
    if (typeof value === "string") return value;
    try {
      if (value instanceof Error) return toText(value.stack || value);
      const text = stringify(value);
      return text === undefined ? toText(value) : text;
    } catch (err) {
      return toText(value);
    }
  };
  const record = (level) => (...args) => {
    if (logs.length >= MAX_LINES || logChars >= MAX_CHARS) { dropped++; return; }
    let text = args.map(show).join(" ");
    if (logChars + text.length > MAX_CHARS) text = text.slice(0, MAX_CHARS - logChars);
    logChars += text.length;
    logs.push([level, text]);
  };
  const console = Object.freeze({
    log: record("log"), info: record("info"), warn: record("warn"),
    error: record("error"), debug: record("debug"),
  });
  Object.defineProperty(g, "console", fixed(console));
  const failure = (kind, err) => {
    let name = "", message = "", stack = "";
    try {
      if (err !== null && typeof err === "object") {
        name = toText(err.name || "");
        message = toText(err.message || "");
        stack = toText(err.stack || "");
      } else {
        name = "Error";
        message = toText(err);
      }
    } catch (inner) {
      message = "the thrown value cannot be shown";
    }
    return stringify({ ok: false, kind, name, message, stack, logs, dropped });
  };
  Object.defineProperty(g, "__railyard_define", fixed((fn) => { userFn = fn; }));
  Object.defineProperty(g, "__railyard_logs", fixed(() => stringify({ logs, dropped })));
  Object.defineProperty(g, "__railyard_call", fixed((inputText, dataText) => {
    let result;
    try {
      result = userFn(read(inputText), read(dataText));
    } catch (err) {
      return failure("error", err);
    }
    if (result !== null && typeof result === "object" && typeof result.then === "function") {
      return failure("error", new TypeError(
        "the code returned a Promise: a Code step is synchronous (no await)"));
    }
    let text;
    try {
      text = stringify(result === undefined ? null : result);
    } catch (err) {
      if (err instanceof RangeError) return failure("output_too_large", err);
      return failure("error", err);
    }
    if (text === undefined) text = "null";
    if (text.length > MAX_OUTPUT) {
      return failure("output_too_large", new RangeError(
        "the result is " + text.length + " characters of JSON, over the limit of " +
        MAX_OUTPUT));
    }
    return '{"ok":true,"logs":' + stringify(logs) + ',"dropped":' + dropped +
      ',"output":' + text + "}";
  }));
})();
"""


def prelude(limits: Limits) -> str:
    """The script run first in each fresh isolate (see the module doc)."""
    return _PRELUDE % {
        "log_lines": limits.log_lines,
        "log_chars": limits.log_chars,
        "output_chars": limits.output_chars,
    }


def user_script(code: str) -> str:
    """The user's ``code`` as the body of the step's function, named ``code.js``."""
    header = "__railyard_define(function (input, data) {"
    return f"{header}\n{code}\n}});\n//# sourceURL={SCRIPT_NAME}\n"


def call_script(input_json: str, data_json: str) -> str:
    """The script that runs the defined function on the two JSON texts."""
    return f"__railyard_call({json.dumps(input_json)}, {json.dumps(data_json)})"


_FRAME = re.compile(re.escape(SCRIPT_NAME) + r":(\d+):(\d+)")
# a script that does not parse is reported before V8 reads its sourceURL comment
_SYNTAX_LINE = re.compile(r"(?:" + re.escape(SCRIPT_NAME) + r"|<anonymous>):(\d+): ")


def _shift(match: re.Match[str]) -> str:
    return f"{SCRIPT_NAME}:{int(match[1]) - LINE_OFFSET}:{match[2]}"


def user_frames(stack: str) -> tuple[int | None, int | None, str]:
    """``(line, column, frames)`` of a V8 stack trace: the position of the innermost frame
    in the user's code (1-based, in the user's numbering) and those frames, renumbered,
    one per line. ``(None, None, "")`` when no frame is in the user's code."""
    frames = [
        _FRAME.sub(_shift, line.strip()) for line in stack.splitlines() if _FRAME.search(line)
    ]
    first = _FRAME.search(frames[0]) if frames else None
    if first is None:
        return None, None, ""
    return int(first[1]), int(first[2]), "\n".join(frames)


def syntax_error_position(message: str) -> tuple[int | None, int | None, str]:
    """``(line, column, summary)`` of the message mini-racer gives for a script that does
    not parse: ``<anonymous>:3: SyntaxError: ...``, the source line, then a caret line under
    the offending token. Line and column are the user's (1-based), ``None`` when the
    message has no position; the summary is the ``SyntaxError: ...`` line."""
    lines = message.splitlines()
    head = _SYNTAX_LINE.match(lines[0]) if lines else None
    if head is None:
        return None, None, message.strip()
    summary = lines[0][head.end() :].strip().removeprefix("SyntaxError: ")
    line = int(head[1]) - LINE_OFFSET
    caret = next((text for text in lines[2:3] if set(text.strip()) == {"^"}), None)
    column = caret.index("^") + 1 if caret is not None else None
    return (line if line >= 1 else None), column, summary
