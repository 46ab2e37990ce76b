"""The fields `reducer.step` reads, with their JSON types (`FIELDS`), and the check that reads a field of another
type as absent (`checked`).

The ground rule is the reducer's (`core/reducer.py`): a field is read only with the JSON type the protocol gives
it; one of another type is an input problem (`TraceState.field_problems`, reported with its line and column by
the engine) and the rest of the event is folded, so no handler and no rule ever meets a value of an unexpected
type. The types are the exact Python types orjson gives (`bool` is neither an integer nor a number).

`step` asks `holds` of every record with a spec (the spec made into a `Check` once): one walk that stops at the
first wrong field. Only when it says no does `checked` walk again with `_wrong`, the reference, which finds the
path of each wrong field.
"""

from __future__ import annotations

from typing import Any

from .state import TraceState
from .trace import Record

#: Expected kinds, as the exact Python types orjson gives them (`bool` is neither an integer nor a number).
_STR, _INT, _NUM, _OBJ, _ARR, _BOOL = (
    frozenset({str}),
    frozenset({int}),
    frozenset({int, float}),
    frozenset({dict}),
    frozenset({list}),
    frozenset({bool}),
)
_OBJ_OR_STR = frozenset({dict, str})
_KIND_NAMES = {
    _STR: "a string",
    _INT: "an integer",
    _NUM: "a number",
    _OBJ: "an object",
    _ARR: "an array",
    _BOOL: "a boolean",
    _OBJ_OR_STR: "an object or a string",
}
#: A field spec: (key, expected types, spec of what is inside: of the object, or of every element of the array).
Spec = tuple[tuple[str, frozenset[type], "Spec | None"], ...]
#: Fields the reducer may keep problems of (beyond this, only counted).
MAX_FIELD_PROBLEMS = 1000

_ITEM: Spec = (
    ("id", _STR, None),
    ("type", _STR, None),
    ("role", _STR, None),
    ("call_id", _STR, None),
    ("name", _STR, None),
    ("status", _STR, None),
    ("arguments", _STR, None),
    ("output", _STR, None),
    ("content", _ARR, (("*", _OBJ, (("text", _STR, None), ("transcript", _STR, None))),)),
)
_ERROR: Spec = (
    ("code", _STR, None),
    ("type", _STR, None),
    ("message", _STR, None),
    ("event_id", _STR, None),
    ("param", _STR, None),
)
_METADATA: Spec = (("client_event_id", _STR, None),)
_RESPONSE: Spec = (
    ("id", _STR, None),
    ("status", _STR, None),
    ("conversation", _STR, None),
    ("conversation_id", _STR, None),
    ("metadata", _OBJ, _METADATA),
    ("status_details", _OBJ, (("error", _OBJ, _ERROR),)),
    ("output", _ARR, (("*", _OBJ, (("id", _STR, None),)),)),
)
_ITEM_EVENT: Spec = (("event_id", _STR, None), ("previous_item_id", _STR, None), ("item", _OBJ, _ITEM))
_ITEM_REF: Spec = (
    ("event_id", _STR, None),
    ("item_id", _STR, None),
    ("previous_item_id", _STR, None),
    ("audio_end_ms", _INT, None),
)
#: The fields `step` reads, by event type: what the handlers of `_TABLE`, `conversation.update_item`,
#: `audio.session_format` and the facts' consumers (rules read `error` and `metadata` objects) take from an event.
FIELDS: dict[str, Spec] = {
    "connection.opened": (("path", _STR, None), ("replay_visible", _BOOL, None)),
    "connection.closed": (("code", _INT, None), ("reason", _STR, None), ("by", _STR, None)),
    "conversation.item.create": _ITEM_EVENT,
    "conversation.item.added": _ITEM_EVENT,
    "conversation.item.done": _ITEM_EVENT,
    "conversation.item.retrieved": _ITEM_EVENT,
    "response.output_item.added": (*_ITEM_EVENT, ("response_id", _STR, None)),
    "response.output_item.done": (*_ITEM_EVENT, ("response_id", _STR, None)),
    "conversation.item.delete": _ITEM_REF,
    "conversation.item.deleted": _ITEM_REF,
    "conversation.item.retrieve": _ITEM_REF,
    "conversation.item.truncate": _ITEM_REF,
    "conversation.item.truncated": _ITEM_REF,
    "input_audio_buffer.committed": _ITEM_REF,
    "response.create": (("event_id", _STR, None), ("response", _OBJ, _RESPONSE)),
    "response.created": (("event_id", _STR, None), ("response", _OBJ, _RESPONSE)),
    "response.done": (("event_id", _STR, None), ("response", _OBJ, _RESPONSE)),
    "response.cancel": (("event_id", _STR, None), ("response_id", _STR, None)),
    "error": (("event_id", _STR, None), ("error", _OBJ_OR_STR, _ERROR)),  # a bare string is read as the message
    "session.created": (("event_id", _STR, None), ("session", _OBJ, None)),
    "session.updated": (("event_id", _STR, None), ("session", _OBJ, None)),
    "transcription_session.updated": (("event_id", _STR, None), ("session", _OBJ, None)),
    "response.function_call_arguments.done": (("item_id", _STR, None), ("arguments", _STR, None)),
    "response.output_audio.delta": (("item_id", _STR, None), ("delta", _STR, None), ("rtrace_audio_bytes", _INT, None)),
    "local.conversation": (("items", _ARR, (("*", _OBJ, _ITEM),)),),
    "local.generation.opened": (("response_id", _STR, None),),
    "local.generation.closed": (("response_id", _STR, None),),
}
for _kind in ("session.update", "transcription_session.update", "input_audio_buffer.commit"):
    FIELDS[_kind] = (("event_id", _STR, None),)
for _kind in ("input_audio_buffer.clear", "output_audio_buffer.clear"):
    FIELDS[_kind] = (("event_id", _STR, None),)


def _wrong(value: dict[str, Any], spec: Spec, path: tuple[str | int, ...], out: list[Any]) -> None:
    """Append (path, expected types) for each field below the object `value` whose type is not the spec's."""
    for key, types, inner in spec:
        v = value.get(key)
        if v is None:
            continue
        if type(v) not in types:
            out.append(((*path, key), types))
        elif inner is not None:
            if types is _ARR:
                _, each, below = inner[0]
                for i, x in enumerate(v):
                    if type(x) not in each:
                        out.append(((*path, key, i), each))
                    elif below is not None:
                        _wrong(x, below, (*path, key, i), out)
            elif type(v) is dict:
                _wrong(v, inner, (*path, key), out)


class _Field:
    """One field of a spec as `holds` walks it: its key, the one or two types it may have (`one`, `other`: the same
    type when only one), and what is inside: the fields of an object (`inner`), or every element of an array
    (`each`). Identity tests of types and native attributes, where a spec's walk unpacks tuples and hashes types."""

    __slots__ = ("each", "inner", "key", "one", "other")

    def __init__(self, key: str, types: frozenset[type], inner: Spec | None) -> None:
        if not 1 <= len(types) <= 2:
            raise ValueError(f"a field of one or two types, not {len(types)}: {key}")
        one, *other = sorted(types, key=lambda t: t.__name__)
        self.key = key
        self.one: type = one
        self.other: type = other[0] if other else one
        self.inner: list[_Field] | None = None
        self.each: _Field | None = None
        if inner is not None:
            if types is _ARR:
                self.each = _Field(*inner[0])
            else:
                self.inner = check_of(inner)


#: A spec as `holds` walks it (`check_of`).
Check = list[_Field]
_CHECKS: dict[Spec, Check] = {}


def check_of(spec: Spec) -> Check:
    """`spec` as `holds` walks it (made once per spec)."""
    check = _CHECKS.get(spec)
    if check is None:
        check = _CHECKS[spec] = [_Field(key, types, inner) for key, types, inner in spec]
    return check


def holds(value: dict[str, Any], check: Check) -> bool:
    """Whether every field `check` names below the object `value` has its type (`_wrong` would find none): what
    `step` asks of each record (its spec made into a `Check` once, `check_of`), answered without a path or a list."""
    for field in check:
        v = value.get(field.key)
        if v is None:
            continue
        t = type(v)
        if t is not field.one and t is not field.other:
            return False
        each = field.each
        if each is not None:
            inner = each.inner
            for x in v:
                tx = type(x)
                if tx is not each.one and tx is not each.other:
                    return False
                if inner is not None and tx is dict and not holds(x, inner):
                    return False
        elif t is dict and field.inner is not None and not holds(v, field.inner):
            return False
    return True


def _without(value: Any, path: tuple[str | int, ...]) -> Any:
    """A copy of `value` with the field at `path` absent (an array element becomes null); only the containers on
    the path are copied."""
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        copy = dict(value)
        if rest:
            copy[head] = _without(value[head], rest)
        else:
            del copy[head]
        return copy
    copy_list = list(value)
    copy_list[head] = _without(value[head], rest) if rest else None  # type: ignore[index]
    return copy_list


def checked(state: TraceState, rec: Record, spec: Spec) -> Record:
    """`rec`, or when a field `step` reads has the wrong JSON type, a record without that field; each such field is
    an input problem kept on `state` (line, path, expected) for the engine to report. `step` calls it only when
    `holds` says no."""
    bad: list[tuple[tuple[str | int, ...], frozenset[type]]] = []
    _wrong(rec.event, spec, (), bad)
    if not bad:
        return rec
    event = rec.event
    for path, types in bad:
        state.field_problem_count += 1
        if len(state.field_problems) < MAX_FIELD_PROBLEMS:
            state.field_problems.append((rec.line, path, _KIND_NAMES[types], rec))
        event = _without(event, path)
    return Record(rec.seq, rec.line, rec.t, rec.dir, rec.conn, event, rec.type, rec.raw_type)
