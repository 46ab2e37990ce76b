"""The fields `step` reads and their JSON types: a field of another type is a problem and read as absent."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rtrace.core import reducer
from rtrace.core.fields import FIELDS, Spec, _wrong, check_of, checked, holds
from rtrace.core.state import TraceState
from rtrace.core.trace import Record


def test_a_field_of_the_wrong_type_is_a_problem_and_read_as_absent() -> None:
    state = TraceState()
    event = {"type": "error", "error": {"code": ["x"], "message": "m", "event_id": 5}, "event_id": "e"}
    rec = Record(0, 7, 0.0, "server", 1, event, "error", "error")
    clean = checked(state, rec, FIELDS["error"])
    assert clean.event == {"type": "error", "error": {"message": "m"}, "event_id": "e"}
    assert event["error"]["code"] == ["x"]  # the record itself is not changed
    assert [(line, path, kind) for line, path, kind, _ in state.field_problems] == [
        (7, ("error", "code"), "a string"),
        (7, ("error", "event_id"), "a string"),
    ]
    good = Record(1, 8, 0.0, "server", 1, {"type": "error", "error": "boom"}, "error", "error")
    assert checked(state, good, FIELDS["error"]) is good  # a bare string is the API's message
    outputs = {"type": "response.done", "response": {"id": "r", "output": [{"id": 1}, "x", {"id": "i"}]}}
    rec = Record(2, 9, 0.0, "server", 1, outputs, "response.done", "response.done")
    assert checked(state, rec, FIELDS["response.done"]).event["response"]["output"] == [{}, None, {"id": "i"}]
    assert state.field_problem_count == 4


def test_the_fields_of_pairing_and_the_error_table_are_type_checked_too() -> None:
    """What the handlers of errors, overlapping connections and closes read (an error's `param` for
    `catalog.error_answers`, `replay_visible` of an opened connection, `by` of a close) goes through `FIELDS` like
    the rest: a wrong type is a problem, read as absent."""
    state = TraceState()
    cases = [
        ("error", {"type": "error", "error": {"code": "invalid_value", "param": ["item", "id"]}}, ("error", "param")),
        ("connection.opened", {"type": "connection.opened", "replay_visible": "no"}, ("replay_visible",)),
        ("connection.closed", {"type": "connection.closed", "code": 1000, "by": 7}, ("by",)),
    ]
    for n, (kind, event, path) in enumerate(cases, 1):
        rec = Record(n, n, 0.0, "meta" if kind != "error" else "server", 1, event, kind, kind)
        clean = checked(state, rec, FIELDS[kind])
        assert clean is not rec and state.field_problems[-1][:2] == (n, path)
        inner = clean.event
        for key in path[:-1]:
            inner = inner[key]
        assert path[-1] not in inner
    assert state.field_problem_count == len(cases)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
_RIGHT: dict[frozenset[type], st.SearchStrategy[Any]] = {
    frozenset({str}): st.text(max_size=3),
    frozenset({int}): st.integers(),
    frozenset({int, float}): st.integers() | st.floats(allow_nan=False),
    frozenset({bool}): st.booleans(),
    frozenset({dict}): st.just({}),
    frozenset({list}): st.just([]),
    frozenset({dict, str}): st.text(max_size=3) | st.just({}),
}


def _value(draw: st.DrawFn, types: frozenset[type], inner: Spec | None) -> Any:
    """A value for a field: of one of its types (with fields below it drawn the same way), or any JSON value."""
    if draw(st.integers(0, 4)) == 0:
        return draw(_JSON)
    value = draw(_RIGHT[types])
    if inner is not None and type(value) is dict:
        value = _fields(draw, inner)
    elif inner is not None and type(value) is list:
        _, each, below = inner[0]
        value = [_value(draw, each, below) for _ in range(draw(st.integers(0, 3)))]
    return value


def _fields(draw: st.DrawFn, spec: Spec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, types, inner in spec:
        if draw(st.booleans()):
            out[key] = _value(draw, types, inner)
    return out


@st.composite
def events(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    kind = draw(st.sampled_from(sorted(FIELDS)))
    return kind, {"type": kind, **_fields(draw, FIELDS[kind])}


@given(events())
@settings(max_examples=400)
def test_holds_agrees_with_the_walk_of_the_spec(drawn: tuple[str, dict[str, Any]]) -> None:
    """`holds` of the spec made into a `Check` (what `step` asks of every record) says an event is clean exactly when
    the reference walk finds no wrong field, and `checked` then keeps the record as it is."""
    kind, event = drawn
    bad: list[Any] = []
    _wrong(event, FIELDS[kind], (), bad)
    assert holds(event, check_of(FIELDS[kind])) is (not bad)
    rec = Record(0, 1, 0.0, "server", 1, event, kind, kind)
    state = TraceState()
    assert (checked(state, rec, FIELDS[kind]) is rec) is (not bad)
    assert state.field_problem_count == len(bad)


def test_step_holds_each_types_spec() -> None:
    """`step` finds a type's handler, its spec and the spec as `holds` walks it in one lookup: the spec of `FIELDS`,
    itself, and its one `Check`."""
    for (_, kind), (_, spec, check) in reducer._STEPS.items():
        assert spec is FIELDS.get(kind), kind
        assert check is check_of(FIELDS.get(kind, ())), kind
