"""Rules about the server's own event stream."""

from __future__ import annotations

import pytest

from rtrace.engine.fold import analyze_path

from .conftest import SAMPLES


@pytest.mark.parametrize(
    ("sample", "slug", "text"),
    [
        ("response-done-without-created/positive-unknown-response", "response-done-without-created", "never created"),
        ("unknown-previous-item/positive-lost-predecessor", "unknown-previous-item", "item_never_seen"),
        ("duplicate-item-id/positive-create-retried", "duplicate-item-id", "already added at line 4"),
        ("session-expired/positive-mid-response", "session-expired", "response resp_1 was still generating"),
        ("reconnect-loop-on-fatal-error/positive-quota-loop", "reconnect-loop-on-fatal-error", "insufficient_quota"),
        ("duplicate-response-done/positive-done-twice", "duplicate-response-done", "ended at line 5 and again"),
    ],
)
def test_positive(sample: str, slug: str, text: str) -> None:
    found = [f for f in analyze_path(SAMPLES / "rules" / f"{sample}.jsonl").findings if f.slug == slug]
    assert len(found) == 1
    assert text in found[0].explanation
