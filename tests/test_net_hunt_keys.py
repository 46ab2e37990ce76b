"""What a hunt's finding is about (rtrace/net/hunt/keys.py): bug keys by kinds, never ids; the reaction after the fault;
the faults that acted; findings linked by what they name."""

from __future__ import annotations

import dataclasses
import random

from hypothesis import given
from hypothesis import strategies as st

from rtrace.net.faults.schedule import Fault, Schedule
from rtrace.net.hunt.keys import (
    SURVIVAL,
    BugKey,
    acted,
    bug_key,
    item_calls_of,
    item_kinds,
    item_kinds_of,
    linked,
    reaction,
)

from .test_net_hunt_search import CLEAN, rec

# -- what a finding is about -------------------------------------------------------------------------------------


def test_the_key_names_kinds_not_ids_or_lines() -> None:
    kinds = item_kinds_of(CLEAN)
    assert kinds == {"u1": "user", "c1": "function_call", "o1": "function_call_output"}
    assert item_kinds({"items": ("o1", "zz")}, kinds) == ("function_call_output",)
    assert item_kinds({"call_ids": ("call_1",)}, kinds) == ("function_call",)
    a = bug_key("RT101", {"items": ("o1",)}, kinds, ("latency",), "continued")
    b = bug_key("RT101", {"items": ("o9",)}, {"o9": "function_call_output"}, ("latency",), "continued")
    assert a == b and a.finding == ("RT101", ("function_call_output",))


@given(st.lists(st.sampled_from(["o1", "o2", "u1"]), min_size=1), st.sampled_from(["drop", "close"]),
       st.sampled_from(["conversation.item.create:user", "response.create"]), st.integers(1, 3))  # fmt: skip
def test_dedup_is_by_rule_item_kind_fault_kind_and_reaction_never_by_id_target_or_count(
    ids: list[str], kind: str, target: str, k: int
) -> None:
    kinds = {"o1": "function_call_output", "o2": "function_call_output", "u1": "user"}
    fault = Fault(kind, "event", target, 1006, k)  # type: ignore[arg-type]
    key = bug_key("RT106", {"items": tuple(ids)}, kinds, (fault.signature,), "reconnected")
    other = bug_key("RT106", {"items": tuple(reversed(ids))}, kinds,
                    (dataclasses.replace(fault, target="session.update", k=1).signature,), "reconnected")  # fmt: skip
    assert key == other
    assert key != dataclasses.replace(key, reaction="gave up")
    assert key != dataclasses.replace(key, rule="RT105")


def test_the_reaction_is_what_the_client_did_after_the_fault() -> None:
    fault = rec("meta", {"type": "fault.injected", "fault": "script", "spec": "turn 1"})
    closed = rec("meta", {"type": "connection.closed"})
    again = [rec("meta", {"type": "connection.opened"}, conn=2), rec("client", {"type": "session.update"}, conn=2)]
    assert reaction([*CLEAN, fault, closed, *again]) == ("reconnected", ("connect", "session.update"))
    assert reaction([*CLEAN, fault, closed])[0] == "gave up"
    assert reaction([*CLEAN, fault, rec("client", {"type": "response.create"})]) == ("continued", ("response.create",))
    assert reaction(CLEAN) == ("continued", ())
    # a fault that did not close: the client went on and closed at its own end (continued), or closed at once
    went_on = rec("client", {"type": "response.create"})
    by_client = rec("meta", {"type": "connection.closed", "by": "client", "code": 1000})
    by_server = rec("meta", {"type": "connection.closed", "by": "server", "code": 1011})
    assert reaction([*CLEAN, fault, went_on, by_client])[0] == "continued"
    assert reaction([*CLEAN, fault, by_client])[0] == "gave up"
    assert reaction([*CLEAN, fault, went_on, by_server])[0] == "gave up"


def test_acted_names_the_faults_whose_notes_are_in_the_trace() -> None:
    s = Schedule((Fault("latency", "all", "*", 0.05), Fault("drop", "event", "response.create", 1006),
                  Fault("error", "event", "session.update", "invalid_value")))  # fmt: skip
    turns = s.turn_faults()
    second = turns.index(Fault("error", "event", "session.update", "invalid_value")) + 1
    note = rec("meta", {"type": "fault.injected", "fault": "script", "spec": f"turn {second}"})
    assert acted(s, [*CLEAN, note]) == ("error event", "latency")


def test_a_survival_key_reads_as_the_client_not_surviving() -> None:
    key = BugKey(SURVIVAL, ("exit 1",), ("drop event",), "gave up")
    assert key.text() == "client-did-not-survive on exit 1 under drop event, client gave up"


_ids = st.dictionaries(
    st.sampled_from(["items", "call_ids", "event_ids"]), st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=2),
    max_size=2,
)  # fmt: skip


def _names(ids: dict[str, list[str]], calls: dict[str, str]) -> set[tuple[str, str]]:
    out = {(kind, v) for kind, values in ids.items() for v in values}
    return out | {("call_ids", calls[v]) for v in ids.get("items", ()) if v in calls}


@given(st.lists(_ids, max_size=8), st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["c", "d"])),
       st.randoms(use_true_random=False))  # fmt: skip
def test_linked_groups_findings_that_name_one_item_or_call_and_no_others(
    ids: list[dict[str, list[str]]], calls: dict[str, str], rnd: random.Random
) -> None:
    groups = linked(ids, calls)
    # a partition of the findings, each group in input order, the groups in order of their first member
    assert sorted(i for g in groups for i in g) == list(range(len(ids)))
    assert all(g == sorted(g) for g in groups) and [g[0] for g in groups] == sorted(g[0] for g in groups)
    group_of = {i: n for n, g in enumerate(groups) for i in g}
    for i in range(len(ids)):
        for j in range(len(ids)):
            if _names(ids[i], calls) & _names(ids[j], calls):  # one id in common (an item's call counts): one group
                assert group_of[i] == group_of[j]
    for g in groups:  # and a group is held together by such links only (connected, not merged by chance)
        reached, frontier = {g[0]}, [g[0]]
        while frontier:
            i = frontier.pop()
            for j in g:
                if j not in reached and _names(ids[i], calls) & _names(ids[j], calls):
                    reached.add(j)
                    frontier.append(j)
        assert reached == set(g)
    # what the findings name decides, not the order they came in
    order = list(range(len(ids)))
    rnd.shuffle(order)
    shuffled = linked([ids[i] for i in order], calls)
    assert {frozenset(order[i] for i in g) for g in shuffled} == {frozenset(g) for g in groups}


def test_an_output_and_its_call_are_linked_through_the_call_id() -> None:
    records = [rec("server", {"type": "response.done", "response": {"output": [
                   {"type": "function_call", "id": "fc1", "call_id": "c1"}]}}),
               rec("client", {"type": "conversation.item.create", "item": {
                   "type": "function_call_output", "id": "out1", "call_id": "c1"}})]  # fmt: skip
    calls = item_calls_of(records)
    assert calls == {"fc1": "c1", "out1": "c1"}
    unanswered = {"call_ids": ["c1"], "items": ["fc1"]}
    output_lost = {"items": ["out1"]}
    other = {"items": ["u1"]}
    assert linked([unanswered, output_lost, other], calls) == [[0, 1], [2]]
    assert linked([unanswered, output_lost, other]) == [[0], [1], [2]]
