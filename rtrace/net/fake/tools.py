"""The fake model's tool calls: which tool the session (or the response) declared a response calls
(`choose_tool`), and arguments made from that tool's JSON schema (`arguments_for`). Pure and deterministic: the
same session, user text and seed always give the same call.

**Which tool.** The tools are `response.create`'s `response.tools` when it gives a list, else `session.tools`
(function tools with a name; a session that declares none has `DEFAULT_TOOL`, `get_weather`). The tool choice
is the response's `tool_choice`, else the session's (`auto` when neither says):

- `none`: no call. A named function (`{"type": "function", "name": N}`): a call of N.
- `auto`: a call of the tool the last user text best matches, when it matches one at all. A tool scores 100
  when the text contains its whole name (`lookup_order`, or its words in a row: `lookup order`), 10 for each
  word of its name the text contains (words of 3 letters or more; `get`, `set`, `tool`, ... do not count), and 1
  for each word of 5 letters or more of its description the text contains. Words are compared in lower case,
  a final `'s` or plural `s` dropped. The highest score wins, the first declared on a tie; score 0: no call.
- `required`: like `auto`, but the first declared tool when none scores.

A forced tool (`rtrace serve --tool NAME`, `EndpointOptions.tool`) replaces the choice unless it is `none`. A
user turn is answered by one call at most: once a `function_call` follows the last user message, the next
response answers in text.

**Which arguments** (`arguments_for`): the properties the schema requires (only those; `minProperties` adds
optional ones), each filled by its schema: `const`; else `default`; else a value of the user text that fits (see
`TextValues`: for a string, a quoted phrase, else a code of letters and digits (`A-1234`), else a capitalized word
not starting a sentence, else a number; for an integer or a number, a number; for an `enum`, a value the text
names); else a value made from the seed: an `enum` member, a string `<property>-<n>` (or a sample of its `format`:
date, date-time, time, email, uri, uuid, ipv4), a number within `minimum`/`maximum` (exclusive bounds and
`multipleOf` kept), a boolean, `null`; arrays get `minItems` items (at least one, at most `maxItems`, unique when
`uniqueItems`), objects recurse. Type lists take their first non-null type, `anyOf`/`oneOf` their first branch,
`allOf` the merge of its branches, `$ref` a local `#/$defs/...` or `#/definitions/...`. A `pattern` is met only by
a text value that matches it. No parameters, or no properties: `{}`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
import uuid
from collections.abc import Sequence
from typing import Any

from .wire import copy_json


@dataclasses.dataclass(frozen=True)
class Tool:
    """A function tool a session or a response declared: its name, description and JSON schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None


#: What the default script calls when the session declares no tool: the tool of the livekit e2e scenarios.
DEFAULT_TOOL = Tool(
    "get_weather",
    "Get the weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)

#: Name words that say nothing about what a tool is for (`get_weather` is about the weather, not about "get").
_GENERIC = frozenset(
    {"get", "set", "put", "add", "use", "run", "call", "tool", "tools", "func", "function", "the", "and", "for",
     "with", "from", "fetch", "make", "do", "api"}
)  # fmt: skip
#: Description words of 5 letters or more that say nothing about a tool.
_STOP = frozenset(
    {"about", "after", "before", "could", "given", "other", "their", "there", "these", "those", "where", "which",
     "while", "would", "should", "using", "return", "returns", "value", "values", "specified", "provided"}
)  # fmt: skip

_WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _norm(word: str) -> str:
    """A word as the match compares it: lower case, without a final `'s` or plural `s`."""
    w = word.lower()
    if w.endswith("'s"):
        w = w[:-2]
    elif "'" in w:
        w = w.split("'", 1)[0]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    return w


def words(text: str) -> list[str]:
    """The words of `text` as the match compares them."""
    return [_norm(w) for w in _WORD.findall(text)]


def name_words(name: str) -> list[str]:
    """The words of a tool name: `lookup_order`, `lookupOrder`, `lookup-order` -> lookup, order."""
    return [_norm(w) for part in re.split(r"[^A-Za-z0-9]+", name) for w in _CAMEL.findall(part)]


def declared_tools(session: dict[str, Any], params: dict[str, Any] | None = None) -> list[Tool]:
    """The function tools a response may call: `params["tools"]` when it is a list, else the session's."""
    raw = params.get("tools") if params is not None and isinstance(params.get("tools"), list) else None
    if raw is None:
        raw = session.get("tools")
    tools: list[Tool] = []
    for obj in raw if isinstance(raw, list) else []:
        if not isinstance(obj, dict) or obj.get("type", "function") != "function":
            continue
        inner = obj.get("function")
        spec: dict[str, Any] = inner if isinstance(inner, dict) else obj  # the chat-completions shape, or GA
        name = spec.get("name")
        if isinstance(name, str) and name:
            description = spec.get("description")
            parameters = spec.get("parameters")
            tools.append(
                Tool(
                    name,
                    description if isinstance(description, str) else "",
                    parameters if isinstance(parameters, dict) else None,
                )
            )
    return tools


def tool_choice(session: dict[str, Any], params: dict[str, Any] | None = None) -> str | Tool:
    """The tool choice of a response: `none`, `auto`, `required`, or the named tool (a bare `Tool`)."""
    choice: Any = params.get("tool_choice") if params is not None else None
    if choice is None:
        choice = session.get("tool_choice")
    if isinstance(choice, dict):
        inner = choice.get("function")
        name = (inner if isinstance(inner, dict) else choice).get("name")
        if choice.get("type", "function") == "function" and isinstance(name, str) and name:
            return Tool(name)
        return "auto"
    return choice if choice in ("none", "auto", "required") else "auto"


def score(tool: Tool, text: str) -> int:
    """How well `text` matches `tool` (see the module docstring): 0 when it does not mention it."""
    said = words(text)
    if not said:
        return 0
    present = set(said)
    mine = name_words(tool.name)
    total = 0
    if mine and (tool.name.lower() in text.lower() or _contains_run(said, mine)):
        total += 100
    total += 10 * sum(1 for w in set(mine) if len(w) >= 3 and w not in _GENERIC and w in present)
    described = {w for w in words(tool.description) if len(w) >= 5 and w not in _STOP}
    total += sum(1 for w in described - set(mine) if w in present)
    return total


def _contains_run(said: Sequence[str], run: Sequence[str]) -> bool:
    n = len(run)
    return any(list(said[i : i + n]) == list(run) for i in range(len(said) - n + 1))


def choose_tool(
    tools: Sequence[Tool], text: str, choice: str | Tool = "auto", forced: str | None = None
) -> Tool | None:
    """The tool a response answering the user's `text` calls, or None (see the module docstring)."""
    if choice == "none":
        return None
    wanted = forced if forced is not None else choice.name if isinstance(choice, Tool) else None
    if wanted is not None:
        return next((t for t in tools if t.name == wanted), Tool(wanted))
    best: Tool | None = None
    best_score = 0
    for tool in tools:
        s = score(tool, text)
        if s > best_score:
            best, best_score = tool, s
    if best is None and choice == "required" and tools:
        return tools[0]
    return best


# -- arguments --------------------------------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”")
#: An identifier a user reads out: letters and digits together, maybe joined by `-` or `_` (`A-1234`, `INV2024`).
_CODE = re.compile(r"(?<![\w-])(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9][\w-]*[A-Za-z0-9](?![\w-])")
_SENTENCE_END = re.compile(r"[.!?]\s*$")

#: Sample strings for string formats (what `jsonschema` and clients accept as each).
FORMAT_SAMPLES: dict[str, str] = {
    "date": "2025-01-15",
    "date-time": "2025-01-15T12:00:00Z",
    "time": "12:00:00",
    "email": "user@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
}


class TextValues:
    """Values the user's text offers, in the order they appear, each used once: quoted phrases, codes (letters
    and digits together: `A-1234` in "Where is my order A-1234?"), capitalized words that do not start a sentence
    (`Paris` in "What's the weather in Paris?"), and numbers."""

    def __init__(self, text: str) -> None:
        self.quoted = [a or b for a, b in _QUOTED.findall(text)]
        rest = _QUOTED.sub(" ", text)
        self.codes = _CODE.findall(rest)
        rest = _CODE.sub(" ", rest)
        self.numbers = _NUMBER.findall(rest)
        self.names: list[str] = []
        start = True
        for m in re.finditer(r"\S+", rest):
            token = m.group(0)
            word = token.strip(",;:()[]{}.!?\"'“”")
            if word and word[0].isupper() and word.isalpha() and not start:
                self.names.append(word)
            start = bool(_SENTENCE_END.search(token))

    def take_string(self, fits: Any) -> str | None:
        for pool in (self.quoted, self.codes, self.names, self.numbers):
            for i, value in enumerate(pool):
                if fits(value):
                    return pool.pop(i)
        return None

    def take_number(self, fits: Any, integer: bool) -> int | float | None:
        for i, raw in enumerate(self.numbers):
            value: int | float = int(raw) if "." not in raw else float(raw)
            if integer and not isinstance(value, int):
                continue
            if fits(value):
                del self.numbers[i]
                return value
        return None

    def take_enum(self, options: list[Any]) -> Any:
        """An enum member the text names (case-insensitive), removed from the text's values."""
        said = {w.lower() for pool in (self.quoted, self.names, self.numbers) for w in pool}
        said |= {m.lower() for m in _WORD.findall(" ".join(self.quoted))}
        for option in options:
            if str(option).lower() in said:
                return option
        return _MISSING


_MISSING: Any = object()
_MAX_DEPTH = 8


class _Maker:
    """One generation: the root schema (for `$ref`), the text's values, the seeded random source."""

    def __init__(self, root: dict[str, Any], text: TextValues, rng: random.Random) -> None:
        self.root = root
        self.text = text
        self.rng = rng

    def resolve(self, schema: Any, depth: int) -> dict[str, Any]:
        """`schema` with its local `$ref`, `allOf` and first `anyOf`/`oneOf` branch folded in."""
        if not isinstance(schema, dict):
            return {}
        for _ in range(_MAX_DEPTH):
            ref = schema.get("$ref")
            if not isinstance(ref, str):
                break
            target = self._ref(ref)
            schema = {**{k: v for k, v in schema.items() if k != "$ref"}, **target}
        if isinstance(schema.get("allOf"), list) and depth < _MAX_DEPTH:
            merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                merged = _merge(merged, self.resolve(part, depth + 1))
            schema = merged
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches and depth < _MAX_DEPTH:
                usable = [b for b in branches if isinstance(b, dict) and b.get("type") != "null"] or branches
                base = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
                schema = _merge(base, self.resolve(usable[0], depth + 1))
        return schema

    def _ref(self, ref: str) -> dict[str, Any]:
        node: Any = self.root
        if not ref.startswith("#"):
            return {}
        for part in ref[1:].split("/"):
            if not part:
                continue
            part = part.replace("~1", "/").replace("~0", "~")
            node = node.get(part) if isinstance(node, dict) else None
        return node if isinstance(node, dict) else {}

    def value(self, raw: Any, name: str, depth: int) -> Any:
        schema = self.resolve(raw, depth)
        if "const" in schema:
            return copy_json(schema["const"])
        if "default" in schema:
            return copy_json(schema["default"])
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            named = self.text.take_enum(enum)
            return copy_json(named if named is not _MISSING else self.rng.choice(enum))
        kind = _type_of(schema)
        if depth >= _MAX_DEPTH:
            return {"object": {}, "array": [], "string": "", "integer": 0, "number": 0, "boolean": False}.get(kind)
        if kind == "object":
            return self.obj(schema, depth)
        if kind == "array":
            return self.array(schema, name, depth)
        if kind == "integer":
            return self.number(schema, integer=True)
        if kind == "number":
            return self.number(schema, integer=False)
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "null":
            return None
        return self.string(schema, name)

    def obj(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        required = [r for r in schema.get("required") or [] if isinstance(r, str)]
        names = [p for p in props if p in required] + [r for r in dict.fromkeys(required) if r not in props]
        least = _count(schema, "minProperties")
        if least is not None and len(names) < least:
            names += [p for p in props if p not in names][: least - len(names)]
        out = {n: self.value(props.get(n, {}), n, depth + 1) for n in names}
        extra = schema.get("additionalProperties", True)
        k = 0
        while least is not None and len(out) < least and extra is not False:
            k += 1
            key = f"extra_{k}"
            if key not in out and key not in props:
                out[key] = self.value(extra if isinstance(extra, dict) else {}, key, depth + 1)
        return out

    def array(self, schema: dict[str, Any], name: str, depth: int) -> list[Any]:
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        if isinstance(items, list):  # draft 4-7 tuple form
            prefix, items = items, schema.get("additionalItems", {})
        prefix = prefix if isinstance(prefix, list) else []
        least = _count(schema, "minItems") or 0
        most = _count(schema, "maxItems")
        count = max(least, len(prefix), 1)
        if most is not None:
            count = min(count, most)
        if items is False:
            count = min(count, len(prefix))
        unique = schema.get("uniqueItems") is True
        out: list[Any] = []
        tries = 0
        while len(out) < count and tries < count * 20 + 20:
            tries += 1
            sub = prefix[len(out)] if len(out) < len(prefix) else items if isinstance(items, dict) else {}
            value = self.value(sub, name, depth + 1)
            if unique and any(_same(value, seen) for seen in out):
                value = self._variant(sub, value, name, depth, out)
                if value is _MISSING:
                    continue
            out.append(value)
        return out

    def _variant(self, sub: Any, value: Any, name: str, depth: int, seen: list[Any]) -> Any:
        """Another value of `sub` for a unique array: defaults and consts repeat, so vary the seeded part."""
        schema = self.resolve(sub, depth + 1)
        stripped = {k: v for k, v in schema.items() if k not in ("default",)}
        for _ in range(10):
            candidate = self.value(stripped, name, depth + 1)
            if not any(_same(candidate, s) for s in seen):
                return candidate
        return _MISSING

    def number(self, schema: dict[str, Any], integer: bool) -> int | float:
        lo, lo_open, hi, hi_open = _bounds(schema)
        step = _num(schema, "multipleOf")
        step = step if step is not None and step > 0 else None

        def fits(v: int | float) -> bool:
            if lo is not None and (v < lo or (lo_open and v == lo)):
                return False
            if hi is not None and (v > hi or (hi_open and v == hi)):
                return False
            return step is None or _multiple(v, step)

        told = self.text.take_number(fits, integer)
        if told is not None:
            return told
        low = lo if lo is not None else (hi - 100 if hi is not None else 0)
        high = hi if hi is not None else low + 100
        if integer or step is not None:
            unit = step if step is not None else 1
            first, last = math.ceil(low / unit), math.floor(high / unit)
            candidates = [k * unit for k in range(first, min(last, first + 1000) + 1)]
            candidates = [v for v in candidates if fits(v) and (not integer or float(v).is_integer())]
            if not candidates:
                return int(low) if integer else low
            value = self.rng.choice(candidates)
            return int(value) if integer else value
        value = round(low + (high - low) * self.rng.random(), 2)
        return value if fits(value) else (low + high) / 2

    def string(self, schema: dict[str, Any], name: str) -> str:
        least = _count(schema, "minLength") or 0
        most = _count(schema, "maxLength")
        pattern = schema.get("pattern") if isinstance(schema.get("pattern"), str) else None
        fmt = schema.get("format")

        def fits(v: str) -> bool:
            if len(v) < least or (most is not None and len(v) > most):
                return False
            if pattern is not None:
                try:
                    return re.search(pattern, v) is not None
                except re.error:
                    return True
            return True

        if fmt == "uuid":
            return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        if isinstance(fmt, str) and fmt in FORMAT_SAMPLES and fits(FORMAT_SAMPLES[fmt]):
            return FORMAT_SAMPLES[fmt]
        told = self.text.take_string(fits)
        if told is not None:
            return told
        value = f"{name or 'value'}-{self.rng.randint(1, 999)}"
        if len(value) < least:
            value += "x" * (least - len(value))
        if most is not None:
            value = value[:most]
        return value


def _type_of(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if isinstance(kind, str):
        return kind
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
        return "number"
    return "string"


def _num(schema: dict[str, Any], key: str) -> int | float | None:
    v = schema.get(key)
    return v if isinstance(v, int | float) and not isinstance(v, bool) else None


def _count(schema: dict[str, Any], key: str) -> int | None:
    v = schema.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _bounds(schema: dict[str, Any]) -> tuple[float | None, bool, float | None, bool]:
    """(low, low exclusive, high, high exclusive), draft 4 boolean exclusives and draft 6+ numbers alike."""
    lo, hi = _num(schema, "minimum"), _num(schema, "maximum")
    lo_open = schema.get("exclusiveMinimum") is True and lo is not None
    hi_open = schema.get("exclusiveMaximum") is True and hi is not None
    ex = _num(schema, "exclusiveMinimum")
    if ex is not None and (lo is None or ex >= lo):
        lo, lo_open = ex, True
    ex = _num(schema, "exclusiveMaximum")
    if ex is not None and (hi is None or ex <= hi):
        hi, hi_open = ex, True
    return lo, lo_open, hi, hi_open


def _multiple(v: float, step: float) -> bool:
    """`v` is a multiple of `step` as JSON Schema validators test it (the quotient is a whole number)."""
    if isinstance(v, int) and isinstance(step, int):
        return v % step == 0
    q = v / step
    return float(q).is_integer()


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) and type(a) is type(b)


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two schemas in one: properties and required united, the rest of `b` over `a`."""
    out = {**a, **b}
    if isinstance(a.get("properties"), dict) and isinstance(b.get("properties"), dict):
        out["properties"] = {**a["properties"], **b["properties"]}
    if isinstance(a.get("required"), list) and isinstance(b.get("required"), list):
        out["required"] = list(dict.fromkeys([*a["required"], *b["required"]]))
    return out


def arguments_for(schema: dict[str, Any] | None, text: str = "", seed: object = 0, tool: str = "") -> dict[str, Any]:
    """Arguments for a call of a tool with parameters `schema`, answering `text`: always a JSON object (see the
    module docstring). The same schema, text, seed and tool name give the same arguments."""
    if not isinstance(schema, dict):
        return {}
    rng = random.Random(f"{seed}\0{tool}\0{text}")
    maker = _Maker(schema, TextValues(text), rng)
    resolved = maker.resolve(schema, 0)
    if _type_of(resolved) != "object":
        return {}
    value = maker.obj(resolved, 0)
    return value


def arguments_json(tool: Tool, text: str = "", seed: object = 0) -> str:
    """The `arguments` string of a call of `tool` answering `text` (`{}` at least: clients reject an empty one)."""
    return json.dumps(arguments_for(tool.parameters, text, seed, tool.name), ensure_ascii=False)

