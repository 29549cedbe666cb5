"""Tool schemas at their top level (docs/KIRO-PROTOCOL.md §4.2): Kiro answers `TOOL_SCHEMA_INVALID`
unless it is `type: object` without `oneOf`/`anyOf`/`allOf`, which MCP servers' schemas often are
not. kirod flattens what clients send; whatever it sends, the fake Kiro's validator accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kirod.canonical.catalog import catalog_from_list_available_models
from kirod.canonical.request import (
    CanonicalRequest,
    ClientProtocol,
    Message,
    Role,
    TextBlock,
    ToolSpec,
)
from kirod.canonical.resolution import resolve_model
from kirod.errors import ApiError
from kirod.testing.fake_kiro.catalog import DEFAULT_MODELS
from kirod.testing.fake_kiro.validate import validate_chat
from kirod.upstream.payload import build_payload
from kirod.upstream.tools import MAX_FLATTEN_NODES

FAKE_MODELS = {model.model_id: model for model in DEFAULT_MODELS}
CATALOG = catalog_from_list_available_models([{"models": [m.to_json() for m in DEFAULT_MODELS]}])
SONNET = resolve_model("claude-sonnet-4-5", CATALOG)


def sent(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema of a tool declared with `schema`, as the payload carries it to Kiro, which
    the fake must accept."""
    request = CanonicalRequest(
        request_id="req_1",
        protocol=ClientProtocol.ANTHROPIC_MESSAGES,
        model="claude-sonnet-4-5",
        messages=(Message(Role.USER, (TextBlock("hi"),)),),
        tools=(ToolSpec("mcp__server__tool", "An MCP tool", schema),),
    )
    payload = build_payload(request, SONNET, conversation_id="c", profile_arn=None)
    rejection = validate_chat(payload.encoded, FAKE_MODELS)
    assert rejection is None, f"fake Kiro rejects the payload: {rejection.rule}"
    user = payload.body["conversationState"]["currentMessage"]["userInputMessage"]
    [tool] = user["userInputMessageContext"]["tools"]
    schema = tool["toolSpecification"]["inputSchema"]["json"]
    assert isinstance(schema, dict)
    return schema


CITY = {"type": "string", "description": "The city's name"}
ZIP = {"type": "string", "description": "A postal code"}
UNIT = {"enum": ["C", "F"], "description": "Degrees"}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        pytest.param(
            {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"city": CITY, "unit": UNIT},
                        "required": ["city", "unit"],
                    },
                    {
                        "type": "object",
                        "properties": {"zip": ZIP, "unit": UNIT},
                        "required": ["zip", "unit"],
                    },
                ],
                "description": "Look the weather up",
            },
            {
                "type": "object",
                "description": "Look the weather up",
                "properties": {"city": CITY, "unit": UNIT, "zip": ZIP},
                "required": ["unit"],
            },
            id="anyOf-requires-what-every-branch-does",
        ),
        pytest.param(
            {
                "type": "object",
                "oneOf": [{"properties": {"city": CITY}}, {"properties": {"zip": ZIP}}],
            },
            {"type": "object", "properties": {"city": CITY, "zip": ZIP}},
            id="oneOf-under-object",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {"unit": UNIT},
                "required": ["unit"],
                "allOf": [
                    {"properties": {"city": CITY}, "required": ["city"]},
                    {"properties": {"zip": ZIP}, "required": ["zip"]},
                ],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"unit": UNIT, "city": CITY, "zip": ZIP},
                "required": ["unit", "city", "zip"],
                "additionalProperties": False,
            },
            id="allOf-requires-everything",
        ),
        pytest.param(
            {
                "properties": {"city": CITY, "zip": ZIP},
                "anyOf": [{"required": ["city"]}, {"required": ["zip"]}],
            },
            {"type": "object", "properties": {"city": CITY, "zip": ZIP}},
            id="either-of-two-required",
        ),
        pytest.param(
            {
                "anyOf": [
                    {"type": "object", "properties": {"city": CITY}, "required": ["city"]},
                    {"type": "null"},
                ]
            },
            {"type": "object", "properties": {"city": CITY}},
            id="optional-object",
        ),
        pytest.param(
            {
                "$ref": "#/$defs/Weather",
                "$defs": {
                    "Weather": {
                        "type": "object",
                        "properties": {"city": CITY},
                        "required": ["city"],
                    }
                },
            },
            {
                "type": "object",
                "$defs": {
                    "Weather": {
                        "type": "object",
                        "properties": {"city": CITY},
                        "required": ["city"],
                    }
                },
                "properties": {"city": CITY},
                "required": ["city"],
            },
            id="root-ref",
        ),
        pytest.param(
            {
                "oneOf": [{"$ref": "#/definitions/ByCity"}, {"$ref": "#/definitions/ByZip"}],
                "definitions": {
                    "ByCity": {
                        "type": "object",
                        "properties": {"kind": {"const": "city"}, "city": CITY},
                        "required": ["kind", "city"],
                    },
                    "ByZip": {
                        "type": "object",
                        "properties": {"kind": {"const": "zip"}, "zip": ZIP},
                        "required": ["kind", "zip"],
                    },
                },
            },
            {
                "type": "object",
                "definitions": {
                    "ByCity": {
                        "type": "object",
                        "properties": {"kind": {"const": "city"}, "city": CITY},
                        "required": ["kind", "city"],
                    },
                    "ByZip": {
                        "type": "object",
                        "properties": {"kind": {"const": "zip"}, "zip": ZIP},
                        "required": ["kind", "zip"],
                    },
                },
                "properties": {
                    "kind": {"anyOf": [{"const": "city"}, {"const": "zip"}]},
                    "city": CITY,
                    "zip": ZIP,
                },
                "required": ["kind"],
            },
            id="discriminated-union-of-refs",
        ),
        pytest.param(
            {
                "anyOf": [
                    {"properties": {"when": {"type": "string", "description": "An ISO date"}}},
                    {"properties": {"when": {"type": "integer", "description": "Unix seconds"}}},
                ]
            },
            {
                "type": "object",
                "properties": {
                    "when": {
                        "anyOf": [
                            {"type": "string", "description": "An ISO date"},
                            {"type": "integer", "description": "Unix seconds"},
                        ],
                        "description": "An ISO date",
                    }
                },
            },
            id="a-property-declared-two-ways-keeps-both",
        ),
        pytest.param(
            {
                "allOf": [
                    {"anyOf": [{"properties": {"city": CITY}, "required": ["city"]}]},
                    {"required": ["zip"], "properties": {"zip": ZIP}},
                ]
            },
            {
                "type": "object",
                "properties": {"city": CITY, "zip": ZIP},
                "required": ["city", "zip"],
            },
            id="nested-unions",
        ),
        pytest.param(
            {
                "$ref": "#/$defs/Node",
                "$defs": {
                    "Node": {
                        "properties": {"next": {"$ref": "#/$defs/Node"}},
                        "allOf": [{"$ref": "#/$defs/Node"}],
                    }
                },
            },
            {
                "type": "object",
                "$defs": {
                    "Node": {
                        "properties": {"next": {"$ref": "#/$defs/Node"}},
                        "allOf": [{"$ref": "#/$defs/Node"}],
                    }
                },
                "properties": {"next": {"$ref": "#/$defs/Node"}},
            },
            id="recursive-ref-ends",
        ),
        pytest.param(
            {
                "anyOf": [
                    {"$ref": "https://example.com/schema.json"},
                    {"properties": {"city": CITY}},
                ]
            },
            {"type": "object", "properties": {"city": CITY}},
            id="remote-ref-adds-nothing",
        ),
        pytest.param(
            {"type": "string", "description": "A city", "minLength": 1},
            {"type": "object", "description": "A city", "properties": {}},
            id="string-root",
        ),
        pytest.param(
            {"type": "array", "items": {"type": "string"}, "anyOf": [{"minItems": 1}]},
            {"type": "object", "properties": {}},
            id="array-root-with-a-union",
        ),
    ],
)
def test_the_top_level_becomes_one_object_schema(
    schema: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert sent(schema) == expected


def test_an_object_schema_without_unions_is_sent_as_cleaned() -> None:
    schema = {"type": "object", "properties": {"city": CITY}, "required": ["city"], "title": "T"}
    assert sent(schema) == schema
    assert sent({"properties": {"city": CITY}}) == {"type": "object", "properties": {"city": CITY}}


def test_a_union_that_expands_beyond_the_bound_is_refused() -> None:
    """Each level's two references to the next double the nodes: 2**14 of them, past the bound."""
    levels = 14
    assert 2**levels > MAX_FLATTEN_NODES
    defs = {
        f"L{i}": {"allOf": [{"$ref": f"#/$defs/L{i + 1}"}, {"$ref": f"#/$defs/L{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"L{levels}"] = {"properties": {"x": {"type": "string"}}}
    with pytest.raises(ApiError) as caught:
        sent({"$ref": "#/$defs/L0", "$defs": defs})
    assert caught.value.code == "invalid_value"


# -- property-based: whatever a client sends, Kiro gets an object schema --------------------------

NAMES = st.sampled_from(["city", "zip", "type", "items", "a/b"])
TYPES = st.sampled_from(
    ["object", "string", "integer", "null", ["object", "null"], ["string", "null"]]
)
REFS = st.sampled_from(["#/$defs/A", "#/$defs/B", "#/definitions/C", "#/$defs/a~1b", "#", "x.json"])
DESCRIPTIONS = st.text(max_size=8)


def _node(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "type": TYPES | st.none(),
            "description": DESCRIPTIONS | st.none(),
            "properties": st.dictionaries(NAMES, children, max_size=3) | st.none(),
            "required": st.lists(NAMES | st.none() | st.integers(), max_size=3),
            "anyOf": st.lists(children, max_size=3),
            "oneOf": st.lists(children, max_size=3),
            "allOf": st.lists(children, max_size=3),
            "$ref": REFS,
            "additionalProperties": st.booleans(),
            "const": st.integers(),
        },
    )


SCHEMAS = st.recursive(_node(st.just({})), _node, max_leaves=16)
ROOTS = st.tuples(
    SCHEMAS,
    st.dictionaries(st.sampled_from(["A", "B", "a/b"]), SCHEMAS, max_size=2),
    st.dictionaries(st.just("C"), SCHEMAS, max_size=1),
).map(lambda parts: {**parts[0], "$defs": parts[1], "definitions": parts[2]})


def _object_like(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind in (None, "object")


def _declared_descriptions(root: dict[str, Any]) -> dict[str, list[str]]:
    """The descriptions of the properties the root and its top-level branches declare."""
    found: dict[str, list[str]] = {}
    sources = [root, *(b for key in ("anyOf", "oneOf", "allOf") for b in root.get(key, []))]
    for source in sources:
        if not _object_like(source) or not isinstance(source.get("properties"), dict):
            continue
        for name, schema in source["properties"].items():
            if isinstance(schema.get("description"), str):
                found.setdefault(name, []).append(schema["description"])
    return found


@settings(max_examples=300)
@given(ROOTS)
def test_every_schema_reaches_kiro_as_an_object_schema(schema: dict[str, Any]) -> None:
    result = sent(schema)  # the fake's check: `type: object`, no top-level union
    assert result["type"] == "object"
    assert isinstance(result["properties"], dict)
    assert not {"anyOf", "oneOf", "allOf", "$ref"} & set(result)
    if not _object_like(schema):
        return
    for name, descriptions in _declared_descriptions(schema).items():
        kept = json.dumps(result["properties"][name])
        assert all(json.dumps(text) in kept for text in descriptions), name


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "anyOf": [{"anyOf": '"$defs"'}]},
        {"type": "object", "oneOf": [3, None, {"properties": {"a": {}}}]},
        {"type": "object", "allOf": {"a": 1}, "required": "abc", "properties": [1]},
        {"type": "object", "$defs": "x", "anyOf": [{"$ref": "#/$defs/x"}]},
    ],
)
def test_a_malformed_union_adds_nothing_instead_of_failing(schema: dict[str, Any]) -> None:
    """Fuzzing found these: branches, `required` and `$defs` of the wrong JSON type. Each is
    sent as an object schema (Kiro judges the rest), never a 500."""
    result = sent(schema)
    assert result["type"] == "object"
    assert isinstance(result["properties"], dict)
