"""Typed node configs (backend.engine.nodes.config): the designer's schema and the decoded
value come from one msgspec Struct; stored configs decode as the dict readers read them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Annotated, Any, Literal

import msgspec
import pytest

from backend.engine.nodes import trigger_webhook as webhook
from backend.engine.nodes.base import NodeError
from backend.engine.nodes.config import config_schema, decode_config
from backend.engine.nodes.trigger_webhook import WebhookConfig, webhook_config
from backend.services.triggers.webhook_versions import (
    draft_config,
    invalid_body_mode,
    published_config,
)


class Sample(msgspec.Struct, kw_only=True, frozen=True):
    mode: Annotated[
        Literal["zeta", "alpha", "mid"],
        msgspec.Meta(title="Mode", extra_json_schema={"x-enum-labels": {"zeta": "Z"}}),
    ] = "zeta"
    limit: Annotated[int, msgspec.Meta(ge=0, title="Limit")] | None = None
    name: Annotated[str, msgspec.Meta(title="Name", description="Who")] = "x"


def test_schema_keeps_the_declared_enum_order_and_shows_optional_fields_unset() -> None:
    schema = config_schema(Sample)
    assert schema == {
        "type": "object",
        "properties": {
            "mode": {
                "title": "Mode",
                "x-enum-labels": {"zeta": "Z"},
                "enum": ["zeta", "alpha", "mid"],
                "default": "zeta",
                "type": "string",
            },
            "limit": {"title": "Limit", "type": "integer", "minimum": 0},
            "name": {"title": "Name", "description": "Who", "type": "string", "default": "x"},
        },
    }
    assert list(config_schema(Sample, exclude=frozenset({"limit"}))["properties"]) == [
        "mode",
        "name",
    ]


def test_decoding_is_lenient_where_the_dict_readers_were() -> None:
    decoded = decode_config(Sample, {"mode": "mid", "limit": "7", "name": "", "other": 1})
    assert decoded == Sample(mode="mid", limit=7, name="x")
    assert decode_config(Sample, {"limit": None}) == Sample()


@pytest.mark.parametrize(
    ("config", "field", "text"),
    [
        ({"mode": "beta"}, "mode", "Invalid enum value 'beta'"),
        ({"limit": -1}, "limit", ">= 0"),
        ({"name": ["a"]}, "name", "Expected `str`"),
    ],
)
def test_a_value_that_does_not_fit_names_its_field(
    config: dict[str, Any], field: str, text: str
) -> None:
    with pytest.raises(NodeError) as caught:
        decode_config(Sample, config)
    assert caught.value.kind == "invalid_config"
    assert caught.value.field == field
    assert str(caught.value).startswith(f"invalid config: {field}: ") and text in str(caught.value)


def test_each_webhook_version_schema_lists_the_fields_it_had() -> None:
    properties = [
        set(spec.config_schema["properties"])
        for spec in (webhook.SPEC, webhook.SPEC_V2, webhook.SPEC_V3, webhook.SPEC_V4)
    ]
    assert properties[3] == set(WebhookConfig.__struct_fields__)
    assert properties[3] - properties[2] == {"invalid_body"}
    assert properties[2] - properties[1] == {"failure_answer"}
    assert properties[1] - properties[0] == {"cloudevents"}
    assert webhook.SPEC.config_schema["properties"]["auth"]["enum"] == [
        "none",
        "header",
        "basic",
        "hmac",
    ]


def test_a_published_webhook_step_reads_only_its_versions_fields() -> None:
    stored = {"cloudevents": True, "failure_answer": "detailed", "invalid_body": "mark_invalid"}
    schema = {"type": "object"}
    v1 = published_config({"type": "trigger.webhook", "config": stored})
    assert (v1.cloudevents, v1.failure_answer, v1.invalid_body) == (False, "generic", "reject")
    v3 = published_config({"type": "trigger.webhook", "type_version": 3, "config": stored})
    assert (v3.cloudevents, v3.failure_answer) == (True, "detailed")
    v4_step = {"type": "trigger.webhook", "type_version": 4}
    v4 = published_config({**v4_step, "config": {**stored, "body_schema": schema}})
    assert invalid_body_mode(v4_step, v4) == "mark_invalid"
    assert invalid_body_mode({"type": "trigger.webhook", "type_version": 3}, v4) is None
    # a connector's webhook trigger is served with the endpoint's defaults
    assert published_config({"type": "acme.hook", "config": {"auth": "oauth"}}) == WebhookConfig()


def test_webhook_defaults_and_derived_values() -> None:
    config = webhook_config({"methods": " put, post ,", "path_suffix": "/gh/push/"})
    assert config.allowed_methods == ["PUT", "POST"] and config.suffix == "gh/push"
    assert webhook_config({"methods": " , "}).allowed_methods == ["POST"]
    assert WebhookConfig().token_header == "authorization"
    assert webhook_config({"auth_header": "X-Key "}).token_header == "x-key"
    assert webhook_config({"wait_timeout": 0}).answer_timeout == webhook.DEFAULT_WAIT_TIMEOUT
    assert webhook_config({"respond": "last_step"}).waits and not WebhookConfig().waits


def test_a_draft_keeps_the_fields_that_fit() -> None:
    config, problem = draft_config({"path_suffix": "a", "max_body": -5, "rate_limit": "x"})
    assert config.suffix == "a" and config.max_body is None and config.rate_limit == 0
    assert problem is not None and problem.field in ("max_body", "rate_limit")
    assert draft_config({"methods": "GET"}) == (WebhookConfig(methods="GET"), None)


def test_a_timer_gets_its_resolved_config_decoded_and_a_bad_value_names_its_field() -> None:
    from datetime import UTC, datetime, timedelta

    from backend.engine.nodes.config import typed_config
    from backend.engine.nodes.control_delay import Delay, DelayConfig
    from backend.engine.nodes.control_wait_until import WaitUntil

    now = datetime(2026, 1, 1, tzinfo=UTC)
    delay = Delay()
    config = typed_config(delay, {"seconds": 2, "note": "kept out"})
    assert config == DelayConfig(seconds=2.0)
    assert delay.due(config, now) == now + timedelta(seconds=2)
    for bad in ({"seconds": "5"}, {"seconds": -1}, {"seconds": True}, {"seconds": None}, {}):
        with pytest.raises(NodeError) as caught:
            typed_config(delay, bad)
        assert (caught.value.kind, caught.value.field) == ("invalid_config", "seconds")
    wait = WaitUntil()
    assert wait.due(typed_config(wait, {"until": "2026-02-01T09:00:00"}), now) == datetime(
        2026, 2, 1, 9, tzinfo=UTC
    )
    with pytest.raises(NodeError) as caught:
        typed_config(wait, {"until": 5})
    assert caught.value.field == "until"


def test_an_if_takes_the_condition_value_of_any_type() -> None:
    from backend.engine.nodes.config import typed_config
    from backend.engine.nodes.control_if import If

    step: Any = None
    behaviour = If()
    as_expression = ("condition",)  # a literal None is unset: the field is required
    none = typed_config(behaviour, {"condition": None}, as_expression)
    assert behaviour.evaluate(step, none, 1).ports == ("false",)
    assert behaviour.evaluate(step, typed_config(behaviour, {"condition": [0, 1]}), 1).ports == (
        "true",
    )


def test_a_timer_step_with_a_value_that_does_not_fit_fails_naming_the_field() -> None:
    """Delay and Wait Until decode their resolved config when the step starts: a value
    that does not fit fails the step (not the run's processing) with kind
    ``invalid_config`` and the field in the step error."""
    from backend.engine.states import RunStatus, StepStatus
    from tests.diagrams import diagram, edge, node
    from tests.unit.engine.driver import compile_dict, run_graph

    for step_type, field, expression, given in (
        ("control.delay", "seconds", "=wait", "5"),
        ("control.delay", "seconds", "=wait", -1),
        ("control.wait_until", "until", "=wait", 5),
    ):
        d = diagram(
            [node("start", "trigger.manual"), node("timer", step_type, **{field: expression})],
            [edge("start", "timer")],
        )
        state, _order = run_graph(compile_dict(d), {"wait": given})
        assert state.status == RunStatus.FAILED
        failed = state.steps["timer"]
        assert failed.status == StepStatus.FAILED
        assert failed.error is not None
        assert (failed.error["kind"], failed.error["field"]) == ("invalid_config", field)
        assert f"invalid config: {field}: " in failed.error["message"]


def _evaluate(
    behaviour: Any, config: dict[str, Any], data: Any = None, expressions: tuple[str, ...] = ()
) -> Any:
    """``behaviour`` evaluated on ``config`` decoded as the engine decodes it
    (``expressions``: the fields that held an expression)."""
    from backend.engine.nodes.config import typed_config

    step: Any = SimpleNamespace(expressions=dict.fromkeys(expressions, "x"))
    return behaviour.evaluate(step, typed_config(behaviour, config, expressions), data)


def test_flow_nodes_get_their_struct_and_a_value_that_does_not_fit_names_its_field() -> None:
    from backend.engine.nodes.control_respond import Respond
    from backend.engine.nodes.control_set import Set
    from backend.engine.nodes.control_stop_error import StopError
    from backend.engine.nodes.control_switch import Switch

    respond = Respond()
    assert _evaluate(respond, {"status": None, "headers": {"n": 1}}, "in").output == {
        "status": 200,
        "headers": {"n": "1"},
        "body": "in",
    }
    answered = _evaluate(respond, {"status": 201, "body": None}, "in", ("body",)).response
    assert answered["body"] is None  # an expression's null is sent
    assert _evaluate(respond, {"body": None}, "in").response["body"] == "in"  # literal: unset
    switch = Switch()
    assert _evaluate(switch, {"cases": ["a", "1"], "value": 1.0}).ports == ("1",)
    assert _evaluate(switch, {"cases": ["a", "b"], "rules": {"a": 1, "b": 1}}).ports == ("a",)
    all_mode = {"cases": ["a", "b"], "rules": {"a": 1, "b": 1}, "mode": "all"}
    assert _evaluate(switch, all_mode).ports == ("a", "b")
    assert _evaluate(switch, {"cases": ["a"], "value": "z"}).ports == ("default",)
    assert _evaluate(
        Set(), {"mapping": [{"name": "x", "value": 1}], "keep_input": True}, {"y": 2}
    ).output == {"y": 2, "x": 1}
    with pytest.raises(NodeError) as stopped:
        _evaluate(StopError(), {"message": 42, "error_kind": ""})
    assert (str(stopped.value), stopped.value.kind) == ("42", "stop_error")
    for behaviour, config, field in (
        (respond, {"status": 700}, "status"),
        (respond, {"headers": ["x"]}, "headers"),
        (switch, {"cases": ["a"], "rules": "x"}, "rules"),
        (switch, {"cases": "a"}, "cases"),
        (switch, {"cases": ["a"], "mode": "some"}, "mode"),
        (Set(), {"mapping": "x"}, "mapping"),
        (Set(), {}, "mapping"),
    ):
        with pytest.raises(NodeError) as caught:
            _evaluate(behaviour, config)
        assert (caught.value.kind, caught.value.field) == ("invalid_config", field)


def test_every_node_type_takes_a_struct_and_its_designer_fields_come_from_it() -> None:
    """The designer's field declarations and the value a behaviour works with cannot
    drift: every built-in node type version declares its config Struct and its spec's
    fields (those its version has), their order and ``required`` are the Struct's; a
    connector action's fields are its Struct's by construction, checked here too."""
    from backend.engine.nodes import BUILTIN_NODES
    from backend.services.connectors.node_reference import builtin_catalog
    from connectors.sdk.schema import config_json_schema

    for built_in in BUILTIN_NODES:
        struct = built_in.behaviour.config_type
        assert struct is not None, built_in.key
        derived = config_schema(struct)
        declared = built_in.spec.config_schema
        fields = list(declared["properties"])
        assert fields == [name for name in derived["properties"] if name in fields]
        assert all(declared["properties"][n] == derived["properties"][n] for n in fields)
        assert declared.get("required", []) == [
            n for n in derived.get("required", []) if n in fields
        ]
        assert set(built_in.spec.expression_fields) <= set(fields), built_in.key
    catalog = builtin_catalog()
    for (node_type, version), action in catalog.actions.items():
        if not isinstance(action.config_type, type) or action.config_type is dict:
            continue  # an imported OpenAPI operation: its fields are the operation's
        properties = config_json_schema(action.config_type)["properties"]
        spec = catalog.get(node_type)
        if spec is None or spec.version != version:
            continue
        shown = {k: v for k, v in spec.config_schema["properties"].items() if k != "on_error"}
        assert shown == {k: v for k, v in properties.items() if k != "on_error"}, node_type
