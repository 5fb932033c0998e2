"""How each vendor's API judges a structured-output schema, written from the vendors' rules.

The scripted API must refuse what the real API refuses, or a schema the real API would reject
passes every test (issue 11: codex sent a non-strict schema that only the real OpenAI API would
have refused). These checks are deliberately written from the vendors' documented rules and
their observed error texts, not from `supervisor.workers.structured_output`, so a transformation
that
drifts from the rules fails here.

Each function returns the refusal message the real API answers with, or None when it accepts.
"""

from __future__ import annotations

from typing import Any

Context = tuple[str, ...]

# OpenAI strict mode: "not supported" in the Structured Outputs guide. The API names the first
# offending keyword ("In context=(...), 'default' is not permitted.").
OPENAI_NOT_PERMITTED = (
    "default", "patternProperties", "unevaluatedProperties", "propertyNames", "minProperties",
    "maxProperties", "minLength", "maxLength", "unevaluatedItems", "contains", "minContains",
    "maxContains", "uniqueItems", "allOf", "not", "if", "then", "else", "oneOf",
)  # fmt: skip
GEMINI_SCHEMA_FIELDS = frozenset(
    {
        "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
        "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
        "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum",
        "maximum",
    }
)  # fmt: skip
"""The fields of Gemini's proto `Schema` (`responseSchema`): anything else is a parse error."""


def _is_object(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node


def _walk(node: Any, context: Context = ()) -> list[tuple[Context, dict[str, Any]]]:
    """Every sub-schema with its path, parents first (the order the API reports in)."""
    if not isinstance(node, dict):
        return []
    found = [(context, node)]
    for key in ("properties", "$defs", "definitions"):
        for name, child in (node.get(key) or {}).items():
            found += _walk(child, (*context, key, name))
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            found += _walk(node[key], (*context, key))
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for index, child in enumerate(node.get(key) or []):
            found += _walk(child, (*context, key, str(index)))
    return found


def openai_refusal(name: str, schema: Any) -> str | None:
    """OpenAI's verdict on a strict `json_schema` format (Responses `text.format`, Chat
    `response_format`): the message of its 400 `invalid_json_schema` error, or None."""
    prefix = f"Invalid schema for response_format '{name}'"
    if not isinstance(schema, dict) or schema.get("type") != "object" or "anyOf" in schema:
        got = schema.get("type") if isinstance(schema, dict) else None
        return (
            f"{prefix}: schema must be a JSON Schema of 'type: \"object\"', got 'type: \"{got}\"'."
        )
    for context, node in _walk(schema):
        where = f"{prefix}: In context={context!r}, "
        for keyword in OPENAI_NOT_PERMITTED:
            if keyword in node:
                return f"{where}'{keyword}' is not permitted."
        if not _is_object(node):
            continue
        if node.get("additionalProperties") is not False:
            return f"{where}'additionalProperties' is required to be supplied and to be false."
        properties = node.get("properties") or {}
        required = node.get("required")
        missing = [p for p in properties if not isinstance(required, list) or p not in required]
        if missing:
            return (
                f"{where}'required' is required to be supplied and to be an array including "
                f"every key in properties. Missing '{missing[0]}'."
            )
        extra = [r for r in required or [] if r not in properties]
        if extra:
            return f"{where}Extra required key '{extra[0]}' supplied."
    return None


def anthropic_refusal(field: str, schema: Any) -> str | None:
    """Anthropic's verdict on an `output_format`/`output_config.format` json_schema."""
    for _context, node in _walk(schema):
        if not _is_object(node):
            continue
        value = node.get("additionalProperties")
        if value is True:
            return (
                f"{field}: For 'object' type, 'additionalProperties: true' is not supported. "
                "Please set 'additionalProperties' to false"
            )
        if value is not False:
            return (
                f"{field}: For 'object' type, 'additionalProperties' must be explicitly set "
                "to false"
            )
    return None


def gemini_refusal(config: Any) -> str | None:
    """Gemini's verdict on a `generationConfig`'s response schema fields."""
    if not isinstance(config, dict):
        return None
    json_schema = config.get("responseJsonSchema", config.get("response_json_schema"))
    proto_schema = config.get("responseSchema", config.get("response_schema"))
    if json_schema is not None and proto_schema is not None:
        return (
            "* GenerateContentRequest.generation_config.response_schema: "
            "response_schema must be omitted when response_json_schema is set.\n"
        )
    if json_schema is not None or proto_schema is not None:
        mime = config.get("responseMimeType", config.get("response_mime_type"))
        if mime not in ("application/json", "text/x.enum"):
            return (
                "* GenerateContentRequest.generation_config.response_mime_type: "
                "response_mime_type must be application/json when a response schema is set.\n"
            )
    if isinstance(proto_schema, dict):
        unknown = _unknown_proto_field(proto_schema, "generation_config.response_schema")
        if unknown:
            key, where = unknown
            return (
                f'Invalid JSON payload received. Unknown name "{key}" at '
                f"'{where}': Cannot find field."
            )
    if isinstance(json_schema, dict):
        for context, node in _walk(json_schema):
            if "$ref" in node and any(not key.startswith("$") for key in node):
                return (
                    "* GenerateContentRequest.generation_config.response_json_schema: "
                    f"at {'/'.join(context) or '/'}: when $ref is set, no other properties "
                    "except those starting with $ may be set.\n"
                )
    return None


def _unknown_proto_field(node: Any, where: str) -> tuple[str, str] | None:
    """The first key the proto `Schema` has no field for, at the path protobuf's JSON parser
    names (map entries as `properties[i].value`)."""
    if not isinstance(node, dict):
        return None
    for key in node:
        if key not in GEMINI_SCHEMA_FIELDS:
            return key, where
    for index, child in enumerate((node.get("properties") or {}).values()):
        found = _unknown_proto_field(child, f"{where}.properties[{index}].value")
        if found:
            return found
    found = _unknown_proto_field(node.get("items"), f"{where}.items")
    if found:
        return found
    for index, child in enumerate(node.get("anyOf") or []):
        found = _unknown_proto_field(child, f"{where}.any_of[{index}]")
        if found:
            return found
    return None
