"""Kinds of workflow versions (``workflow_versions.kind``).

``published``: created by publishing, numbered 1, 2, ...; the workflow's active version is
one of them. ``draft``: an unlisted snapshot of the draft that a test run executes
(number 0; backend/services/workflows/draft_runs.py), never active and never listed.
"""

PUBLISHED = "published"
DRAFT = "draft"
DRAFT_NUMBER = 0
"""The number every draft snapshot carries (published numbers start at 1)."""
