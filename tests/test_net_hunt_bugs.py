"""rtrace.net.hunt.bugs: injected answers, the findings that only restate them, the point a fault acted at, causes and
the order of a hunt's entries."""

from __future__ import annotations

from typing import Any

from rtrace.net.hunt.bugs import (
    GAVE_UP_FIX,
    Cause,
    cause_of,
    client_counts,
    completed,
    echoed_with,
    entry_rank,
    first_note,
    injected,
    lost,
    point_of,
    reaction_of,
    sentence,
)
from rtrace.rules.base import Finding, Witness


def rec(line: int, side: str, event: dict[str, Any], conn: int = 1) -> dict[str, Any]:
    return {"line": line, "t": line / 100, "dir": side, "conn": conn, "event": event}


def note(line: int, action: str, conn: int = 1, client: str | None = "conversation.item.create") -> dict[str, Any]:
    event: dict[str, Any] = {"type": "fault.injected", "fault": "script", "spec": "turn 1", "action": action}
    if client is not None:
        event["client_event_type"] = client
    return rec(line, "meta", event, conn)


OUTPUT = {"type": "conversation.item.create",
          "item": {"type": "function_call_output", "id": "out1", "call_id": "call1", "output": "x"}}  # fmt: skip
DONE_CALL = {"type": "response.done", "response": {"id": "r1", "output": [{"type": "function_call", "id": "fc1",
                                                                          "call_id": "call1"}]}}  # fmt: skip


def finding(rule: str, at: int, lines: list[int], **ids: list[str]) -> Finding:
    witness = tuple(Witness(n, 0.0, "server", 1, "x", "x") for n in lines)
    return Finding(rule, rule.lower(), "error", 1, "m", "e", witness, {k: tuple(v) for k, v in ids.items()}, "f", at)


def tool_session() -> list[dict[str, Any]]:
    return [
        rec(2, "meta", {"type": "connection.opened"}),
        rec(3, "server", {"type": "session.created"}),
        rec(4, "client", {"type": "response.create"}),
        rec(5, "server", {"type": "response.created"}),
        rec(6, "server", DONE_CALL),
        rec(7, "client", OUTPUT),
        note(8, "error"),
        rec(9, "server", {"type": "error", "error": {"code": "invalid_tool_call_id"}}),
        rec(10, "client", {"type": "response.create"}),
        rec(11, "server", {"type": "response.created"}),
    ]


def test_the_injected_answer_is_the_server_event_after_the_note_and_names_what_it_answered() -> None:
    got = injected(tool_session())
    assert got.lines == {9}
    assert got.about == {("items", "out1"), ("call_ids", "call1")}
    # a close, a delay, paced audio answer nothing: no line of theirs is an injected answer
    quiet = [*tool_session()[:6], note(7, "close", client=None), rec(8, "meta", {"type": "connection.closed"})]
    assert injected(quiet).lines == set()


def test_a_finding_made_certain_by_an_injected_answer_is_the_fault_speaking_not_the_client() -> None:
    faults = injected(tool_session())
    rt104 = finding("RT104", 9, [7, 9], items=["out1"], call_ids=["call1"])  # the injected error as the verdict
    rt103 = finding("RT103", 10, [6, 7, 9, 10], call_ids=["call1"])  # the call that rejection left unanswered
    other = finding("RT111", 10, [4, 10], event_ids=["e1"])  # what the client did after it: judged
    elsewhere = finding("RT101", 12, [9, 12], items=["other"])  # cites the answer, about something else
    assert echoed_with([rt104, rt103, other, elsewhere], faults) == [True, True, False, False]


def test_the_point_of_the_surface_where_a_fault_acted() -> None:
    records = tool_session()
    assert point_of(records, first_note(records)) == "tool call"
    handshake = [records[0], records[1], note(4, "close", client=None)]
    assert point_of(handshake, first_note(handshake)) == "handshake"
    in_flight = [*records[:4], note(6, "close", client=None)]
    assert point_of(in_flight, first_note(in_flight)) == "in-flight response"
    turn_done = [*records[:3], rec(5, "server", {"type": "response.created"}),
                 rec(6, "server", {"type": "response.done", "response": {"output": []}}), note(7, "close", client=None)]
    assert point_of(turn_done, first_note(turn_done)) == "after the turn"
    user = [*records[:2], rec(4, "client", {"type": "conversation.item.create", "item": {"type": "message"}}),
            note(5, "error")]  # fmt: skip
    assert point_of(user, first_note(user)) == "user turn"
    assert point_of(records[:3], first_note(records[:3])) == ""  # no note: latency acts everywhere
    # only the notes of the schedule's own turns count
    assert first_note([note(1, "error")], turns=0) is None


def test_a_client_that_gives_up_on_any_connection_fault_is_one_cause_and_distinct_causes_stay_apart() -> None:
    points = [("handshake", "close sent"), ("user turn", "drop event"), ("after the turn", "expire session"),
              ("tool call", "close response")]  # fmt: skip
    gave_up = {cause_of("client-did-not-survive", ("exit 1",), p, "gave up", (f,)) for p, f in points}
    assert gave_up == {Cause("gave up", (), "connection", "gave up")}
    assert cause_of("RT122", (), "user turn", "gave up", ("drop event",)).family == "gave up"
    # a turn left hung after a close in flight is not the client that gave up at the handshake
    hung = cause_of("RT126", ("assistant",), "in-flight response", "hung", ("close sent",))
    assert hung not in gave_up and hung.point == "in-flight response"
    # giving up after an error answer (no connection fault) is its own cause
    assert cause_of("client-did-not-survive", ("exit 1",), "user turn", "gave up", ("error event",)).family != "gave up"
    said = sentence(Cause("gave up", (), "connection", "gave up"), "x")
    # no reconnect is what the wire shows; whether the app was told it cannot (openai-agents raises the close)
    assert said.startswith("The client gave up") and "never reconnected" in said and "app" not in said
    assert "Reconnect, or surface the close to the app" in GAVE_UP_FIX


def test_an_output_left_out_of_a_replay_is_one_defect_whichever_rule_saw_it() -> None:
    seen = {cause_of(rule, items, "tool call", "reconnected and lost data", ("close sent",))
            for rule, items in [("RT105", ("function_call",)), ("RT106", ("function_call_output",)),
                                ("RT103", ("function_call",))]}  # fmt: skip
    assert len(seen) == 1
    # but not across points of the surface, nor with a call left unanswered without any reconnect
    assert cause_of("RT105", ("function_call",), "in-flight response", "reconnected and lost data") not in seen
    assert cause_of("RT103", ("function_call",), "tool call", "continued").family == "RT103"


def test_the_reaction_names_what_the_client_lost_or_that_it_hung() -> None:
    assert reaction_of("reconnected", ["RT105", "RT104"], True, False) == "reconnected and lost data"
    assert lost(["RT105", "RT104", "RT111"]) == "a function call and a tool output"
    assert reaction_of("reconnected", ["RT111"], True, False) == "reconnected and restored"
    assert reaction_of("reconnected", [], False, True) == "hung"
    # items lost on reconnect are the cause, a turn that then hung what followed; a turn lost alone is the hang
    assert reaction_of("reconnected", ["RT105"], False, True) == "reconnected and lost data"
    assert reaction_of("reconnected", ["RT126"], False, True) == "hung"
    assert reaction_of("gave up", ["RT122"], False, False) == "gave up"
    assert reaction_of("continued", [], True, False) == "continued"


def test_a_client_that_did_all_its_clean_run_did_completed_its_session() -> None:
    clean = client_counts(tool_session())
    assert clean == {"response.create": 2, "conversation.item.create": 1}
    assert completed(tool_session(), clean)
    assert not completed(tool_session()[:8], clean)  # the second response.create never came


def test_data_loss_comes_first_and_a_cap_never_hides_it_behind_a_survival_entry() -> None:
    survival = entry_rank(["client-did-not-survive"], "error")
    lost = entry_rank(["RT103"], "warning")  # a warning that loses a call beats an error that loses nothing
    assert lost < survival < entry_rank(["RT112"], "info")
    assert entry_rank(["RT111"], "warning") > survival


def test_every_fault_action_a_users_script_takes_is_an_injected_kind() -> None:
    from rtrace.net.faults.actions import ACTIONS, SCRIPT_MOMENT
    from rtrace.net.faults.schedule import Schedule
    from rtrace.net.faults.script import Schedule as ScriptSchedule
    from rtrace.net.faults.script import Turn
    from rtrace.net.hunt.bugs import echoes, injected_kinds

    for action in ACTIONS:  # from the declaration: an action added later is covered with no edit here
        if action.key is None:
            continue
        for moment in action.moments:
            turn = Turn(1, 2, SCRIPT_MOMENT[moment], acts=((action.key, action.canonical),))  # type: ignore[arg-type]
            assert action.kind in injected_kinds(Schedule(), ScriptSchedule((turn,))), (action.kind, moment)
    # a cancel of the user's script: the client's `response.cancel` answered `response_cancel_not_active` restates it
    cancel = Turn(1, 2, "response", response=1, acts=(("cancel", "turn_detected"),))
    kinds = injected_kinds(Schedule(), ScriptSchedule((cancel,)))
    assert kinds == {"cancel"} and echoes(finding("RT112", 3, [3]), kinds)
    fail = Turn(1, 2, "transcription", transcription=1, acts=(("fail", "server_error"),))
    assert injected_kinds(Schedule(), ScriptSchedule((fail,))) == {"transcription"}
