"""Names of copies and the search pattern of the workflow pickers."""

from __future__ import annotations

from backend.services.workflows.workflow_lifecycle import MAX_NAME, copy_name
from backend.services.workflows.workflow_picker import _like_pattern


def test_a_copy_is_named_after_its_source() -> None:
    assert copy_name("Invoices") == "Invoices (copy)"
    assert copy_name("Invoices (copy)") == "Invoices (copy) (copy)"


def test_a_copy_of_a_long_name_still_fits() -> None:
    name = copy_name("x" * MAX_NAME)
    assert len(name) == MAX_NAME and name.endswith(" (copy)")


def test_search_text_is_matched_literally() -> None:
    assert _like_pattern("50%_off\\") == "%50\\%\\_off\\\\%"
