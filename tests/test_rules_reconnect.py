"""Reconnect rules on the real LiveKit traces and on two reconnects in a row."""

from __future__ import annotations

from rtrace.engine.fold import analyze_path

from .conftest import REAL, SAMPLES


def test_livekit_184_replay_without_the_call() -> None:
    [finding] = [
        f
        for f in analyze_path(REAL / "reconnect-during-tool.livekit-1.8.4.jsonl").findings
        if f.slug == "function-call-lost-on-reconnect"
    ]
    assert finding.rule == "RT105" and finding.conn == 2
    assert finding.lines == (15, 21, 26, 31)
    assert finding.ids["call_ids"] == ("call_s1_0001_0",)


def test_livekit_185_replay_keeps_the_call() -> None:
    assert not analyze_path(REAL / "reconnect-during-tool.livekit-1.8.5.jsonl").findings


def test_second_reconnect_loses_the_call() -> None:
    path = SAMPLES / "rules/function-call-lost-on-reconnect/positive-two-reconnects.jsonl"
    [finding] = [f for f in analyze_path(path).findings if f.slug == "function-call-lost-on-reconnect"]
    assert finding.conn == 3
    assert "Connection 2 ended" in finding.explanation


def test_unconfirmed_delete_undone_by_replay() -> None:
    path = SAMPLES / "rules/unconfirmed-item-lost-on-reconnect/positive-delete-undone.jsonl"
    [finding] = [f for f in analyze_path(path).findings if f.slug == "unconfirmed-item-lost-on-reconnect"]
    assert "re-created the item and never deleted it" in finding.explanation


def test_replay_under_new_item_ids_is_matched_by_call_id() -> None:
    rules = SAMPLES / "rules/function-call-lost-on-reconnect"
    assert not [f for f in analyze_path(rules / "negative-replay-under-new-ids.jsonl").findings if f.severity == "error"]
    [finding] = [
        f
        for f in analyze_path(rules / "positive-output-not-replayed-under-new-ids.jsonl").findings
        if f.slug == "function-call-lost-on-reconnect"
    ]
    assert finding.ids["items"] == ("item_out1",)  # the call came back as item_c2_fc: only the output is lost
    assert "re-created 2 of its items (lines 21-22)" in finding.explanation


def test_overlapping_connections_are_paired() -> None:
    path = SAMPLES / "rules/function-call-lost-on-reconnect/positive-opened-before-close.jsonl"
    [finding] = [f for f in analyze_path(path).findings if f.slug == "function-call-lost-on-reconnect"]
    assert finding.conn == 2 and finding.at_line == 24
    assert "Connection 1 ended at line 21" in finding.explanation
