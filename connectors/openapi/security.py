"""Security schemes -> credential types, and which of them an operation accepts.

Each usable scheme of ``components.securitySchemes`` becomes one credential type
``<connector>.<scheme>``:

| scheme | credential kind |
| --- | --- |
| ``apiKey`` in header, query or cookie | ``api_key`` (the key; name and place from the document) |
| ``http`` ``basic`` | ``basic`` (username, password) |
| ``http`` ``bearer`` | ``bearer`` (token) |
| ``oauth2`` ``authorizationCode`` | ``oauth2`` (the product's Connect flow) |
| ``oauth2`` ``clientCredentials`` | ``client_credentials`` (token fetched by the action) |

Not usable, so an operation that accepts only these is refused with the reason:
``openIdConnect``, ``mutualTLS``, OAuth2's ``implicit`` and ``password`` flows, other
``http`` schemes (digest, ...), and a requirement naming two schemes at once.
"""

from __future__ import annotations

import re
from typing import Any

from .definition import CredentialSpec
from .schemas import resolve


def slug(text: str, limit: int = 40) -> str:
    """``camelCase`` / ``kebab-case`` / ``a/b`` text as a lower-case identifier."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    text = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()
    text = re.sub(r"_+", "_", text)[:limit].strip("_")
    if not text or not text[0].isalpha():
        text = f"x_{text}".strip("_")
    return text


def credential_specs(
    doc: dict[str, Any], connector: str
) -> tuple[dict[str, CredentialSpec], dict[str, str]]:
    """``({scheme name: spec}, {scheme name: why it cannot be used})``."""
    schemes = (doc.get("components") or {}).get("securitySchemes") or {}
    usable: dict[str, CredentialSpec] = {}
    unusable: dict[str, str] = {}
    for name, raw in schemes.items():
        scheme = resolve(doc, raw)
        kind = scheme.get("type")
        ctype = f"{connector}.{slug(name, 30)}"
        label = f"{doc.get('info', {}).get('title') or connector}: {name}"
        description = str(scheme.get("description") or "")[:500]
        common = {"type": ctype, "scheme": name, "label": label, "description": description}
        if kind == "apiKey":
            usable[name] = CredentialSpec(
                **common,
                kind="api_key",
                location=scheme["in"],
                param_name=scheme["name"],
            )
        elif kind == "http" and str(scheme.get("scheme", "")).lower() in ("basic", "bearer"):
            usable[name] = CredentialSpec(**common, kind=str(scheme["scheme"]).lower())  # type: ignore[arg-type]
        elif kind == "oauth2":
            flows = scheme.get("flows") or {}
            code = flows.get("authorizationCode")
            client = flows.get("clientCredentials")
            if code:
                usable[name] = CredentialSpec(
                    **common,
                    kind="oauth2",
                    authorize_url=code.get("authorizationUrl", ""),
                    token_url=code.get("tokenUrl", ""),
                    scopes=sorted(code.get("scopes") or {}),
                )
            elif client:
                usable[name] = CredentialSpec(
                    **common,
                    kind="client_credentials",
                    token_url=client.get("tokenUrl", ""),
                    scopes=sorted(client.get("scopes") or {}),
                )
            else:
                unusable[name] = (
                    f"security scheme {name}: OAuth2 flows {sorted(flows)} are not supported "
                    "(authorization code and client credentials are)"
                )
        elif kind == "http":
            unusable[name] = (
                f"security scheme {name}: HTTP scheme {scheme.get('scheme')!r} is not "
                "supported (basic and bearer are)"
            )
        else:
            unusable[name] = f"security scheme {name}: type {kind!r} is not supported"
    return usable, unusable


def operation_credentials(
    requirements: Any, usable: dict[str, CredentialSpec], unusable: dict[str, str]
) -> tuple[list[str], bool, str]:
    """``(accepted credential types, credential optional, refusal reason or "")`` for an
    operation's effective ``security`` (a list of requirement objects; ``None``: none)."""
    if not requirements:
        return [], True, ""
    accepted: list[str] = []
    optional = False
    reasons: list[str] = []
    for requirement in requirements:
        names = list(requirement or {})
        if not names:
            optional = True
        elif len(names) > 1:
            reasons.append(f"it needs {' and '.join(names)} at once (one credential per step)")
        elif names[0] in usable:
            if usable[names[0]].type not in accepted:
                accepted.append(usable[names[0]].type)
        else:
            reasons.append(unusable.get(names[0], f"security scheme {names[0]} is not declared"))
    if not accepted and not optional:
        return [], False, "; ".join(reasons) or "no usable security scheme"
    return accepted, optional, ""
