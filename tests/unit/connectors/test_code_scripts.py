"""The Code step's reading of V8's error positions (connectors/builtin/code/scripts.py)."""

from __future__ import annotations

from connectors.builtin.code import scripts


def test_user_frames_are_renumbered_to_the_users_lines() -> None:
    stack = (
        "TypeError: Cannot read properties of undefined (reading 'amount')\n"
        "    at code.js:3:44\n    at Array.reduce (<anonymous>)\n"
        "    at total (code.js:3:15)\n    at code.js:6:8\n    at <anonymous>:1:1"
    )
    line, column, frames = scripts.user_frames(stack)
    assert (line, column) == (2, 44)
    assert frames.splitlines() == ["at code.js:2:44", "at total (code.js:2:15)", "at code.js:5:8"]
    assert scripts.user_frames("Error: x\n    at <anonymous>:1:7") == (None, None, "")
    assert scripts.user_frames("") == (None, None, "")


def test_a_syntax_error_position_comes_from_the_caret() -> None:
    message = (
        "<anonymous>:3: SyntaxError: Unexpected token ';'\nconst b = ;\n          ^\n\n"
        "SyntaxError: Unexpected token ';'\n"
    )
    assert scripts.syntax_error_position(message) == (2, 11, "Unexpected token ';'")
    no_caret = "code.js:2: SyntaxError: Unexpected end of input\n"
    assert scripts.syntax_error_position(no_caret) == (1, None, "Unexpected end of input")
    assert scripts.syntax_error_position("odd") == (None, None, "odd")


def test_the_users_code_starts_on_a_line_of_its_own() -> None:
    script = scripts.user_script("return 1")
    assert script.splitlines()[scripts.LINE_OFFSET] == "return 1"
    assert script.rstrip().endswith("//# sourceURL=code.js")
