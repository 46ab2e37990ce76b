"""The rule list: stable ids and slugs, documentation, selection."""

from __future__ import annotations

import pytest

from rtrace.rules import RULES, UnknownRule, find_rule, select_rules


def test_ids_and_slugs_unique_and_documented() -> None:
    assert len({r.id for r in RULES}) == len(RULES)
    assert len({r.slug for r in RULES}) == len(RULES)
    for rule in RULES:
        assert rule.id.startswith("RT1") and len(rule.id) == 5
        assert rule.severity in ("error", "warning", "info")
        assert len(rule.doc()) > 100, rule.slug
        assert rule.fix and rule.title and rule.subscriptions


def test_public_slugs_are_stable() -> None:
    assert [r.slug for r in RULES][:15] == [
        "deleted-function-call-output",
        "stale-snapshot-delete",
        "unanswered-function-call",
        "output-for-unknown-call",
        "function-call-lost-on-reconnect",
        "unconfirmed-item-lost-on-reconnect",
        "orphaned-generation",
        "failed-response-not-retried",
        "retry-raced-by-new-response",
        "ack-timeout",
        "concurrent-response-create",
        "server-error",
        "arguments-lost-in-replay",
        "truncate-beyond-audio",
        "local-server-divergence",
    ]


def test_the_rules_of_issue_13_follow() -> None:
    assert [(r.id, r.slug, r.severity) for r in RULES][21:] == [
        ("RT122", "changes-lost-at-final-close", "warning"),
        ("RT123", "reconnect-restores-nothing", "warning"),
        ("RT124", "response-create-lost-on-reconnect", "warning"),
        ("RT125", "no-response-after-tool-output", "warning"),
    ]


def test_select_and_ignore() -> None:
    assert find_rule("rt101") is find_rule("deleted-function-call-output")
    assert [r.id for r in select_rules(["RT102", "server-error"])] == ["RT102", "RT112"]
    assert "RT112" not in [r.id for r in select_rules(ignore=["server-error"])]
    with pytest.raises(UnknownRule):
        select_rules(["nope"])
