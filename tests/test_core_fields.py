"""The fields `step` reads and their JSON types: a field of another type is a problem and read as absent."""

from __future__ import annotations

from rtrace.core.fields import FIELDS, checked
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
    """What issue 13's handlers read (an error's `param` for `catalog.error_answers`, `replay_visible` of an
    opened connection, `by` of a close) goes through `FIELDS` like the rest: a wrong type is a problem, read as
    absent."""
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
