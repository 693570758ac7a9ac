"""Workflows and their versions: the designer's objects, from draft to published.

Creating and editing drafts, compiling and publishing immutable versions, the checks a
diagram must pass, version history, archive and restore, import and export, projects,
pinned data and test runs of the draft. The top of the domains that run things:
publishing a workflow syncs its triggers (:mod:`backend.services.triggers`), a test run
starts a run (:mod:`backend.services.runs`).

Public modules (the surface: modules outside the package import only these):

- ``draft_runs``: Test runs: run the draft without publishing it ("Test workflow", "Test
  step").
- ``expression_data``: Data for the expression editor: the fields a step can read, a live
  preview, schema inference.
- ``pins``: Pinned data: sample output stored with a workflow's draft, per node, for test
  runs.
- ``projects``: Projects: folders grouping workflows and credentials. A grant on a project
  reaches everything in it (:mod:`backend.services.identity.access`). Audited:
  ``project.create``, ``project.update``, ``project.delete``, ``project.move`` (a workflow
  or credential put into or taken out of a project).
- ``records``: Read-only shapes of the stored objects that services hand to the web layers.
- ``workflow_lifecycle``: Archive ("delete" in the UI), restore and duplicate workflows,
  each audited in its transaction (:mod:`backend.services.workflows.workflow_audit`).
- ``workflow_picker``: Workflows a user may call: the designer's workflow pickers
  (Sub-workflow, For each).
- ``workflow_transfer``: Export a workflow (its draft or a version) as a
  ``railyard/workflow`` document, and import one as a new workflow or into an existing
  workflow's draft (the format: :mod:`designer_schema.transfer`, docs/designer.md "Import
  and export").
- ``workflow_versions``: Version history of a workflow: who published which version when
  (with the publisher's note), one version's diagram, the difference between two versions
  (or a version and the draft), and restoring a version into the draft.
- ``workflows``: Workflow use cases: create, edit the draft, compile, publish immutable
  versions.

Private modules (imported only inside the package):

- ``child_contracts``: What a workflow's callers send it, and whether the children a
  workflow calls read only that.
- ``config_checks``: Publish-time check of each step's literal config against its node
  type's config Struct.
- ``diagram_checks``: Diagnostics that need the database: what a diagram's references point
  at.
- ``pinned_graph``: The graph a test run executes: the draft's compiled graph with data
  substituted.
- ``workflow_audit``: The audit rows of workflow changes (called by
  :mod:`backend.services.workflows.workflows` in the transaction of each change).
"""
