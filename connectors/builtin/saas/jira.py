"""Jira Cloud: issues, comments, transitions and projects (``documents/jira.yaml``, the
operations of Jira Cloud's REST API v3 written in the shape of Atlassian's document).
Credentials: your account email and an API token (Basic), or OAuth 2.0 (3LO). Base URL:
set ``jira.api_url`` to your site, ``https://<site>.atlassian.net``."""

from __future__ import annotations

from connectors.builtin.saas.curated import curated, document

OPERATIONS = {
    "search_issues": "Jira: search issues (JQL)",
    "get_issue": "Jira: get an issue",
    "create_issue": "Jira: create an issue",
    "edit_issue": "Jira: edit an issue",
    "add_comment": "Jira: add a comment",
    "transition_issue": "Jira: transition an issue",
    "search_projects": "Jira: list projects",
}

definition, connector = curated(
    "jira",
    "Jira",
    document("jira.yaml"),
    OPERATIONS,
    credential_labels={"basicAuth": "Jira email and API token", "OAuth2": "Jira OAuth 2.0"},
    icon="kanban",
    docs_url="https://developer.atlassian.com/cloud/jira/platform/rest/v3",
)
