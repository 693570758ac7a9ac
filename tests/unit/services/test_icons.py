"""Icons: the vendored Lucide set and the sanitiser every plugin icon goes through."""

from __future__ import annotations

import re
from xml.etree import ElementTree

import pytest

from backend.services.connectors import icons
from backend.services.connectors.icons import UnsafeIcon, sanitize_svg

SVG = 'xmlns="http://www.w3.org/2000/svg"'
XLINK = 'xmlns:xlink="http://www.w3.org/1999/xlink"'


def svg(body: str, extra: str = "") -> bytes:
    return f'<svg {SVG} {extra} viewBox="0 0 24 24">{body}</svg>'.encode()


def test_a_plain_icon_is_kept_and_written_again() -> None:
    data = b'<?xml version="1.0"?><!-- made by hand -->' + svg(
        '<defs><linearGradient id="g"><stop offset="0" stop-color="#f00"/></linearGradient>'
        "</defs><title>Acme</title>"
        '<rect x="1" y="1" width="22" height="22" rx="4" fill="url(#g)"/>'
        '<use xlink:href="#r"/><path id="r" d="M4 4h16" style="stroke: #fff"/>',
        XLINK,
    )
    out = sanitize_svg(data)
    assert out.startswith(b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">')
    assert b"<title>Acme</title>" in out and b'fill="url(#g)"' in out
    assert b'<use href="#r">' in out  # xlink:href written as href
    assert b"made by hand" not in out and b"<?xml" not in out
    ElementTree.fromstring(out)  # well-formed
    assert sanitize_svg(out) == out  # stable


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (svg("<script>alert(1)</script>"), "element <script> is not allowed"),
        (svg('<g onload="alert(1)"/>'), "event handler attribute onload"),
        (svg("", 'onclick="alert(1)"'), "event handler attribute onclick"),
        (
            svg('<foreignObject><p xmlns="http://www.w3.org/1999/xhtml">x</p></foreignObject>'),
            "element <foreignObject> is not allowed",
        ),
        (svg("<style>@import url(https://evil.test/x.css);</style>"), "element <style>"),
        (svg('<use href="https://evil.test/sprite.svg#a"/>'), "may only refer to its own"),
        (svg('<use xlink:href="https://evil.test/s.svg#a"/>', XLINK), "may only refer to its own"),
        (
            svg('<image href="data:image/svg+xml;base64,PHN2Zz48c2NyaXB0Lz48L3N2Zz4="/>'),
            "element <image>",
        ),
        (
            svg('<use href="data:image/svg+xml,&lt;svg onload=alert(1)&gt;"/>'),
            "may only refer to its own",
        ),
        (svg('<rect fill="url(https://evil.test/track.svg#p)"/>'), "may only refer to its own"),
        (svg('<rect style="fill: url(//evil.test/p)"/>'), "may only refer to its own"),
        (svg('<rect style="background: u\\72l(//evil.test/p)"/>'), "escape"),
        (svg('<a href="javascript:alert(1)"><rect/></a>'), "element <a>"),
        (svg('<set attributeName="href" to="javascript:alert(1)"/>'), "element <set>"),
        (svg('<animate attributeName="href" values="javascript:alert(1)"/>'), "element <animate>"),
        (svg('<rect fill="javascript:alert(1)"/>'), "'javascript:'"),
        (
            svg('<rect inkscape:label="x" xmlns:inkscape="http://www.inkscape.org/ns"/>'),
            "attribute label on <rect>",
        ),
        (b'<html xmlns="http://www.w3.org/1999/xhtml"><script/></html>', "root element"),
        (b'<svg xmlns="http://www.w3.org/2000/svg"><path d="M0 0"/></svg>', "viewBox"),
        (b"<svg", "not well-formed"),
    ],
)
def test_unsafe_icons_are_refused_with_the_reason(data: bytes, reason: str) -> None:
    with pytest.raises(UnsafeIcon, match=re.escape(reason)):
        sanitize_svg(data)


def test_entity_expansion_and_external_entities_are_refused() -> None:
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa">'
        b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]>'
        + svg("<title>&c;</title>")
    )
    with pytest.raises(UnsafeIcon, match="DOCTYPE"):
        sanitize_svg(bomb)
    external = b'<!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]>' + svg("<desc>&x;</desc>")
    with pytest.raises(UnsafeIcon, match="DOCTYPE"):
        sanitize_svg(external)


def test_size_and_element_caps() -> None:
    big = svg("<path d='M0 0'/>" * 10) + b" " * icons.MAX_ICON_BYTES
    with pytest.raises(UnsafeIcon, match="at most 65536"):
        sanitize_svg(big)
    many = svg("<g/>" * (icons.MAX_ICON_ELEMENTS + 1))
    with pytest.raises(UnsafeIcon, match="elements"):
        sanitize_svg(many)


def test_text_outside_text_elements_is_dropped_and_text_is_escaped() -> None:
    out = sanitize_svg(svg("<g>stray &lt;b&gt;</g><text>a &lt; b</text>"))
    assert b"stray" not in out and b"<text>a &lt; b</text>" in out


def test_the_vendored_lucide_set_and_its_sprite() -> None:
    names = icons.lucide_names()
    assert {"globe", "webhook", "puzzle"} <= names
    assert icons.lucide_version() == (icons.LUCIDE_DIR / "VERSION").read_text().strip()
    assert "ISC" in (icons.LUCIDE_DIR / "LICENSE").read_text()
    sprite = ElementTree.fromstring(icons.lucide_sprite())
    symbols = {s.get("id"): s for s in sprite.iter("{http://www.w3.org/2000/svg}symbol")}
    assert set(symbols) == names
    globe = symbols["globe"]
    assert globe.get("viewBox") == "0 0 24 24" and globe.get("stroke") == "currentColor"
    assert len(globe) > 0
