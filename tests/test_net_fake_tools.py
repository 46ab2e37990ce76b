"""The fake model's tool calls: which declared tool a text calls, and arguments made from JSON schemas (a property
test: whatever the schema, the arguments validate against it)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from rtrace.net.fake.tools import (
    DEFAULT_TOOL,
    TextValues,
    Tool,
    arguments_for,
    arguments_json,
    choose_tool,
    declared_tools,
    name_words,
    score,
    tool_choice,
)

ORDER = Tool(
    "lookup_order",
    "Look up an order by its id",
    {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
)
BOOK = Tool("bookAppointment", "Book an appointment with a doctor", {"type": "object", "properties": {}})


def test_name_words_split_snake_camel_and_kebab_case() -> None:
    assert name_words("lookup_order") == ["lookup", "order"]
    assert name_words("bookAppointment") == ["book", "appointment"]
    assert name_words("get-HTTPStatus2") == ["get", "http", "statu", "2"]  # plural s dropped on both sides


def test_score_counts_the_whole_name_its_words_and_description_words() -> None:
    assert score(ORDER, "call lookup_order now") >= 100
    assert score(ORDER, "lookup order 5") >= 100
    assert score(ORDER, "where are my orders?") == 10
    assert score(DEFAULT_TOOL, "I get it") == 0  # "get" says nothing
    assert score(BOOK, "I need a doctor") == 1
    assert score(BOOK, "") == 0


def test_choose_tool_best_match_first_on_ties_required_named_and_forced() -> None:
    tools = [ORDER, DEFAULT_TOOL, BOOK]
    assert choose_tool(tools, "What's the weather?") == DEFAULT_TOOL
    assert choose_tool(tools, "order and weather") == ORDER  # a tie: the first declared
    assert choose_tool(tools, "book an appointment for my order") == BOOK  # 20 beats 10
    assert choose_tool(tools, "hello") is None
    assert choose_tool(tools, "hello", "required") == ORDER
    assert choose_tool(tools, "weather", "none") is None
    assert choose_tool(tools, "weather", Tool("bookAppointment")) == BOOK
    assert choose_tool(tools, "weather", "auto", forced="undeclared") == Tool("undeclared")
    assert choose_tool([], "weather") is None


def test_declared_tools_and_tool_choice_from_the_response_or_the_session() -> None:
    session = {"tools": [{"type": "function", "name": "a"}, {"type": "mcp", "server_label": "x"}, {"name": ""}]}
    assert [t.name for t in declared_tools(session)] == ["a"]
    chat = {"type": "function", "function": {"name": "b", "description": "d", "parameters": {"type": "object"}}}
    assert declared_tools(session, {"tools": [chat]}) == [Tool("b", "d", {"type": "object"})]
    assert declared_tools(session, {"tools": "bad"}) == [Tool("a")]
    assert tool_choice({}) == "auto"
    assert tool_choice({"tool_choice": "none"}) == "none"
    assert tool_choice({"tool_choice": "none"}, {"tool_choice": "required"}) == "required"
    assert tool_choice({}, {"tool_choice": {"type": "function", "name": "x"}}) == Tool("x")
    assert tool_choice({}, {"tool_choice": {"type": "mcp", "server_label": "s"}}) == "auto"
    assert tool_choice({"tool_choice": 3}) == "auto"


def test_text_values_quoted_names_not_starting_a_sentence_and_numbers() -> None:
    v = TextValues('Book "Dr Who" in Paris. London is fine, for 3 people at 7.5')
    assert (v.quoted, v.names, v.numbers) == (["Dr Who"], ["Paris"], ["3", "7.5"])
    assert v.take_string(lambda s: True) == "Dr Who"
    assert v.take_string(lambda s: True) == "Paris"
    assert v.take_number(lambda n: True, integer=True) == 3
    assert v.take_number(lambda n: True, integer=True) is None  # 7.5 is not an integer
    assert v.take_string(lambda s: True) == "7.5"


def test_arguments_fill_required_properties_from_the_text_then_the_seed() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "people": {"type": "integer", "minimum": 1, "maximum": 12},
            "unit": {"enum": ["celsius", "fahrenheit"]},
            "when": {"type": "string", "format": "date"},
            "optional": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]},
            "flag": {"type": "boolean", "default": True},
        },
        "required": ["city", "people", "unit", "when", "tags", "where", "flag"],
    }
    args = arguments_for(schema, "A table in Paris for 4, in Fahrenheit please", seed=1)
    assert args["city"] == "Paris" and args["people"] == 4 and args["unit"] == "fahrenheit"
    assert args["when"] == "2025-01-15" and args["flag"] is True and "optional" not in args
    assert len(args["tags"]) == 2 and isinstance(args["where"]["lat"], float)
    jsonschema.validate(args, schema)
    assert arguments_for(schema, "x", seed=1) == arguments_for(schema, "x", seed=1)
    assert arguments_for(schema, "x", seed=1) != arguments_for(schema, "x", seed=2)


def test_no_parameters_or_no_properties_give_an_empty_object() -> None:
    assert arguments_json(Tool("t")) == "{}"
    assert arguments_json(Tool("t", parameters={"type": "object"})) == "{}"
    assert arguments_json(Tool("t", parameters={"type": "string"})) == "{}"
    assert arguments_json(DEFAULT_TOOL, "What's the weather in Paris?") == '{"city": "Paris"}'


def test_refs_all_of_any_of_and_type_lists() -> None:
    schema = {
        "type": "object",
        "$defs": {"Item": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}},
        "properties": {
            "item": {"$ref": "#/$defs/Item"},
            "both": {"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]}, {"required": ["b"]}]},
            "either": {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 5, "maximum": 5}]},
            "maybe": {"type": ["null", "boolean"]},
            "loop": {"$ref": "#"},
        },
        "required": ["item", "both", "either", "maybe"],
    }
    args = arguments_for(schema, "", seed=0)
    assert set(args["item"]) == {"sku"} and set(args["both"]) == {"a", "b"} and args["either"] == 5
    assert isinstance(args["maybe"], bool)
    jsonschema.validate(args, schema)


# -- the property: arguments validate against any schema the strategy makes --------------------------------

NAMES = st.text("abcdefghij_", min_size=1, max_size=8)


def _numbers(integer: bool) -> st.SearchStrategy[dict[str, Any]]:
    base = st.integers(-50, 50)

    @st.composite
    def make(draw: Any) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer" if integer else "number"}
        lo = draw(st.none() | base)
        hi = draw(st.none() | base.map(lambda x: x if lo is None else lo + abs(x) + 2))
        if lo is not None:
            key = draw(st.sampled_from(["minimum", "exclusiveMinimum"]))
            schema[key] = lo
        if hi is not None:
            key = draw(st.sampled_from(["maximum", "exclusiveMaximum"]))
            schema[key] = hi
        if draw(st.booleans()) and (lo is None or hi is None or hi - lo >= 8):
            schema["multipleOf"] = draw(st.sampled_from([2, 3, 0.5] if not integer else [2, 3]))
        return schema

    return make()


def _strings() -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def make(draw: Any) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string"}
        if draw(st.booleans()):
            schema["minLength"] = draw(st.integers(0, 12))
        if draw(st.booleans()):
            schema["maxLength"] = draw(st.integers(schema.get("minLength", 0), 20))
        if draw(st.booleans()) and "maxLength" not in schema and schema.get("minLength", 0) <= 10:
            schema["format"] = draw(st.sampled_from(["date", "date-time", "email", "uuid", "uri"]))
        return schema

    return make()


LEAVES = st.one_of(
    _strings(),
    _numbers(integer=True),
    _numbers(integer=False),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.lists(st.text("xyz", min_size=1, max_size=3), min_size=1, max_size=4, unique=True).map(lambda v: {"enum": v}),
    st.integers(-3, 3).map(lambda v: {"const": v}),
    st.just({"type": "string", "default": "d"}),
    st.just({"type": ["string", "null"]}),
)


def objects(children: st.SearchStrategy[dict[str, Any]], most: int = 4) -> st.SearchStrategy[dict[str, Any]]:
    """Object schemas of up to `most` properties of `children`, some required, closed or with `minProperties`."""

    @st.composite
    def obj(draw: Any) -> dict[str, Any]:
        props = draw(st.dictionaries(NAMES, children, max_size=most))
        required = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
        schema: dict[str, Any] = {"type": "object", "properties": props, "required": required}
        if draw(st.booleans()):
            schema["additionalProperties"] = False
        elif draw(st.booleans()):
            schema["minProperties"] = draw(st.integers(0, len(props) + 2))
        return schema

    return obj()


def _containers(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:

    @st.composite
    def arr(draw: Any) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "array", "items": draw(children)}
        least = draw(st.integers(0, 3))
        schema["minItems"] = least
        if draw(st.booleans()):
            schema["maxItems"] = least + draw(st.integers(0, 2))
        return schema

    return st.one_of(objects(children), arr(), children.map(lambda c: {"anyOf": [c, {"type": "null"}]}))


SCHEMAS = st.recursive(LEAVES, _containers, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(objects(SCHEMAS, most=5), st.text(max_size=60), st.integers(0, 5))
def test_arguments_made_from_any_schema_validate_against_it(schema: dict[str, Any], text: str, seed: int) -> None:
    args = arguments_for(schema, text, seed, "t")
    jsonschema.Draft202012Validator(schema).validate(args)
    assert json.loads(arguments_json(Tool("t", parameters=schema), text, seed)) == args
    assert set(args) >= set(schema["required"])


def test_a_code_the_user_reads_out_fills_a_string_before_its_digits_do() -> None:
    schema = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
    assert arguments_for(schema, "Where is my order A-1234?") == {"order_id": "A-1234"}
    assert arguments_for(schema, "Order INV2024_07 please") == {"order_id": "INV2024_07"}
    number = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert arguments_for(number, "Where is my order A-1234, item 7?") == {"n": 7}
