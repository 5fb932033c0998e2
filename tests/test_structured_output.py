"""The answer schemas each vendor receives, and the scripted API refusing what the real one refuses.

The refusal rules (supervisor/fakeapi/schema_rules.py) are written from the vendors' documented
limits and their real error texts; the transformations (supervisor/workers/structured_output.py)
must
satisfy them for every schema we ship, and for any schema our models could grow into.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Literal, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, create_model

from supervisor.core.schemas import OUTPUT_SCHEMAS, ImplementationOutput, ReviewOutput
from supervisor.fakeapi import ScriptedModelServer, load_script
from supervisor.fakeapi.schema_rules import (
    _walk,
    anthropic_refusal,
    gemini_refusal,
    openai_refusal,
)
from supervisor.workers import structured_output

NAME = "codex_output_schema"
REAL = sorted(OUTPUT_SCHEMAS.items())


def objects(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [node for _, node in _walk(schema) if "properties" in node]


@pytest.mark.parametrize(("output", "model"), REAL)
def test_every_shipped_schema_is_accepted_by_openai_strict_mode(
    output: str, model: type[BaseModel]
) -> None:
    strict = structured_output.for_cli(model, "codex")
    assert openai_refusal(NAME, strict) is None
    for node in objects(strict):
        assert node["additionalProperties"] is False
        assert sorted(node["required"]) == sorted(node["properties"])
    assert "default" not in json.dumps(strict)


def test_pydantics_own_schema_is_refused_with_openais_error_text() -> None:
    refusal = openai_refusal(NAME, ImplementationOutput.model_json_schema())
    assert refusal == (
        "Invalid schema for response_format 'codex_output_schema': In context=(), 'required' is "
        "required to be supplied and to be an array including every key in properties. "
        "Missing 'summary'."
    )


def test_the_refusal_names_the_nested_object_that_breaks_the_rules() -> None:
    strict = structured_output.for_cli(ReviewOutput, "codex")
    strict["$defs"]["ReviewIssue"].pop("additionalProperties")
    assert openai_refusal(NAME, strict) == (
        "Invalid schema for response_format 'codex_output_schema': In context=('$defs', "
        "'ReviewIssue'), 'additionalProperties' is required to be supplied and to be false."
    )
    strict = structured_output.for_cli(ReviewOutput, "codex")
    strict["properties"]["summary"]["default"] = ""
    assert "In context=('properties', 'summary'), 'default' is not permitted." in str(
        openai_refusal(NAME, strict)
    )


@pytest.mark.parametrize(
    ("output", "model"),
    [(o, m) for o, m in REAL if any(not f.is_required() for f in m.model_fields.values())],
)
def test_null_for_an_optional_field_means_its_default(output: str, model: type[BaseModel]) -> None:
    """Strict mode makes the model write every optional field, as null when it has nothing."""
    strict = structured_output.for_cli(model, "codex")
    answer = {
        name: None if name not in (model.model_json_schema().get("required") or []) else "x"
        for name in strict["properties"]
    }
    answer["status"] = strict["properties"]["status"]["enum"][0]
    if "estimated_components" in answer:
        answer["estimated_components"] = 0
    if "phases" in answer:
        answer["phases"] = [{"id": "p", "description": "d", "components": None}]
    parsed = model.model_validate(answer)
    defaults = model.model_validate({k: v for k, v in answer.items() if v is not None})
    assert parsed == defaults


def test_null_for_a_required_field_is_still_an_error() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="status"):
        ImplementationOutput.model_validate({"status": None})


# Schemas our models could grow into: nested models, optional and nullable fields, lists, enums.
_leaf = st.sampled_from(
    [
        (str, ...),
        (str, ""),
        (int, Field(default=0, ge=0)),
        (Optional[str], None),  # noqa: UP045 (create_model takes the typing form too)
        (list[str], Field(default_factory=list)),
        (Literal["A", "B"], ...),
        (bool, False),
        (str, Field(default="", min_length=1, max_length=80)),
    ]
)
# The names `[a-j][a-j_]{0,7}` matches, drawn without the regex strategy (a third of the spec's
# CPU went to drawing through it).
_names = st.builds(str.__add__, st.sampled_from("abcdefghij"), st.text("abcdefghij_", max_size=7))


@st.composite
def answer_models(draw: st.DrawFn, depth: int = 2) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for name in draw(st.lists(_names, min_size=1, max_size=6, unique=True)):
        if depth and draw(st.booleans()):
            child = draw(answer_models(depth=depth - 1))
            fields[name] = draw(
                st.sampled_from(
                    [
                        (child, ...),
                        (Optional[child], None),  # noqa: UP045
                        (list[child], Field(default_factory=list)),  # type: ignore[valid-type]
                    ]
                )
            )
        else:
            fields[name] = draw(_leaf)
    return create_model(  # type: ignore[call-overload,no-any-return]
        f"M{draw(st.integers(0, 10**6))}", __config__=ConfigDict(extra="forbid"), **fields
    )


@settings(max_examples=40, deadline=None)
@given(answer_models())
def test_any_answer_model_becomes_a_schema_every_vendor_accepts(model: type[BaseModel]) -> None:
    assert openai_refusal(NAME, structured_output.for_cli(model, "codex")) is None
    assert (
        anthropic_refusal("output_format.schema", structured_output.for_cli(model, "claude"))
        is None
    )
    config = {
        "responseMimeType": "application/json",
        "responseJsonSchema": structured_output.for_cli(model, "gemini"),
    }
    assert gemini_refusal(config) is None


# The scripted API over HTTP, as the CLIs meet it.
def post(server: ScriptedModelServer, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    request = urllib.request.Request(
        server.url + path,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture
def server() -> Any:
    script = load_script({"conversations": [{"repeat": True, "turns": [{"text": "{}"}]}]})
    with ScriptedModelServer(script) as running:
        yield running


def openai_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "gpt-5.5",
        "input": [{"type": "message", "role": "user", "content": "hi"}],
        "text": {"format": {"type": "json_schema", "name": NAME, "schema": schema, "strict": True}},
        "stream": True,
    }


def test_the_openai_fake_refuses_a_non_strict_schema_as_openai_does(server: Any) -> None:
    status, body = post(server, "/v1/responses", openai_body(ReviewOutput.model_json_schema()))
    assert status == 400
    assert body["error"]["code"] == "invalid_json_schema"
    assert body["error"]["param"] == "text.format.schema"
    assert "'required' is required to be supplied" in body["error"]["message"]
    assert [r.kind for r in server.requests] == ["refused"]
    status, _ = post(
        server, "/v1/responses", openai_body(structured_output.for_cli(ReviewOutput, "codex"))
    )
    assert status == 200


def test_the_anthropic_fake_refuses_an_object_without_additional_properties_false(
    server: Any,
) -> None:
    loose = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "Write", "input_schema": {"type": "object"}}],
        "output_config": {"format": {"type": "json_schema", "schema": loose}},
    }
    status, answer = post(server, "/v1/messages", body)
    assert status == 400
    assert answer["error"] == {
        "type": "invalid_request_error",
        "message": "output_config.format.schema: For 'object' type, 'additionalProperties' "
        "must be explicitly set to false",
    }
    body["output_config"]["format"]["schema"] = structured_output.for_cli(ReviewOutput, "claude")
    assert post(server, "/v1/messages", body)[0] == 200


def test_the_gemini_fake_refuses_json_schema_keywords_in_the_proto_schema(server: Any) -> None:
    path = "/v1beta/models/gemini-2.5-pro:streamGenerateContent"
    body: dict[str, Any] = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {
            "responseMimeType": "application/json",
            "responseSchema": {
                "type": "object",
                "properties": {"a": {"type": "array", "items": {"additionalProperties": False}}},
            },
        },
    }
    status, answer = post(server, path, body)
    assert status == 400
    assert answer["error"]["status"] == "INVALID_ARGUMENT"
    assert answer["error"]["message"] == (
        'Invalid JSON payload received. Unknown name "additionalProperties" at '
        "'generation_config.response_schema.properties[0].value.items': Cannot find field."
    )
    body["generationConfig"] = {
        "responseMimeType": "application/json",
        "responseJsonSchema": structured_output.for_cli(ReviewOutput, "gemini"),
    }
    assert post(server, path, body)[0] == 200
