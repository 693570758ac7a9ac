"""Node-type icons: the Lucide set shipped with Railyard and the SVG icons plugins ship.

- **Lucide** (ISC licence), vendored as static SVG files under
  ``frontend/static/vendor/lucide/icons/`` (the version in ``VERSION`` beside them). Only
  the icons Railyard's node types and connectors use are there; ``make icons
  ICONS="name ..."`` adds more. :func:`lucide_names` lists them; :func:`lucide_sprite` is
  one SVG document with a ``<symbol id="<name>">`` per icon, which the designer draws with
  ``<use href=".../lucide.svg#<name>">``.
- **Plugin icons**: SVG files in a connector's package (``sdk.Connector(icons=...)``).
  :func:`sanitize_svg` parses each with ``defusedxml`` (no DTD, no entities, so no
  expansion bomb), keeps it only when every element and attribute is on an allow-list
  of drawing ones, and serialises the checked tree again: what is served is exactly what
  was checked. It refuses (:class:`UnsafeIcon`) scripts, ``<foreignObject>``, ``<style>``,
  ``<image>``, links and animations, every ``on*`` attribute, any reference that is not to
  an element of the same icon (``href="#id"``, ``url(#id)``), and files over
  :data:`MAX_ICON_BYTES`.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from xml.etree.ElementTree import Element, ParseError
from xml.sax.saxutils import escape, quoteattr

import defusedxml
import defusedxml.ElementTree

LUCIDE_DIR = Path(__file__).resolve().parents[3] / "frontend" / "static" / "vendor" / "lucide"
"""The vendored Lucide set: ``icons/<name>.svg``, ``LICENSE``, ``VERSION``."""

MAX_ICON_BYTES = 64 * 1024
"""Largest plugin icon file, in bytes."""

MAX_ICON_ELEMENTS = 2000
"""Most elements one icon may have."""

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"

ALLOWED_ELEMENTS = frozenset(
    {
        "svg",
        "g",
        "defs",
        "title",
        "desc",
        "symbol",
        "use",
        "path",
        "rect",
        "circle",
        "ellipse",
        "line",
        "polyline",
        "polygon",
        "text",
        "tspan",
        "linearGradient",
        "radialGradient",
        "stop",
        "clipPath",
        "mask",
        "pattern",
        "filter",
        "feBlend",
        "feColorMatrix",
        "feComposite",
        "feDropShadow",
        "feFlood",
        "feGaussianBlur",
        "feMerge",
        "feMergeNode",
        "feOffset",
    }
)
"""SVG elements an icon may contain (drawing, gradients, clipping, simple filters)."""

_TEXT_ELEMENTS = frozenset({"title", "desc", "text", "tspan"})

ALLOWED_ATTRIBUTES = frozenset(
    {
        # identity and geometry
        "id",
        "class",
        "version",
        "viewBox",
        "preserveAspectRatio",
        "x",
        "y",
        "width",
        "height",
        "x1",
        "y1",
        "x2",
        "y2",
        "cx",
        "cy",
        "r",
        "rx",
        "ry",
        "fx",
        "fy",
        "fr",
        "d",
        "points",
        "pathLength",
        "transform",
        "href",
        # paint
        "color",
        "fill",
        "fill-opacity",
        "fill-rule",
        "stroke",
        "stroke-width",
        "stroke-linecap",
        "stroke-linejoin",
        "stroke-miterlimit",
        "stroke-dasharray",
        "stroke-dashoffset",
        "stroke-opacity",
        "opacity",
        "style",
        "visibility",
        "display",
        "vector-effect",
        "shape-rendering",
        "paint-order",
        "clip-path",
        "clip-rule",
        "mask",
        "filter",
        # gradients, patterns, clip paths, masks
        "offset",
        "stop-color",
        "stop-opacity",
        "gradientUnits",
        "gradientTransform",
        "spreadMethod",
        "patternUnits",
        "patternContentUnits",
        "patternTransform",
        "clipPathUnits",
        "maskUnits",
        "maskContentUnits",
        # filters
        "filterUnits",
        "primitiveUnits",
        "in",
        "in2",
        "result",
        "mode",
        "type",
        "values",
        "operator",
        "k1",
        "k2",
        "k3",
        "k4",
        "stdDeviation",
        "dx",
        "dy",
        "flood-color",
        "flood-opacity",
        "color-interpolation-filters",
        # text
        "font-family",
        "font-size",
        "font-weight",
        "font-style",
        "text-anchor",
        "dominant-baseline",
        "letter-spacing",
    }
)
"""Attributes an icon's elements may carry (``xlink:href`` is read as ``href``)."""

_LOCAL_REF = re.compile(r"^#[A-Za-z_][\w.:-]*$")
_URL = re.compile(r"url\s*\(\s*(['\"]?)(.*?)\1\s*\)", re.IGNORECASE | re.DOTALL)
_FORBIDDEN_IN_VALUES = ("javascript:", "data:", "expression(", "@import", "-moz-binding")


class UnsafeIcon(ValueError):
    """An SVG icon Railyard does not serve; the message says what is wrong with it."""


def sanitize_svg(data: bytes, *, max_bytes: int = MAX_ICON_BYTES) -> bytes:
    """Check the SVG document ``data`` and return it serialised again (UTF-8, the SVG
    namespace as the default one, ``xlink:href`` written ``href``, comments, processing
    instructions and stray text left out).

    Raises :class:`UnsafeIcon` naming the first problem: larger than ``max_bytes``, not
    well-formed XML, a DTD or entity, a root other than ``<svg>`` with a ``viewBox``, more
    than :data:`MAX_ICON_ELEMENTS` elements, an element or attribute not on
    :data:`ALLOWED_ELEMENTS` / :data:`ALLOWED_ATTRIBUTES` (``<script>``,
    ``<foreignObject>``, ``onload`` ...), or a reference outside the icon (an ``href`` or
    ``url()`` not of the form ``#id``, ``javascript:``, ``data:``).
    """
    return _serialise(_checked_tree(data, max_bytes=max_bytes))


def _checked_tree(data: bytes, *, max_bytes: int) -> Element:
    if not isinstance(data, bytes | bytearray):
        raise UnsafeIcon("an icon must be given as bytes")
    if len(data) > max_bytes:
        raise UnsafeIcon(f"the file has {len(data)} bytes; an icon may have at most {max_bytes}")
    try:
        root = defusedxml.ElementTree.fromstring(
            bytes(data), forbid_dtd=True, forbid_entities=True, forbid_external=True
        )
    except defusedxml.DTDForbidden:
        raise UnsafeIcon("a DOCTYPE (DTD) is not allowed in an icon") from None
    except defusedxml.EntitiesForbidden:
        raise UnsafeIcon("entity declarations are not allowed in an icon") from None
    except defusedxml.DefusedXmlException as exc:
        raise UnsafeIcon(f"the icon is refused by the XML parser: {exc}") from None
    except ParseError as exc:
        raise UnsafeIcon(f"the icon is not well-formed XML: {exc}") from None
    if root.tag != f"{{{SVG_NS}}}svg":
        raise UnsafeIcon(f"the root element must be <svg> in the SVG namespace, not {root.tag}")
    if not root.get("viewBox"):
        raise UnsafeIcon('the <svg> element needs a viewBox (e.g. viewBox="0 0 24 24")')
    count = 0
    for element in root.iter():
        count += 1
        if count > MAX_ICON_ELEMENTS:
            raise UnsafeIcon(f"an icon may have at most {MAX_ICON_ELEMENTS} elements")
        _check_element(element)
    return root


def _local(tag: str) -> tuple[str, str]:
    """``"{ns}name"`` -> ``(ns, name)``; no namespace -> ``("", name)``."""
    if tag.startswith("{"):
        ns, _, name = tag[1:].partition("}")
        return ns, name
    return "", tag


def _check_element(element: Element) -> None:
    if not isinstance(element.tag, str):
        raise UnsafeIcon("the icon holds something other than elements")
    ns, name = _local(element.tag)
    if ns != SVG_NS:
        raise UnsafeIcon(f"element <{name}> is not in the SVG namespace")
    if name not in ALLOWED_ELEMENTS:
        raise UnsafeIcon(f"element <{name}> is not allowed in an icon")
    for key, value in element.attrib.items():
        attr = _attribute_name(name, key)
        _check_value(name, attr, value)


def _attribute_name(element: str, key: str) -> str:
    ns, attr = _local(key)
    if attr.lower().startswith("on"):
        raise UnsafeIcon(f"event handler attribute {attr} on <{element}> is not allowed")
    if ns == XLINK_NS and attr == "href":
        return "href"
    if ns or attr not in ALLOWED_ATTRIBUTES:
        raise UnsafeIcon(f"attribute {attr} on <{element}> is not allowed in an icon")
    return attr


def _check_value(element: str, attr: str, value: str) -> None:
    lowered = "".join(value.split()).lower()
    if attr == "href":
        if not _LOCAL_REF.match(value.strip()):
            raise UnsafeIcon(
                f"<{element}> refers to {value!r}: an icon may only refer to its own "
                'elements (href="#id")'
            )
        return
    for bad in _FORBIDDEN_IN_VALUES:
        if bad in lowered:
            raise UnsafeIcon(f"attribute {attr} on <{element}> holds {bad!r}")
    if attr == "style" and ("\\" in value or "<" in value):
        raise UnsafeIcon(f"the style of <{element}> holds an escape or markup")
    for match in _URL.finditer(value):
        if not _LOCAL_REF.match(match.group(2).strip()):
            raise UnsafeIcon(
                f"attribute {attr} on <{element}> refers to {match.group(2)!r}: an icon may "
                "only refer to its own elements (url(#id))"
            )
    if "url(" in lowered and not _URL.search(value):
        raise UnsafeIcon(f"attribute {attr} on <{element}> holds a malformed url()")


def _serialise(
    root: Element, *, tag: str | None = None, attrs: dict[str, str] | None = None
) -> bytes:
    parts: list[str] = []
    _write(root, parts, top=True, tag=tag, attrs=attrs)
    return "".join(parts).encode()


def _write(
    element: Element,
    parts: list[str],
    *,
    top: bool = False,
    tag: str | None = None,
    attrs: dict[str, str] | None = None,
) -> None:
    name = tag or _local(element.tag)[1]
    items = attrs if attrs is not None else _attributes(element)
    rendered = "".join(f" {k}={quoteattr(v)}" for k, v in items.items())
    xmlns = f' xmlns="{SVG_NS}"' if top and name == "svg" else ""
    parts.append(f"<{name}{xmlns}{rendered}>")
    if name in _TEXT_ELEMENTS and element.text:
        parts.append(escape(element.text))
    for child in element:
        _write(child, parts)
        if name in _TEXT_ELEMENTS and child.tail:
            parts.append(escape(child.tail))
    parts.append(f"</{name}>")


def _attributes(element: Element) -> dict[str, str]:
    return {_local(k)[1]: v for k, v in element.attrib.items()}


@functools.cache
def lucide_names() -> frozenset[str]:
    """The names of the vendored Lucide icons (file names without ``.svg``)."""
    return frozenset(path.stem for path in (LUCIDE_DIR / "icons").glob("*.svg"))


def lucide_version() -> str:
    """The vendored Lucide version (its ``VERSION`` file)."""
    return (LUCIDE_DIR / "VERSION").read_text().strip()


_SYMBOL_ATTRIBUTES = (
    "viewBox",
    "fill",
    "stroke",
    "stroke-width",
    "stroke-linecap",
    "stroke-linejoin",
)


@functools.cache
def lucide_sprite() -> bytes:
    """One SVG document holding every vendored Lucide icon as ``<symbol id="<name>">``
    (its ``viewBox`` and stroke settings kept), each checked as a plugin icon is."""
    parts = [f'<svg xmlns="{SVG_NS}">']
    for name in sorted(lucide_names()):
        data = (LUCIDE_DIR / "icons" / f"{name}.svg").read_bytes()
        root = _checked_tree(data, max_bytes=MAX_ICON_BYTES)
        attrs = {"id": name}
        attrs.update({k: root.get(k, "") for k in _SYMBOL_ATTRIBUTES if root.get(k)})
        parts.append(_serialise(root, tag="symbol", attrs=attrs).decode())
    parts.append("</svg>")
    return "".join(parts).encode()
