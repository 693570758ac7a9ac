"""Declaring actions and connectors.

An action is an ``async`` function ``fn(config: Config, input: Any) -> Output`` where
``Config`` is a ``msgspec.Struct`` (the node's config, already validated and with
expressions resolved) and ``input`` is the step's input (the predecessor's output).
:func:`action` turns it into an :class:`ActionDefinition`; a :class:`Connector` groups
actions under a name and version and is exposed through the ``railyard.connectors``
entry point.
"""

from __future__ import annotations

import builtins
import functools
import importlib.resources
import inspect
import re
import sys
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .context import ActionContext, _current
from .credentials import CredentialType, credential_types_of_schema
from .errors import ConfigError
from .redaction import redact_exception
from .schema import config_json_schema, output_json_schema
from .triggers import TriggerDefinition

__all__ = [
    "ActionDefinition",
    "ActionFn",
    "Connector",
    "action",
]

ActionFn = Callable[[Any, Any], Awaitable[Any]]
"""``async def fn(config: Config, input: Any) -> Output``."""


@dataclass(frozen=True)
class ActionDefinition:
    """A declared action (one node type of kind ``action``).

    Attributes:
        type: node type name, ``"<connector>.<action>"`` (``"http.request"``).
        label, description, category, icon: how the palette shows it.
        config_type: the ``msgspec.Struct`` of the config.
        output_type: the return annotation of ``fn`` (``Any`` when absent).
        fn: the coroutine function.
        expression_fields: config fields that accept a JSONata expression.
        outputs: output port names.
        version: the node-type version (an integer >= 1). A published workflow runs the
            version it was published with, so a change in behaviour, config or output
            is a new definition with the same ``type`` and ``version + 1``; keep the old
            one in the connector so published workflows keep their meaning.
    """

    type: str
    label: str
    config_type: builtins.type[Any]
    fn: ActionFn
    description: str = ""
    category: str = "Actions"
    icon: str = ""
    output_type: Any = Any
    expression_fields: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ("out",)
    version: int = 1
    _schema: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def config_json_schema(self) -> dict[str, Any]:
        """JSON Schema of the config with ``$ref`` inlined (a fresh copy per call)."""
        if not self._schema:
            self._schema.update(config_json_schema(self.config_type))
        return msgspec.json.decode(msgspec.json.encode(self._schema))  # type: ignore[no-any-return]

    def output_json_schema(self) -> dict[str, Any]:
        """JSON Schema of the output (from ``output_type``; ``{}`` when it is ``Any``)."""
        return output_json_schema(self.output_type)

    def credential_fields(self) -> dict[str, tuple[str, ...]]:
        """``{config field: accepted credential types}`` (fields with ``x-credential-type``).

        Derived from the schema once (it is asked for on every attempt)."""
        return dict(self._credential_fields)

    @functools.cached_property
    def _credential_fields(self) -> dict[str, tuple[str, ...]]:
        return credential_types_of_schema(self.config_json_schema())

    def credential_refs(self, config: dict[str, Any]) -> dict[str, tuple[str, tuple[str, ...]]]:
        """``{field: (credential_id, accepted_types)}`` for credential fields set in ``config``.

        Raises :class:`ConfigError` when a credential field holds something other than an id.
        """
        refs: dict[str, tuple[str, tuple[str, ...]]] = {}
        for name, accepted in self.credential_fields().items():
            value = config.get(name)
            if value is None or value == "":
                continue
            if not isinstance(value, str):
                raise ConfigError(f"{self.type}: field {name!r} must be a credential id")
            refs[name] = (value, accepted)
        return refs

    def parse_config(self, config: dict[str, Any]) -> Any:
        """Convert ``config`` to ``config_type``; raises :class:`ConfigError`."""
        try:
            return msgspec.convert(config, self.config_type, strict=False)
        except msgspec.ValidationError as err:
            raise ConfigError(f"invalid config for {self.type}: {err}") from None

    async def run(self, config: dict[str, Any], input: Any, context: ActionContext) -> Any:
        """Run one attempt: validate ``config``, install ``context``, await ``fn``.

        Credential fields set in ``config`` are resolved through the context first (see
        :mod:`connectors.sdk.credentials`). Returns the output converted to JSON-able
        builtins (``msgspec.to_builtins``). The secrets of those credentials are redacted
        from the output and from an error's message and details
        (:mod:`connectors.sdk.redaction`).
        Raises :class:`~connectors.sdk.errors.ConfigError` for an invalid config and
        whatever ``fn`` raises (``ActionError`` subclasses carry retry hints).
        """
        parsed = self.parse_config(config)
        token = _current.set(context)
        try:
            refs = self.credential_refs(config)
            if refs:
                await context.load_credentials(refs)
            result = await self.fn(parsed, input)
            return context.redact(msgspec.to_builtins(result))
        except Exception as exc:  # its message and details are shown and stored
            redact_exception(exc, context.secret_forms)
            raise
        finally:
            try:
                await context.aclose()
            finally:
                _current.reset(token)


def _output_type(fn: Callable[..., Any]) -> Any:
    """The return annotation of ``fn``, ``Annotated`` kept: a ``msgspec.Meta`` on it adds
    to the output's JSON Schema (e.g. the designer's ``x-properties-if``)."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:
        return Any
    return hints.get("return", Any)


def action(
    type: str,
    *,
    label: str,
    config: type[Any],
    description: str = "",
    category: str = "Actions",
    icon: str = "",
    expression_fields: Sequence[str] = (),
    outputs: Sequence[str] = ("out",),
    version: int = 1,
) -> Callable[[ActionFn], ActionDefinition]:
    """Decorator declaring ``fn`` as version ``version`` of the action ``type``.

    ``config`` is the ``msgspec.Struct`` class of the node config; ``expression_fields``
    must name fields of it. The decorated name is bound to the :class:`ActionDefinition`
    (call ``definition.fn`` to reach the function itself). Raises ``ValueError`` for a
    version below 1.
    """
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"action {type!r}: version must be an integer >= 1, got {version!r}")
    if not (inspect.isclass(config) and issubclass(config, msgspec.Struct)):
        raise TypeError(f"action {type!r}: config must be a msgspec.Struct subclass")
    fields = set(config.__struct_fields__)
    unknown = [name for name in expression_fields if name not in fields]
    if unknown:
        raise ValueError(f"action {type!r}: expression_fields not in config: {unknown}")

    def decorate(fn: ActionFn) -> ActionDefinition:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"action {type!r}: {fn!r} must be an async function")
        doc = inspect.getdoc(fn) or ""
        return ActionDefinition(
            type=type,
            label=label,
            config_type=config,
            fn=fn,
            description=description or (doc.splitlines()[0] if doc else ""),
            category=category,
            icon=icon,
            output_type=_output_type(fn),
            expression_fields=tuple(expression_fields),
            outputs=tuple(outputs),
            version=version,
        )

    return decorate


ICON_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
"""What an icon name looks like: lower-case letters, digits and dashes (``acme-logo``)."""


@dataclass(frozen=True)
class Connector:
    """A plugin: a named, versioned group of node types and credential types.

    ``name`` is the prefix of its node types; action and trigger types must be unique
    (an action type may appear once per version), and so must credential type names.
    ``icon`` names the palette icon of the group; ``docs_url`` links its documentation on
    the catalog page.

    ``icons`` maps icon names of the connector's own (``"acme-logo"``) to SVG files in its
    package (``"icons/acme.svg"``, a relative ``/``-separated path ending in ``.svg``); a
    node type or the connector uses one by naming it (``icon="acme-logo"``), and any other
    ``icon`` is a name of the Lucide set shipped with Railyard. ``package`` is the import
    name those paths are relative to; it defaults to the package of the module that
    creates the Connector. Railyard sanitises every icon when it loads the connector and
    refuses the connector when one is unsafe (docs/connectors.md, "Icons").

    Raises ``ValueError`` for duplicate node or credential types and for a malformed icon
    name or path.
    """

    name: str
    label: str
    version: str
    actions: Sequence[ActionDefinition] = ()
    description: str = ""
    triggers: Sequence[TriggerDefinition] = ()
    credential_types: Sequence[CredentialType] = ()
    icon: str = ""
    docs_url: str = ""
    icons: Mapping[str, str] = field(default_factory=dict)
    package: str = ""

    def __post_init__(self) -> None:
        seen: set[tuple[str, int]] = set()
        keys = [(a.type, a.version) for a in self.actions] + [(t.type, 1) for t in self.triggers]
        for key in keys:
            if key in seen:
                raise ValueError(f"connector {self.name!r}: duplicate node type {key[0]}")
            seen.add(key)
        triggers = {t.type for t in self.triggers}
        clash = triggers & {a.type for a in self.actions}
        if clash:
            raise ValueError(f"connector {self.name!r}: duplicate node type {min(clash)}")
        names = [c.name for c in self.credential_types]
        if len(names) != len(set(names)):
            raise ValueError(f"connector {self.name!r}: duplicate credential type")
        for icon, path in self.icons.items():
            _check_icon_entry(self.name, icon, path)
        if self.icons and not self.package:
            # the module calling Connector(...): two frames up (__post_init__, __init__)
            caller = sys._getframe(2).f_globals
            package = caller.get("__package__") or caller.get("__name__") or ""
            object.__setattr__(self, "package", package)

    def read_icon(self, name: str) -> bytes:
        """The bytes of the connector's own icon ``name`` (read from :attr:`package` with
        ``importlib.resources``, unchecked: Railyard sanitises them at load).

        Raises ``KeyError`` when the connector declares no such icon and ``OSError`` or
        ``ImportError`` when the file cannot be read."""
        path = self.icons[name]
        resource = importlib.resources.files(self.package)
        for part in path.split("/"):
            resource = resource.joinpath(part)
        return resource.read_bytes()

    def get(self, node_type: str, version: int | None = None) -> ActionDefinition | None:
        """The action named ``node_type`` at ``version`` (``None``: the latest) or ``None``."""
        found = [
            d
            for d in self.actions
            if d.type == node_type and (version is None or d.version == version)
        ]
        return max(found, key=lambda d: d.version) if found else None


def _check_icon_entry(connector: str, name: str, path: str) -> None:
    if not isinstance(name, str) or not ICON_NAME.match(name):
        raise ValueError(
            f"connector {connector!r}: icon name {name!r} must be lower-case letters, digits "
            "and dashes (e.g. 'acme-logo')"
        )
    parts = path.split("/") if isinstance(path, str) else []
    if (
        not parts
        or not path.endswith(".svg")
        or path.startswith("/")
        or "\\" in path
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise ValueError(
            f"connector {connector!r}: icon {name!r} must be an .svg file given by a relative "
            f"path inside the connector's package (e.g. 'icons/{name}.svg'), not {path!r}"
        )
