"""Rules about a call's identity across pushes and reconnects, on the real LiveKit traces and their samples."""

from __future__ import annotations

from rtrace.engine.fold import analyze_path
from rtrace.rules.base import Finding

from .conftest import REAL, SAMPLES


def by_slug(path: object, slug: str) -> list[Finding]:
    return [f for f in analyze_path(path).findings if f.slug == slug]  # type: ignore[arg-type]


def test_output_for_unknown_call_links_the_reconnect() -> None:
    [finding] = by_slug(REAL / "reconnect-during-tool.livekit-1.8.4.jsonl", "output-for-unknown-call")
    assert finding.lines == (15, 21, 31, 32)
    assert "The call lived on connection 1" in finding.explanation
    assert "connection 2 never re-created it" in finding.explanation


def test_output_for_unknown_call_error_event_id_null_joined_by_quoted_id() -> None:
    path = SAMPLES / "rules/output-for-unknown-call/positive-error-event-id-null.jsonl"
    [finding] = by_slug(path, "output-for-unknown-call")
    assert finding.lines == (6, 7)
    [error] = by_slug(path, "server-error")
    assert "joined by an id quoted in the message" in error.explanation


def test_output_for_unknown_call_names_the_delete() -> None:
    [finding] = by_slug(
        SAMPLES / "rules/output-for-unknown-call/positive-call-deleted.jsonl", "output-for-unknown-call"
    )
    assert "was deleted at line 16" in finding.explanation


def test_arguments_lost_in_replay() -> None:
    path = SAMPLES / "rules/arguments-lost-in-replay/positive-empty-arguments.jsonl"
    [finding] = by_slug(path, "arguments-lost-in-replay")
    assert finding.conn == 2
    assert '{"city": "Paris"}' in finding.explanation
