"""Reconnect rules on the real LiveKit traces, on two reconnects in a row, overlapping connections, replays under new
ids, and the losses at a close or on a reconnect (RT122-RT124)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtrace.engine.fold import analyze_path
from rtrace.rules.base import Finding

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
    complete = analyze_path(rules / "negative-replay-under-new-ids.jsonl")
    assert not [f for f in complete.findings if f.severity == "error"]
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


def findings_of(name: str, slug: str) -> list[Finding]:
    return [f for f in analyze_path(SAMPLES / "rules" / name).findings if f.slug == slug]


def test_changes_lost_at_a_final_close_name_what_the_user_lost() -> None:
    name = "changes-lost-at-final-close/positive-never-reconnected.jsonl"
    [finding] = findings_of(name, "changes-lost-at-final-close")
    assert (finding.rule, finding.severity, finding.lines) == ("RT122", "warning", (15, 16, 17))
    assert "a tool output (item_out1 for call_1, line 15), a user message (item_u2, line 16)" in finding.explanation
    assert finding.ids["call_ids"] == ("call_1",)
    for near_miss in ("negative-reconnected-and-resent.jsonl", "negative-trace-ends.jsonl"):
        assert not findings_of(f"changes-lost-at-final-close/{near_miss}", "changes-lost-at-final-close")


def test_a_reconnect_that_restores_nothing() -> None:
    [finding] = findings_of("reconnect-restores-nothing/positive-new-socket-only.jsonl", "reconnect-restores-nothing")
    assert (finding.rule, finding.severity, finding.conn, finding.lines) == ("RT123", "warning", 2, (16, 17, 22))
    assert "held 2 items (user message, assistant message)" in finding.explanation
    assert not findings_of("reconnect-restores-nothing/negative-session-and-replay.jsonl", "reconnect-restores-nothing")
    # a recorder that cannot see the replay says so, and the rule does not judge what it cannot see
    assert not findings_of("reconnect-restores-nothing/negative-replay-not-visible.jsonl", "reconnect-restores-nothing")


def test_a_replay_under_new_ids_restores(tmp_path: Path) -> None:
    """A message re-created under a new id with the same role and text is a replay."""
    src = (SAMPLES / "rules/reconnect-restores-nothing/positive-new-socket-only.jsonl").read_bytes()
    lines = src.splitlines(keepends=True)
    replay = b'{"t":2.91,"dir":"client","conn":2,"event":{"type":"conversation.item.create","item":{"id":"item_new",'
    replay += b'"type":"message","role":"user","content":[{"type":"input_text","text":"My name is Ada."}]}}}\n'
    path = tmp_path / "replayed.jsonl"
    path.write_bytes(b"".join([*lines[:18], replay, *lines[18:]]))
    assert not [f for f in analyze_path(path).findings if f.slug == "reconnect-restores-nothing"]


def test_response_create_lost_on_reconnect() -> None:
    name = "response-create-lost-on-reconnect/positive-pending-reply-discarded.jsonl"
    [finding] = findings_of(name, "response-create-lost-on-reconnect")
    assert (finding.rule, finding.severity, finding.conn, finding.lines) == ("RT124", "warning", 1, (8, 10))
    assert "connection 2 replaced it, and no connection after it asked for a response again" in finding.explanation
    name = "response-create-lost-on-reconnect/negative-asked-again-on-next-connection.jsonl"
    assert not findings_of(name, "response-create-lost-on-reconnect")


def test_a_response_create_unanswered_at_a_final_close_is_lost_with_the_session(tmp_path: Path) -> None:
    """No reconnect: that is changes-lost-at-final-close, not response-create-lost-on-reconnect."""
    src = (SAMPLES / "rules/response-create-lost-on-reconnect/positive-pending-reply-discarded.jsonl").read_bytes()
    path = tmp_path / "no-reconnect.jsonl"
    path.write_bytes(b"".join(src.splitlines(keepends=True)[:10]))
    slugs = {f.slug for f in analyze_path(path).findings}
    assert "changes-lost-at-final-close" in slugs and "response-create-lost-on-reconnect" not in slugs


@pytest.mark.source
def test_changes_lost_on_many_reconnects_are_tracked_in_linear_time() -> None:
    """RT106 kept every change lost at a close forever and walked the list at every create (RT124 rebuilt its list
    at every response.create, RT122 looked at every connection per close): from 60 reconnects that each lose a
    create, re-sent by the next, to 240, the lines executed grew 10.8 times (counted, not timed); now 4."""
    from typing import Any

    from rtrace.engine.fold import analyze_records
    from rtrace.rules.base import Config
    from rtrace.rules.reconnect import (
        ChangesLostAtFinalClose,
        ResponseCreateLostOnReconnect,
        UnconfirmedItemLostOnReconnect,
    )

    from .counting import LINEAR, growth, reconnects

    rules = (UnconfirmedItemLostOnReconnect, ChangesLostAtFinalClose, ResponseCreateLostOnReconnect)

    def fold(records: list[Any]) -> None:
        analyze_records(records, Config(), rules)

    assert growth(lambda n: reconnects(n, unacked=True), fold, 60) < LINEAR


def _replay_unseen(src: Path, dst: Path) -> Path:
    """`src` as a recorder that cannot see a reconnect's replay writes it: every connection after the first opens
    with `"replay_visible": false` (a `connection.opened` note added before its first line when it had none)."""
    import orjson

    out, opened = [], set()
    for raw in src.read_bytes().splitlines():
        obj = orjson.loads(raw) if raw.strip() else None
        conn = obj.get("conn") if isinstance(obj, dict) else None
        if isinstance(conn, int) and conn >= 2:
            event = obj["event"]
            if event.get("type") == "connection.opened":
                event["replay_visible"] = False
                opened.add(conn)
            elif conn not in opened:
                opened.add(conn)
                note = {"type": "connection.opened", "replay_visible": False}
                out.append(orjson.dumps({"t": obj.get("t", 0.0), "dir": "meta", "conn": conn, "event": note}))
            raw = orjson.dumps(obj)
        out.append(raw)
    dst.write_bytes(b"\n".join(out) + b"\n")
    return dst


@pytest.mark.parametrize(
    "rule",
    ["function-call-lost-on-reconnect", "unconfirmed-item-lost-on-reconnect", "reconnect-restores-nothing",
     "response-create-lost-on-reconnect"],
)  # fmt: skip
def test_rules_that_judge_a_replay_say_nothing_when_it_was_not_seen(rule: str, tmp_path: Path) -> None:
    positives = sorted((SAMPLES / "rules" / rule).glob("positive-*.jsonl"))
    assert positives
    for k, path in enumerate(positives):
        seen = analyze_path(path)
        [rule_id] = {f.rule for f in seen.findings if f.slug == rule}
        unseen = analyze_path(_replay_unseen(path, tmp_path / f"{k}.jsonl"))
        assert not [f for f in unseen.findings if f.slug == rule], path.name
        [note] = [n for n in unseen.not_judged if n.what == "reconnect-replay"]
        assert rule_id in note.rules and "replay_visible: false" in note.why
        assert seen.not_judged == []
