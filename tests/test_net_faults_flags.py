"""Injected faults: which fires when (once per server by default), the note each leaves, and what the client sees.
Unit tests of the spec matching, the declarations and the turns they compile to, then faults pushed through an
endpoint."""

from __future__ import annotations

import pytest

from rtrace.net.fake.endpoint import EndpointConnection, EndpointOptions, SharedCounters
from rtrace.net.fake.wire import Emission
from rtrace.net.faults.flags import FAULTS, Faults, matches, valid_close_code
from rtrace.net.faults.script import ConnectionScript, Schedule, parse_script

from .netdriver import Driver, make, types, user, weather_call


def test_a_spec_matches_a_type_and_an_item_type_or_role() -> None:
    create = {"type": "conversation.item.create", "item": {"type": "message", "role": "user"}}
    assert matches("conversation.item.create", create)
    assert matches("conversation.item.create:message", create) and matches("conversation.item.create:user", create)
    assert not matches("conversation.item.create:function_call_output", create)
    assert not matches("conversation.item.create:user", {"type": "conversation.item.create", "item": "x"})
    assert not matches("response.create", create)
    done = {"type": "response.done", "response": {"output": [{"type": "message"}, {"type": "function_call"}]}}
    assert matches("response.done:function_call", done) and not matches("response.done:function_call_output", done)


def test_close_codes_default_to_no_close_frame_for_drops_and_1000_for_close_after() -> None:
    closing = {"drop_on": ["response.create"], "drop_after": ["response.done"], "close_after": 3}
    plain = Schedule.of(Faults(**closing))  # type: ignore[arg-type]
    assert [(t.fault, t.close) for t in plain.turns] == [("close-after", 1000), ("drop-on", 1006), ("drop-after", 1006)]
    forced = Schedule.of(Faults(close_code=1011, **closing))  # type: ignore[arg-type]
    assert {t.close for t in forced.turns} == {1011}
    codes = (999, 1000, 1004, 1005, 1006, 1011, 1014, 1015, 2999, 3000, 4999, 5000)
    assert [c for c in codes if valid_close_code(c)] == [
        1000, 1005, 1006, 1011, 1014, 3000, 4999,
    ]  # fmt: skip


def test_drop_after_cuts_right_after_the_matching_server_event_once() -> None:
    fired: dict[str, int] = {}
    schedule = Schedule.of(Faults(drop_after=["response.output_item.done:function_call"]))
    faults = ConnectionScript(schedule, 1, fired)
    events = [
        Emission({"type": "response.output_item.added", "item": {"type": "function_call"}}),
        Emission({"type": "response.output_item.done", "item": {"type": "function_call"}}),
        Emission({"type": "response.done"}),
    ]
    kept, closed = faults.sent(events)
    assert closed and kept[:2] == events[:2]
    assert kept[2].meta == {
        "type": "fault.injected", "fault": "drop-after", "spec": "response.output_item.done:function_call",
        "server_event_type": "response.output_item.done",
    }  # fmt: skip
    assert kept[3].close == (1006, "fault: drop-after") and kept[3].flush and len(kept) == 4
    again = ConnectionScript(schedule, 2, fired)
    assert again.sent(events) == (events, False)  # once per server by default


def test_close_after_cuts_after_the_nth_event_and_closes() -> None:
    faults = ConnectionScript(Schedule.of(Faults(close_after=3)), 1, {})
    events = [Emission({"type": f"e{k}"}) for k in range(2)]
    assert faults.sent(events) == (events, False)
    kept, closed = faults.sent([Emission(meta={"type": "note"}), *events])
    assert closed and [em.event["type"] for em in kept if em.event] == ["e0"]
    assert kept[-2].meta == {"type": "fault.injected", "fault": "close-after", "spec": "3"}
    assert kept[-1].close == (1000, "fault: close-after")


def test_fault_drop_on_closes_before_answering() -> None:
    d = make(schedule=Schedule.of(Faults(drop_on=["conversation.item.create:function_call_output"])))
    weather_call(d)
    n = len(d.sent)
    out = d.send({"type": "conversation.item.create", "event_id": "f",
                  "item": {"type": "function_call_output", "call_id": "call_s1_0001_0", "output": "x"}})  # fmt: skip
    assert out == [] and len(d.sent) == n
    assert d.meta[-1]["fault"] == "drop-on" and d.meta[-1]["client_event_id"] == "f"
    assert d.closes == [(1006, "fault: drop-on", False)]  # a drop: no close frame by default
    assert d.conn.closed and d.send(user("x")) == []


def test_fault_close_after_n_events() -> None:
    d = Driver(EndpointConnection(1, schedule=Schedule.of(Faults(close_after=3))))
    d.open()
    d.send(user("a", "A"))
    assert len(d.sent) == 3
    assert d.closes == [(1000, "fault: close-after", True)]
    assert d.send(user("b", "B")) == []


def test_fault_fail_response() -> None:
    d = make(schedule=Schedule.of(Faults(fail_response={2})))
    d.send(user("hi", "A"))
    assert d.send({"type": "response.create"})[-1]["response"]["status"] == "completed"
    out = d.send({"type": "response.create"})
    assert types(out) == ["response.created", "response.done"]
    assert out[-1]["response"]["status"] == "failed" and out[-1]["response"]["output"] == []
    assert d.meta[-1]["fault"] == "fail-response"
    assert d.conn.responses.active is None


def test_fault_error_on() -> None:
    d = make(schedule=Schedule.of(Faults(error_on=["conversation.item.delete"])))
    d.send(user("hi", "A"))
    [err] = d.send({"type": "conversation.item.delete", "item_id": "A", "event_id": "d"})
    assert err["error"]["code"] == "fault_injected" and err["error"]["event_id"] == "d"
    assert d.meta[-1]["fault"] == "error-on"
    assert "A" in d.conn.conv


def test_fault_expiry() -> None:
    d = Driver(EndpointConnection(1, schedule=Schedule.of(Faults(expire_after=60.0))))
    d.run(d.conn.open(), follow=False)
    out = d.run(d.conn.wake(("expire",)))
    assert out[0]["error"]["code"] == "session_expired"
    assert "maximum duration of 1 minutes" in out[0]["error"]["message"]
    assert d.closes == [(1001, "Your session hit the maximum duration of 1 minutes.", True)]
    assert d.meta[-1]["fault"] == "expire-after"


def test_expiry_is_scheduled_on_open() -> None:
    conn = EndpointConnection(1, schedule=Schedule.of(Faults(expire_after=5.0)))
    ems = conn.open()
    assert ems[-1].wake == ("expire",) and ems[-1].delay == 5.0
    # The API's own limit: 60 minutes, not a fault.
    d = Driver(EndpointConnection(1))
    ems = d.conn.open()
    assert ems[-1].wake == ("expire",) and ems[-1].delay == 3600.0
    out = d.run(d.conn.wake(("expire",)))
    assert out[0]["error"]["message"] == "Your session hit the maximum duration of 60 minutes."
    assert d.meta == [] and d.closes == [(1001, "Your session hit the maximum duration of 60 minutes.", True)]
    assert EndpointConnection(1, EndpointOptions(max_session_seconds=None)).open()[-1].wake is None


def test_each_fault_fires_once_per_server_by_default() -> None:
    shared = SharedCounters()
    faults = Faults(drop_on=["conversation.item.create"], close_after=None)
    first = Driver(EndpointConnection(1, schedule=Schedule.of(faults), shared=shared))
    first.open()
    assert first.send(user("a", "A")) == [] and first.closes
    second = Driver(EndpointConnection(2, schedule=Schedule.of(faults), shared=shared))
    second.open()
    assert types(second.send(user("a", "A"))) == ["conversation.item.added", "conversation.item.done"]
    # times=None: every time.
    every = Faults(drop_on=["conversation.item.create"], times=None)
    for n in (3, 4):
        d = Driver(EndpointConnection(n, schedule=Schedule.of(every), shared=shared))
        d.open()
        assert d.send(user("a", "A")) == [] and d.closes


def test_close_after_and_expiry_arm_only_the_first_connection_by_default() -> None:
    shared = SharedCounters()
    a = EndpointConnection(1, schedule=Schedule.of(Faults(close_after=1)), shared=shared)
    assert a.open()[-1].close is not None and a.closed
    b = EndpointConnection(2, schedule=Schedule.of(Faults(close_after=1)), shared=shared)
    assert b.open()[-1].close is None and not b.closed
    c = EndpointConnection(3, schedule=Schedule.of(Faults(expire_after=1.0)), shared=shared)
    assert c.open()[-1].delay == 1.0
    d = EndpointConnection(4, schedule=Schedule.of(Faults(expire_after=1.0)), shared=shared)
    assert d.open()[-1].delay == 3600.0


# -- a fault is one declaration (rtrace.net.faults.flags.FAULTS) plus its turns; every consumer reads it ---------------

SAMPLES = {"count": 2, "numbers": {2}, "duration": 1.5}


def test_every_declared_fault_has_its_field_compiles_to_turns_named_after_it_and_is_described() -> None:
    from rtrace.net.fake.options import OPTION_BY_FIELD
    from rtrace.net.faults.flags import read

    fields = set(Faults().values)
    for fault in FAULTS:
        assert fault.field in fields, f"Faults has no field {fault.field} for {fault.name}"
        assert fault.field in OPTION_BY_FIELD and OPTION_BY_FIELD[fault.field].kind == fault.kind
        value = {"client": ["response.create"], "server": ["response.done"]}.get(fault.side or "", None)
        value = value if value is not None else SAMPLES[fault.kind]
        assert getattr(Faults(), fault.field) in (None, [], set()), "a fault not given does nothing"
        schedule = Schedule.of(Faults(**{fault.field: value}))
        assert schedule.turns and {t.fault for t in schedule.turns} == {fault.name}
        [words] = schedule.describe()
        assert words.startswith("faults (once each): ") and words != "no fault"
        assert read(fault, None) in (None, [], set())  # its kind reads "not given"
        assert parse_script(schedule.to_toml()).describe() == schedule.describe()


def test_read_checks_each_kind_of_flag_naming_the_option() -> None:
    from rtrace.net.faults.flags import FAULT_BY_NAME, read

    assert read(FAULT_BY_NAME["drop-on"], ["response.create,conversation.item.delete"]) == [
        "response.create", "conversation.item.delete",
    ]  # fmt: skip
    for name, value, message in (
        ("drop-after", ["response.create"], "--drop-after response.create: response.create is a client event"),
        ("fail-response", [0], "--fail-response 0: counts from 1"),
        ("close-after", 0, "--close-after 0: give at least 1"),
        ("expire-after", "10", "--expire-after 10: a duration needs a unit"),
    ):
        with pytest.raises(ValueError, match=message):
            read(FAULT_BY_NAME[name], value)


def test_the_servers_own_fault_flags_act_on_the_nth_response_or_transcription_once() -> None:
    d = make(schedule=Schedule.of(Faults(cancel_response={1}, rate_limit_response={2}, slow_audio={3})))
    first = d.send({"type": "response.create"})
    assert first[-1]["response"]["status"] == "cancelled" and first[-1]["response"]["output"] == []
    second = d.send({"type": "response.create"})
    assert types(second) == ["response.created", "rate_limits.updated", "response.done"]
    assert second[-1]["response"]["status_details"]["error"]["code"] == "rate_limit_exceeded"
    d.send(user("hi", "U"))
    d.send({"type": "response.create"})  # a text session: no audio to pace, the default answer
    assert [m["fault"] for m in d.meta] == ["cancel-response", "rate-limit-response", "slow-audio"]
    assert [m["spec"] for m in d.meta] == ["1", "2", "3"]
    assert done_of_last(d)["status"] == "completed"
    again = EndpointConnection(2, EndpointOptions(rate_limits_after_done=False), d.conn.script.schedule,
                               SharedCounters())  # fmt: skip
    assert again.script.on_transcription() is None  # no transcription fault given
    flags = Schedule.of(Faults(fail_transcription={2}, barge_in={1}, burst_audio={1}))
    assert [(t.moment, t.transcription, t.response) for t in flags.turns] == [
        ("transcription", 2, None), ("response", None, 1), ("response", None, 1),
    ]  # fmt: skip
    script = ConnectionScript(flags, 1, {})
    assert [script.on_transcription() is not None for _ in range(3)] == [False, True, False]


def done_of_last(d: Driver) -> dict:  # type: ignore[type-arg]
    return next(e for _, e in reversed(d.sent) if e["type"] == "response.done")["response"]


ALL_FLAGS = {"close_after": 40, "drop_on": ["response.create", "conversation.item.create:function_call_output"],
             "drop_after": ["response.done:function_call"], "fail_response": {2}, "cancel_response": {1, 3},
             "rate_limit_response": {4}, "fail_transcription": {2}, "barge_in": {5}, "slow_audio": {6},
             "burst_audio": {7}, "error_on": ["session.update"], "expire_after": 12.5}  # fmt: skip


def test_the_flags_their_help_their_script_and_their_words_are_pinned() -> None:
    """Pinned before the vocabulary became one declaration (issue 38): the options, their help, the script every
    flag writes in the trace header and the words serve starts with stay as they were."""
    import hashlib
    import json

    from rtrace.net.fake.options import ENDPOINT_OPTIONS

    def digest(value: object) -> str:
        return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]

    before = [o for o in ENDPOINT_OPTIONS if o.field != "stall_audio"]  # the flag issue 38 added, after the pin
    assert digest([(o.field, o.kind, o.help, o.option, o.sweep) for o in before]) == "7aa8826d7b7b1102"
    for code in (None, 1011):
        schedule = Schedule.of(Faults(**ALL_FLAGS, close_code=code))  # type: ignore[arg-type]
        # re-pinned after 80e2625 (the one writer leaves out `times = 1`, a fault's default): the scripts of the pin
        # (3e579de) less those lines, the words as they were
        pinned = "f2bac1eb68ee2705" if code is None else "be651fbabfd4adda"
        assert digest([schedule.to_toml(), schedule.describe()]) == pinned
        assert parse_script(schedule.to_toml()).to_toml() == schedule.to_toml()
