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


#: Every rule published so far. An id and its slug are public interface (`--select`, `# rtrace: ignore`, baselines,
#: SARIF): never renumbered, renamed or reused. A new rule needs no edit here to pass; add it once it has shipped.
PUBLISHED = {
    "RT101": "deleted-function-call-output",
    "RT102": "stale-snapshot-delete",
    "RT103": "unanswered-function-call",
    "RT104": "output-for-unknown-call",
    "RT105": "function-call-lost-on-reconnect",
    "RT106": "unconfirmed-item-lost-on-reconnect",
    "RT107": "orphaned-generation",
    "RT108": "failed-response-not-retried",
    "RT109": "retry-raced-by-new-response",
    "RT110": "ack-timeout",
    "RT111": "concurrent-response-create",
    "RT112": "server-error",
    "RT113": "arguments-lost-in-replay",
    "RT114": "truncate-beyond-audio",
    "RT115": "local-server-divergence",
    "RT116": "response-done-without-created",
    "RT117": "unknown-previous-item",
    "RT118": "duplicate-item-id",
    "RT119": "session-expired",
    "RT120": "reconnect-loop-on-fatal-error",
    "RT121": "duplicate-response-done",
    "RT122": "changes-lost-at-final-close",
    "RT123": "reconnect-restores-nothing",
    "RT124": "response-create-lost-on-reconnect",
    "RT125": "no-response-after-tool-output",
}


def test_published_rules_keep_their_ids_and_slugs() -> None:
    by_id = {r.id: r.slug for r in RULES}
    assert {rule_id: by_id.get(rule_id) for rule_id in PUBLISHED} == PUBLISHED


def test_rules_are_listed_in_id_order_and_a_new_one_takes_a_new_id() -> None:
    ids = [r.id for r in RULES]
    assert ids == sorted(ids)
    assert all(r.slug not in PUBLISHED.values() for r in RULES if r.id not in PUBLISHED)


def test_select_and_ignore() -> None:
    assert find_rule("rt101") is find_rule("deleted-function-call-output")
    assert [r.id for r in select_rules(["RT102", "server-error"])] == ["RT102", "RT112"]
    assert "RT112" not in [r.id for r in select_rules(ignore=["server-error"])]
    with pytest.raises(UnknownRule):
        select_rules(["nope"])


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("RT1O1", "RT101"), ("rt101x", "RT101"), ("RT1011", "RT101"), ("RT 112", "RT112"), ("RT10", "RT101"),
     ("deleted-function-call-outptu", "deleted-function-call-output"), ("server_error", "server-error"),
     ("stale-snapshot", "stale-snapshot-delete"), ("zzz", None), ("completely-unrelated", None)],
)  # fmt: skip
def test_an_unknown_rule_name_says_which_one_was_meant(typed: str, meant: str | None) -> None:
    with pytest.raises(UnknownRule) as e:
        find_rule(typed)
    assert e.value.suggestion == meant
    hint = f"(did you mean {meant!r}?)" if meant else "(see `rtrace rules`)"
    assert str(e.value) == f"unknown rule {typed!r} {hint}"
