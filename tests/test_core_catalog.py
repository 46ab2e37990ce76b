"""The event catalogue: sides, beta -> GA renames (docs/protocol.md 1.2-1.4), which events an error can answer (1.7)."""

from __future__ import annotations

import pytest

from rtrace.core.catalog import (
    ACK_TYPES,
    ANCHOR_TYPES,
    BETA_TO_GA,
    CLIENT_EVENTS,
    ERROR_ANSWERS,
    ERROR_PARAMS,
    FATAL_ERROR_CODES,
    GENERIC_ERROR_CODES,
    LOCAL_EVENTS,
    META_EVENTS,
    SERVER_EVENTS,
    error_answers,
    is_known,
    normalize_type,
    side_of,
)


def test_sets_are_disjoint() -> None:
    sets = [CLIENT_EVENTS, SERVER_EVENTS, META_EVENTS, LOCAL_EVENTS]
    for k, a in enumerate(sets):
        for b in sets[k + 1 :]:
            assert not a & b


def test_client_events_of_the_protocol() -> None:
    # docs/protocol.md 1.2: 11 GA client events + the beta-only transcription_session.update.
    assert len(CLIENT_EVENTS) == 12
    assert {
        "conversation.item.create",
        "conversation.item.delete",
        "response.create",
        "session.update",
    } <= CLIENT_EVENTS


@pytest.mark.parametrize(
    ("etype", "side"),
    [
        ("conversation.item.create", "client"),
        ("input_audio_buffer.append", "client"),
        ("conversation.item.added", "server"),
        ("conversation.item.done", "server"),
        ("error", "server"),
        ("response.function_call_arguments.done", "server"),
        ("connection.opened", "meta"),
        ("local.conversation", "local"),
        ("response.text.delta", None),  # beta names are normalised before lookup
        ("no.such", None),
    ],
)
def test_side_of(etype: str, side: str | None) -> None:
    assert side_of(etype) == side
    assert is_known(etype) == (side is not None)


def test_beta_renames() -> None:
    assert BETA_TO_GA == {
        "conversation.item.created": "conversation.item.added",
        "response.text.delta": "response.output_text.delta",
        "response.text.done": "response.output_text.done",
        "response.audio.delta": "response.output_audio.delta",
        "response.audio.done": "response.output_audio.done",
        "response.audio_transcript.delta": "response.output_audio_transcript.delta",
        "response.audio_transcript.done": "response.output_audio_transcript.done",
    }
    for beta, ga in BETA_TO_GA.items():
        assert normalize_type(beta) == ga and side_of(ga) == "server"
    assert normalize_type("conversation.item.added") == "conversation.item.added"
    assert normalize_type("anything") == "anything"


# -- which client events an error can answer (docs/protocol.md 1.7, 3) ----------------------------------------------


@pytest.mark.parametrize(
    ("code", "param", "answers"),
    [
        ("invalid_tool_call_id", "item.call_id", {"conversation.item.create"}),
        ("item_delete_invalid_item_id", "item_id", {"conversation.item.delete"}),
        ("item_retrieve_invalid_item_id", None, {"conversation.item.retrieve"}),
        ("conversation_already_has_active_response", None, {"response.create"}),
        ("response_cancel_not_active", None, {"response.cancel"}),
        ("input_audio_buffer_commit_empty", None, {"input_audio_buffer.commit"}),
        ("rate_limit_exceeded", None, {"response.create"}),
        # session-level: answers no client event
        ("session_expired", None, set()),
        ("insufficient_quota", None, set()),
        ("invalid_api_key", "session", set()),  # the code decides before the param
        # generic codes: the param names the event
        ("invalid_value", "audio_end_ms", {"conversation.item.truncate"}),
        ("invalid_value", "item.role", {"conversation.item.create"}),
        ("unknown_parameter", "session.foo", {"session.update", "transcription_session.update"}),
        ("missing_required_parameter", "response", {"response.create"}),
        ("invalid_value", "audio", {"input_audio_buffer.append"}),
        (None, "item_id", {"conversation.item.delete", "conversation.item.truncate", "conversation.item.retrieve"}),
    ],
)
def test_error_answers(code: object, param: object, answers: set[str]) -> None:
    assert error_answers(code, param) == answers


@pytest.mark.parametrize(
    ("code", "param"),
    [
        ("server_error", None),  # unknown to the table: may answer anything, as before
        ("no_such_code", "item.call_id"),  # an unknown code keeps today's behaviour even with a param
        ("invalid_value", None),  # a generic code without a param
        ("invalid_value", "type"),  # a param the table cannot place
        (None, None),
        (7, []),  # junk
    ],
)
def test_error_answers_anything(code: object, param: object) -> None:
    assert error_answers(code, param) is None


def test_every_answer_of_the_tables_is_a_client_event() -> None:
    for kinds in [*ERROR_ANSWERS.values(), *ERROR_PARAMS.values()]:
        assert kinds <= CLIENT_EVENTS
    assert FATAL_ERROR_CODES <= ERROR_ANSWERS.keys() and not GENERIC_ERROR_CODES & ERROR_ANSWERS.keys()


def test_ack_and_anchor_types_are_server_events_under_their_ga_names() -> None:
    for types in (ACK_TYPES, ANCHOR_TYPES):
        assert types <= SERVER_EVENTS, sorted(types - SERVER_EVENTS)
        assert not types & set(BETA_TO_GA)
    # a replay waits for every acknowledgement, and for what the server sends of its own accord
    assert ACK_TYPES < ANCHOR_TYPES
    assert "session.created" in ANCHOR_TYPES - ACK_TYPES and "error" in ANCHOR_TYPES - ACK_TYPES
