"""Client events checked against the API's published schema, answered with the real server's error shapes.

The schema is data (`client_events.schema.json`, package data) made by `tests/make_client_schema.py` from the
openai SDK's realtime types, which OpenAI generates from its API specification: never copied field by field. This
module reads the few JSON Schema keywords that file uses (`$ref`, `anyOf`, `type`, `const`, `enum`, `properties`,
`required`, `additionalProperties` (false, or the schema of a map's values), `items`) and names the first problem
the way the real server does:

- a field the schema does not know: `unknown_parameter`, "Unknown parameter: 'session.foo'.";
- a value outside a `const`/`enum`: `invalid_value`, "Invalid value: 'text'. Value must be 'output_text'." (or
  "Supported values are: 'a', 'b'.");
- a missing required field: `missing_required_parameter`, "Missing required parameter: 'item.role'.";
- a value of the wrong JSON type: `invalid_type`, "Invalid type for 'audio_end_ms': expected an integer, but got
  a string instead.".

`param` is the path (`item.content[0].type`). Of a union's alternatives (an item is one of nine), the one its
`const` fields agree with (`type: message`, `role: assistant`) is the one whose problem is told. Pure; the file is
read once.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from importlib import resources
from typing import Any

Schema = dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Invalid:
    """Why a client event is rejected: the API's error `code`, `message` and `param`."""

    code: str
    message: str
    param: str


@functools.cache
def client_schema() -> Schema:
    """The committed schema of the client events (`client_events.schema.json`)."""
    text = resources.files(__package__).joinpath("client_events.schema.json").read_text(encoding="utf-8")
    data: Schema = json.loads(text)
    return data


def check_client_event(event: dict[str, Any], schema: Schema | None = None) -> Invalid | None:
    """The first problem of `event` against the schema, or None when it is valid. An event whose type the schema
    does not hold (a beta name) is not judged here."""
    root = schema if schema is not None else client_schema()
    checker = _Checker(root.get("$defs", {}))
    for alt in root.get("anyOf", []):
        alt = checker.resolve(alt)
        if alt.get("properties", {}).get("type", {}).get("const") == event.get("type"):
            return checker.check(alt, event, "")
    return None


_ARTICLE_TYPES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
}


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 100 else text[:100]


def _is(kind: str, value: Any) -> bool:
    actual = json_type(value)
    return actual == kind or (kind == "number" and actual == "integer")


class _Checker:
    def __init__(self, defs: Schema) -> None:
        self.defs = defs

    def resolve(self, node: Schema) -> Schema:
        while "$ref" in node:
            node = self.defs[str(node["$ref"]).rsplit("/", 1)[-1]]
        return node

    def check(self, node: Schema, value: Any, path: str) -> Invalid | None:
        node = self.resolve(node)
        if "anyOf" in node:
            return self.union([self.resolve(alt) for alt in node["anyOf"]], value, path)
        if "const" in node and value != node["const"]:
            return _invalid_value(value, [node["const"]], path)
        if "enum" in node and value not in node["enum"]:
            return _invalid_value(value, list(node["enum"]), path)
        kind = node.get("type")
        if isinstance(kind, str) and not _is(kind, value):
            message = f"Invalid type for '{path}': expected {_ARTICLE_TYPES.get(kind, kind)}, but got "
            message += f"{_ARTICLE_TYPES[json_type(value)]} instead."
            return Invalid("invalid_type", message, path)
        if isinstance(value, dict):
            return self.fields(node, value, path)
        if isinstance(value, list) and isinstance(node.get("items"), dict):
            for i, element in enumerate(value):
                found = self.check(node["items"], element, f"{path}[{i}]")
                if found is not None:
                    return found
        return None

    def fields(self, node: Schema, value: dict[str, Any], path: str) -> Invalid | None:
        props: Schema = node.get("properties", {})
        prefix = f"{path}." if path else ""
        for key in node.get("required", []):
            if key not in value:
                return Invalid(
                    "missing_required_parameter", f"Missing required parameter: '{prefix}{key}'.", prefix + key
                )
        for key, element in value.items():
            if key in props:
                found = self.check(props[key], element, prefix + key)
                if found is not None:
                    return found
            elif node.get("additionalProperties") is False:
                return Invalid("unknown_parameter", f"Unknown parameter: '{prefix}{key}'.", prefix + key)
            elif isinstance(node.get("additionalProperties"), dict):  # a map's values (`metadata`: strings)
                found = self.check(node["additionalProperties"], element, prefix + key)
                if found is not None:
                    return found
        return None

    def union(self, alternatives: list[Schema], value: Any, path: str) -> Invalid | None:
        """Valid when one alternative takes the value; else the problem of the alternative it resembles most."""
        if isinstance(value, dict):
            tag = self.tag(alternatives, value, path)
            if tag is not None:
                return tag
        found: list[tuple[int, int, Invalid]] = []
        for order, alt in enumerate(alternatives):
            problem = self.check(alt, value, path)
            if problem is None:
                return None
            found.append((-self.affinity(alt, value), order, problem))
        return min(found, key=lambda x: (x[0], x[1]))[2]

    def consts(self, prop: Schema) -> list[Any]:
        return [a["const"] for a in (self.resolve(x) for x in self.resolve(prop).get("anyOf", [prop])) if "const" in a]

    def tag(self, alternatives: list[Schema], value: dict[str, Any], path: str) -> Invalid | None:
        """A field every alternative fixes (`type`) holding a value none of them takes: that value is the problem,
        told with every value the alternatives take."""
        for key, element in value.items():
            allowed: list[Any] = []
            for alt in alternatives:
                prop = alt.get("properties", {}).get(key)
                consts = self.consts(prop) if prop is not None else []
                if not consts:
                    break
                allowed.extend(c for c in consts if c not in allowed)
            else:
                if alternatives and element not in allowed:
                    return _invalid_value(element, allowed, f"{path}.{key}" if path else key)
        return None

    def affinity(self, node: Schema, value: Any) -> int:
        """How much `value` looks like one of `node`: its JSON type, each `const` field it agrees with (or not),
        each field the alternative knows (or not)."""
        kinds = [self.resolve(a).get("type") for a in node.get("anyOf", [])] or [node.get("type")]
        if not any(isinstance(k, str) and _is(k, value) for k in kinds) and "const" not in node:
            return -1000
        if not isinstance(value, dict):
            allowed = node.get("enum", [node["const"]] if "const" in node else None)
            return 0 if allowed is None else int(value in allowed)
        props: Schema = node.get("properties", {})
        score = 0
        for key, element in value.items():
            prop = props.get(key)
            if prop is None:
                score -= 1
                continue
            score += 1
            consts = self.consts(prop)
            if consts:
                score += 100 if element in consts else -100
        return score


def _invalid_value(value: Any, allowed: list[Any], path: str) -> Invalid:
    if len(allowed) == 1:
        rule = f"Value must be '{_shown(allowed[0])}'."
    else:
        rule = "Supported values are: " + ", ".join(f"'{_shown(a)}'" for a in allowed) + "."
    return Invalid("invalid_value", f"Invalid value: '{_shown(value)}'. {rule}", path)
