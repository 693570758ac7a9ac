"""GitHub: issues, pull requests and repositories, from GitHub's OpenAPI description
(``documents/github.json.gz``: the pinned subset of github/rest-api-description, see
``documents/README.md``). GitHub describes its authentication in prose only, so a bearer
scheme (a personal access token or an OAuth app's token) is added to the document here.
Base URL: ``https://api.github.com``, or the setting ``github.api_url`` (GitHub Enterprise
Server: ``https://<host>/api/v3``)."""

from __future__ import annotations

from connectors.builtin.saas.curated import curated, document

OPERATIONS = {
    "issues_list_for_repo": "GitHub: list issues",
    "issues_get": "GitHub: get an issue",
    "issues_create": "GitHub: create an issue",
    "issues_update": "GitHub: update an issue",
    "issues_create_comment": "GitHub: comment on an issue",
    "pulls_list": "GitHub: list pull requests",
    "pulls_get": "GitHub: get a pull request",
    "repos_get": "GitHub: get a repository",
    "repos_list_for_org": "GitHub: list an organization's repositories",
    "issues_list_comments": "GitHub: list comments on an issue",
}


def _document() -> dict:  # type: ignore[type-arg]
    doc = document("github.json.gz")
    doc["components"]["securitySchemes"] = {
        "token": {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal access token or an OAuth app's token",
        }
    }
    doc["security"] = [{"token": []}]
    return doc


definition, connector = curated(
    "github",
    "GitHub",
    _document(),
    OPERATIONS,
    credential_labels={"token": "GitHub token"},
    icon="git-pull-request",
    docs_url="https://docs.github.com/rest",
)
