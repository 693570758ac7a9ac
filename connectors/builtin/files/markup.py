"""XML and HTML: ``files.xml_read``, ``files.xml_write``, ``files.html_extract``.

- ``xml_read`` -> ``{"data"}``: the document as JSON, ``{<root name>: <element>}``. An
  element with neither attributes nor children is its text (``null`` when empty);
  otherwise an object holding its attributes as ``"@<name>"``, its text as ``"#text"``
  and its children by name (a name that repeats gives a list, in document order). The
  conventions are those of the widely used ``xmltodict``. Namespaced names keep their
  ``{uri}`` prefix. Parsing goes through ``defusedxml``: a document declaring a DTD or
  entities (billion laughs, external entities) is refused (kind ``xml_forbidden``);
  malformed XML is kind ``xml_malformed``, naming line and column.
- ``xml_write`` -> a file reference (``application/xml``, UTF-8): the inverse of
  ``xml_read`` for ``data`` with one root key; other JSON values become text.
- ``html_extract`` -> ``{"data"}``: for each extraction (``key``, CSS ``selector``,
  ``value``: ``text``, ``html`` or ``attribute`` with ``attribute``, and ``all``), the
  first match (``null`` when none) or, with ``all``, the list of every match. Parsed
  with selectolax's Lexbor engine (an HTML5 parser; nothing in the page runs). An
  invalid selector is kind ``html_selector``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Annotated, Any, Literal, TypedDict

import defusedxml.ElementTree as SafeET
import msgspec
from defusedxml import DefusedXmlException
from selectolax.lexbor import LexborHTMLParser, SelectolaxError

from connectors import sdk
from connectors.builtin.files.common import (
    DEFAULT_MAX_BYTES,
    FileInput,
    FileRef,
    MaxBytes,
    cell_text,
    file_bytes,
    file_ref,
    file_text,
)

__all__ = ["element_to_json", "html_extract", "json_to_element", "xml_read", "xml_write"]


class XmlReadConfig(msgspec.Struct, kw_only=True):
    """Config of ``files.xml_read``."""

    file: FileInput = None
    max_bytes: MaxBytes = DEFAULT_MAX_BYTES


class XmlWriteConfig(msgspec.Struct, kw_only=True):
    """Config of ``files.xml_write``."""

    data: Annotated[
        dict[str, Any],
        msgspec.Meta(title="Document", description="{root name: element}, as Read XML gives"),
    ]
    filename: Annotated[str, msgspec.Meta(title="File name")] = "document.xml"


class Extraction(msgspec.Struct, kw_only=True):
    """One value to extract from a page."""

    key: Annotated[str, msgspec.Meta(title="Key", min_length=1)]
    selector: Annotated[str, msgspec.Meta(title="CSS selector", min_length=1)]
    value: Annotated[
        Literal["text", "html", "attribute"],
        msgspec.Meta(
            title="Value",
            extra_json_schema={
                "x-enum-labels": {"text": "Text", "html": "HTML", "attribute": "Attribute"}
            },
        ),
    ] = "text"
    attribute: Annotated[str, msgspec.Meta(title="Attribute")] = ""
    all: Annotated[bool, msgspec.Meta(title="Every match (a list)")] = False


class HtmlExtractConfig(msgspec.Struct, kw_only=True):
    """Config of ``files.html_extract``."""

    html: Annotated[
        Any,
        msgspec.Meta(
            title="HTML", description="Text or a file reference; defaults to the step input"
        ),
    ] = None
    extractions: Annotated[list[Extraction], msgspec.Meta(title="Extract", min_length=1)]
    trim: Annotated[bool, msgspec.Meta(title="Trim whitespace")] = True
    max_bytes: MaxBytes = DEFAULT_MAX_BYTES


class XmlData(TypedDict):
    """The document as `data`: `{root name: element}` (attributes `@name`, text
    `#text`, children by name, repeated names as lists)."""

    data: dict[str, Any]


class HtmlData(TypedDict):
    """The extracted values as `data`, by extraction key (a list with "every match")."""

    data: dict[str, Any]


def element_to_json(element: ET.Element) -> Any:
    """One element as JSON (see the module docstring)."""
    children: dict[str, Any] = {}
    for child in element:
        value = element_to_json(child)
        if child.tag in children:  # an element's JSON is never a list: a list is a repeat
            if not isinstance(children[child.tag], list):
                children[child.tag] = [children[child.tag]]
            children[child.tag].append(value)
        else:
            children[child.tag] = value
    text = (element.text or "").strip()
    if not element.attrib and not children:
        return text or None
    out: dict[str, Any] = {f"@{k}": v for k, v in element.attrib.items()}
    if text:
        out["#text"] = text
    out.update(children)
    return out


def json_to_element(name: str, value: Any) -> ET.Element:
    """The element ``name`` holding ``value`` (the inverse of :func:`element_to_json`).

    Raises ``sdk.ConfigError`` for a name that is not an XML name."""
    if not name or not (name[0].isalpha() or name[0] in "_{") or any(c in name for c in " <>&\"'="):
        raise sdk.ConfigError(f"not a valid XML element name: {name!r}")
    element = ET.Element(name)
    if isinstance(value, dict):
        for key, item in value.items():
            if key.startswith("@"):
                element.set(key[1:], cell_text(item))
            elif key == "#text":
                element.text = cell_text(item)
            else:
                for each in item if isinstance(item, list) else [item]:
                    element.append(json_to_element(key, each))
    elif value is not None:
        element.text = cell_text(value)
    return element


@sdk.action(
    "files.xml_read",
    label="Read XML",
    config=XmlReadConfig,
    category="Files",
    icon="code-xml",
    description="Parse an XML document (untrusted input: no DTDs, no entities) into JSON.",
    expression_fields=("file",),
)
async def xml_read(config: XmlReadConfig, input: Any) -> XmlData:
    """Parse with defusedxml (see the module docstring)."""
    data, _name = file_bytes(config.file, input, config.max_bytes)
    try:  # bytes: the parser follows the document's declared encoding
        root = SafeET.fromstring(data, forbid_dtd=True)
    except DefusedXmlException as err:
        raise sdk.NonRetryableError(
            f"the XML declares a DTD or entities, which are refused: {err}", kind="xml_forbidden"
        ) from None
    except ET.ParseError as err:
        line, column = err.position
        raise sdk.NonRetryableError(
            f"the XML is malformed at line {line}, column {column}: {err}",
            kind="xml_malformed",
            details={"line": line, "column": column},
        ) from None
    return {"data": {root.tag: element_to_json(root)}}


@sdk.action(
    "files.xml_write",
    label="Write XML",
    config=XmlWriteConfig,
    category="Files",
    icon="code-xml",
    description="Write JSON ({root: element}) as an XML document.",
    expression_fields=("data", "filename"),
)
async def xml_write(config: XmlWriteConfig, input: Any) -> FileRef:
    """Serialise with the standard library (escaping text and attributes)."""
    if len(config.data) != 1:
        raise sdk.ConfigError("an XML document has exactly one root: give {root name: element}")
    ((name, value),) = config.data.items()
    root = json_to_element(name, value)
    data = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return file_ref(data, config.filename, "application/xml")


def _extract(node: Any, extraction: Extraction, trim: bool) -> Any:
    if extraction.value == "html":
        return node.html
    if extraction.value == "attribute":
        return node.attributes.get(extraction.attribute)
    text = node.text(deep=True, separator=" " if trim else "")
    return " ".join(text.split()) if trim else text


@sdk.action(
    "files.html_extract",
    label="Extract from HTML",
    config=HtmlExtractConfig,
    category="Files",
    icon="file-code",
    description="Pick values out of an HTML page with CSS selectors.",
    expression_fields=("html", "extractions"),
)
async def html_extract(config: HtmlExtractConfig, input: Any) -> HtmlData:
    """Parse the page once and run each extraction."""
    source = config.html
    if source is None and isinstance(input, dict) and isinstance(input.get("body"), str):
        source = input["body"]  # an http.request output
    page = LexborHTMLParser(file_text(source, input, config.max_bytes, "utf-8"))
    data: dict[str, Any] = {}
    for extraction in config.extractions:
        if extraction.value == "attribute" and not extraction.attribute:
            raise sdk.ConfigError(f"extraction {extraction.key!r} needs an attribute name")
        try:
            nodes = page.css(extraction.selector)
        except (SelectolaxError, ValueError) as err:
            raise sdk.NonRetryableError(
                f"extraction {extraction.key!r}: not a valid CSS selector "
                f"{extraction.selector!r} ({err})",
                kind="html_selector",
            ) from None
        values = [_extract(n, extraction, config.trim) for n in nodes]
        data[extraction.key] = values if extraction.all else (values[0] if values else None)
    return {"data": data}
