"""Every fault action declared once (rtrace/net/faults/actions.py): each has a search kind, a canonical value, words,
draws and a script key that reads back, and every consumer (the search, the script, the flags, the link, the endpoint)
knows it. A consumer that forgets an action fails here."""

from __future__ import annotations

import random

import pytest

from rtrace.net.faults.actions import ACTIONS, FLAGS, KEYS, LINK_KINDS, Action, error_code
from rtrace.net.faults.flags import FAULTS
from rtrace.net.faults.schedule import KIND_COST, MOMENTS, Fault, Schedule
from rtrace.net.faults.script import _ACTIONS, parse_script
from rtrace.net.faults.values import check_fault
from rtrace.net.hunt.search import random_fault, single_faults

from .test_net_hunt_search import RICH

FORMS = {a.kind: a.form for a in ACTIONS}


@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.kind)
def test_every_action_has_a_search_kind_a_canonical_value_and_words(action: Action) -> None:
    assert action.kind in KIND_COST and set(action.moments) <= set(MOMENTS)
    assert action.canonical is not None, f"{action.kind} has no canonical value"
    for moment in action.moments:
        target = {"event": "response.create", "sent": "response.done", "all": "*"}.get(moment, "")
        fault = Fault(action.kind, moment, target, action.canonical, 2)  # type: ignore[arg-type]
        check_fault(fault, FORMS, MOMENTS)  # the canonical value is one a schedule may hold
        words = fault.describe()
        assert words and words != "no fault", f"{action.kind} has no words"
        others = [Fault(b.kind, moment, target, b.canonical, 2) for b in ACTIONS  # type: ignore[arg-type]
                  if b is not action and moment in b.moments]  # fmt: skip
        assert words not in {o.describe() for o in others}, f"{action.kind} is said as another kind is"


@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.kind)
def test_the_search_draws_every_action_and_its_systematic_phase_has_its_points(action: Action) -> None:
    assert action.kind in {f.kind for f in single_faults(RICH)}, f"the systematic phase never tries {action.kind}"
    drawn = [random_fault(RICH, random.Random(n)) for n in range(600)]
    mine = [f for f in drawn if f.kind == action.kind]
    assert mine, f"the random phase never draws {action.kind}"
    for f in mine[:20]:
        check_fault(f, FORMS, MOMENTS)
        assert f.moment in action.moments


@pytest.mark.parametrize("action", [a for a in ACTIONS if a.key is not None], ids=lambda a: a.kind)
def test_every_scripted_action_is_a_script_key_that_reads_back_and_is_noted_as_a_fault(action: Action) -> None:
    assert action.key in KEYS
    for moment in action.moments:
        target = {"event": "response.create", "sent": "response.done"}.get(moment, "")
        fault = Fault(action.kind, moment, target, action.canonical, 3)  # type: ignore[arg-type]
        schedule = Schedule((fault,))
        (turn,) = parse_script(schedule.script_toml()).turns
        assert getattr(turn, action.key) == action.canonical and turn.times == 1
        assert action.key in _ACTIONS[turn.moment]


def test_the_flags_and_the_link_derive_from_the_declaration() -> None:
    assert FAULTS == tuple(flag for flag, _ in FLAGS)
    assert len({f.name for f in FAULTS}) == len(FAULTS)
    assert LINK_KINDS == {"latency", "jitter", "drop", "close", "error", "delay", "expire"}
    for flag, action in FLAGS:
        assert action.key is not None, f"--{flag.name} compiles to turns: its action needs a script key"


def test_error_answers_use_the_codes_the_real_api_sends() -> None:
    assert error_code("conversation.item.create:function_call_output") == "invalid_tool_call_id"
    assert error_code("conversation.item.delete") == "item_delete_invalid_item_id"
    assert error_code("response.create") == "conversation_already_has_active_response"
    assert error_code("input_audio_buffer.append") == "server_error"
