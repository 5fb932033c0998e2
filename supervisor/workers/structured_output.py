"""Each vendor's structured-output dialect of our answer schemas.

pydantic writes plain JSON Schema: optional fields are left out of `required` and carry a
`default`. The vendors' constrained-decoding modes accept narrower dialects, and refuse the request
(HTTP 400) when a schema steps outside them, so the schema a CLI sends is rewritten per vendor:

- OpenAI strict mode (codex `--output-schema` becomes `text.format` json_schema, strict): every
  object lists every property in `required` and sets `additionalProperties: false`; an optional
  field becomes nullable instead; `default` and the keywords strict mode does not support are
  dropped. The answer is still read through the pydantic model, where null means "the default".
- Gemini `responseJsonSchema`: only its documented keyword subset, and a `$ref` with no sibling
  keywords other than `$`-prefixed ones.
- Anthropic structured outputs (`claude --json-schema`): `additionalProperties: false` on every
  object, no numeric or string-length constraints.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

JsonSchema = dict[str, Any]

OPENAI_UNSUPPORTED = frozenset(
    {
        "default", "examples", "$schema",
        # objects
        "patternProperties", "unevaluatedProperties", "propertyNames", "minProperties",
        "maxProperties", "dependentRequired", "dependentSchemas",
        # strings
        "minLength", "maxLength",
        # arrays
        "unevaluatedItems", "contains", "minContains", "maxContains", "uniqueItems",
        # composition strict mode has no grammar for
        "allOf", "not", "if", "then", "else", "oneOf",
    }
)  # fmt: skip
GEMINI_SUPPORTED = frozenset(
    {
        "$id", "$defs", "$ref", "$anchor", "type", "format", "title", "description", "enum",
        "items", "prefixItems", "minItems", "maxItems", "minimum", "maximum", "anyOf", "oneOf",
        "properties", "additionalProperties", "required", "propertyOrdering",
    }
)  # fmt: skip
ANTHROPIC_UNSUPPORTED = frozenset(
    {
        "default", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "minLength", "maxLength", "minProperties", "maxProperties", "patternProperties",
    }
)  # fmt: skip
# Keywords whose value is a map of name → schema, a schema, or a list of schemas.
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def is_object(node: JsonSchema) -> bool:
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node


def is_nullable(node: JsonSchema) -> bool:
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(isinstance(s, dict) and is_nullable(s) for s in node.get("anyOf") or [])


def _children(node: JsonSchema, visit: Any) -> JsonSchema:
    """A copy of `node` with `visit` applied to every sub-schema."""
    out: JsonSchema = {}
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: visit(v) if isinstance(v, dict) else v for k, v in value.items()}
        elif key in _SCHEMA_ONE and isinstance(value, dict):
            out[key] = visit(value)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [visit(v) if isinstance(v, dict) else v for v in value]
        else:
            out[key] = copy.deepcopy(value)
    return out


def openai_strict(schema: JsonSchema) -> JsonSchema:
    """The schema as OpenAI strict mode accepts it (see the module docstring)."""

    def visit(node: JsonSchema) -> JsonSchema:
        node = {k: v for k, v in node.items() if k not in OPENAI_UNSUPPORTED}
        if "oneOf" in node:  # never emitted by our models; anyOf is the strict-mode spelling
            node["anyOf"] = node.pop("oneOf")
        node = _children(node, visit)
        if is_object(node):
            properties: dict[str, JsonSchema] = node.get("properties") or {}
            required = set(node.get("required") or [])
            for name, prop in properties.items():
                if name not in required and not is_nullable(prop):
                    properties[name] = _nullable(prop)
            node["properties"] = properties
            node["required"] = list(properties)
            node["additionalProperties"] = False
            node["type"] = "object"
        return node

    # Strict mode drops `oneOf`/`allOf` above; our models never produce them at the top.
    return visit(schema)


def _nullable(prop: JsonSchema) -> JsonSchema:
    """`prop` or null, with its annotations kept on the outside where a model reads them."""
    outer: JsonSchema = {k: prop[k] for k in ("title", "description") if k in prop}
    inner = {k: v for k, v in prop.items() if k not in outer}
    return {**outer, "anyOf": [inner, {"type": "null"}]}


def gemini_json_schema(schema: JsonSchema) -> JsonSchema:
    """The schema within Gemini's documented `responseJsonSchema` subset."""

    def visit(node: JsonSchema) -> JsonSchema:
        if "$ref" in node:
            return {k: v for k, v in node.items() if k.startswith("$")}
        node = {k: v for k, v in node.items() if k in GEMINI_SUPPORTED}
        return _children(node, visit)

    return visit(schema)


def anthropic_json_schema(schema: JsonSchema) -> JsonSchema:
    """The schema as Anthropic's structured outputs accept it."""

    def visit(node: JsonSchema) -> JsonSchema:
        node = {k: v for k, v in node.items() if k not in ANTHROPIC_UNSUPPORTED}
        if isinstance(node.get("minItems"), int) and node["minItems"] > 1:
            del node["minItems"]
        node = _children(node, visit)
        if is_object(node):
            node["additionalProperties"] = False
        return node

    return visit(schema)


DIALECTS = {
    "codex": openai_strict,
    "gemini": gemini_json_schema,
    "claude": anthropic_json_schema,
}


def for_cli(schema: type[BaseModel], cli: str | None) -> JsonSchema:
    """The answer schema in the dialect of the CLI's vendor; pydantic's own for None."""
    raw = schema.model_json_schema()
    dialect = DIALECTS.get(cli or "")
    return dialect(raw) if dialect else raw


@functools.lru_cache(maxsize=64)
def text(schema: type[BaseModel], cli: str | None = None) -> str:
    """Kept per schema and CLI: pydantic builds it afresh each time (10-20 ms on a loaded host),
    twice in every worker step's set-up (its prompt, its container's schema file) and once in its
    preparation."""
    return json.dumps(for_cli(schema, cli), indent=2)
