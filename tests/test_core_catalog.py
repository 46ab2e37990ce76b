"""The event catalogue: sides, beta -> GA renames (protocol.md 1.2-1.4)."""

from __future__ import annotations

import pytest

from rtrace.core.catalog import (
    BETA_TO_GA,
    CLIENT_EVENTS,
    LOCAL_EVENTS,
    META_EVENTS,
    SERVER_EVENTS,
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
    # protocol.md 1.2: 11 GA client events + the beta-only transcription_session.update.
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
