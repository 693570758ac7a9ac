"""Compiled templates of the built-in nodes: cached by source, bounded, still sandboxed."""

from __future__ import annotations

import jinja2
import pytest

from connectors import sdk
from connectors.builtin import data, templating
from connectors.testing import ActionTestEnvironment


def test_same_source_is_compiled_once() -> None:
    source = "cached {{ input.n }} once"
    first = templating.compiled(source, html=False)
    assert templating.compiled(source, html=False) is first
    assert first.render(input={"n": 1}) == "cached 1 once"
    assert first.render(input={"n": 2}) == "cached 2 once"  # no state kept between renders


def test_html_and_text_templates_of_one_source_are_distinct() -> None:
    source = "{{ input }}"
    assert templating.render(source, {"input": "<b>"}, html=True) == "&lt;b&gt;"
    assert templating.render(source, {"input": "<b>"}, html=False) == "<b>"


def test_cache_is_bounded() -> None:
    before = templating.cache_info()
    for i in range(templating.CACHE_ENTRIES + 50):
        templating.compiled(f"bounded {i} {{{{ input }}}}", html=False)
    info = templating.cache_info()
    assert info.currsize == templating.CACHE_ENTRIES
    assert info.misses - before.misses == templating.CACHE_ENTRIES + 50
    # the oldest were dropped: compiling the first again is a miss
    templating.compiled("bounded 0 {{ input }}", html=False)
    assert templating.cache_info().misses == info.misses + 1


def test_long_sources_are_not_kept() -> None:
    source = "x" * (templating.CACHE_MAX_CHARS + 1) + "{{ input }}"
    before = templating.cache_info()
    first = templating.compiled(source, html=False)
    assert templating.compiled(source, html=False) is not first
    after = templating.cache_info()
    assert (after.hits, after.misses) == (before.hits, before.misses)
    assert first.render(input="!").endswith("!")


def test_cached_template_stays_sandboxed() -> None:
    source = "{{ input.__class__.__mro__[1].__subclasses__() }}"
    for _ in range(2):  # the second render uses the cached template
        with pytest.raises(jinja2.exceptions.SecurityError):
            templating.render(source, {"input": "x"}, html=False)
    assert templating.compiled(source, html=False) is templating.compiled(source, html=False)


def test_syntax_error_is_reported_every_time() -> None:
    for _ in range(2):
        with pytest.raises(jinja2.TemplateSyntaxError):
            templating.compiled("{% if %}", html=False)


async def test_text_template_step_reuses_the_compiled_template() -> None:
    env = ActionTestEnvironment()
    config = {"template": "step reuse {{ input.n }} of {{ data }}", "data": 3}
    before = templating.cache_info()
    assert (await env.run(data.render_text, config, {"n": 1}))["text"] == "step reuse 1 of 3"
    assert (await env.run(data.render_text, config, {"n": 2}))["text"] == "step reuse 2 of 3"
    after = templating.cache_info()
    assert after.misses - before.misses == 1 and after.hits - before.hits == 1
    with pytest.raises(sdk.NonRetryableError) as err:
        await env.run(data.render_text, {"template": "{{ missing.x }}"}, {})
    assert err.value.kind == "template_error"
