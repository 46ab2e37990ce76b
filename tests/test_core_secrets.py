"""Secret scrubbing (`rtrace.core.secrets`): credentials by field name and by pattern, audio stripped to counts,
paths and URLs without their secret parameters; ids, types and the input itself untouched."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rtrace.core import secrets
from rtrace.core.secrets import redact_event, safe_path, scrub_secrets, scrub_text

KEY = "sk-proj-TESTKEY0123456789abcdefSECRET"
EPHEMERAL = "ek_68c1ephemeralSECRET0123456789"


def test_redact_event_audio_and_secrets() -> None:
    pcm = bytes(range(256)) * 10
    payload = base64.b64encode(pcm).decode()
    ev = redact_event({"type": "input_audio_buffer.append", "audio": payload, "event_id": "e1"})
    assert ev["audio"] == "" and ev["rtrace_audio_bytes"] == 2560 and len(ev["rtrace_audio_sha256"]) == 64
    assert ev["event_id"] == "e1"
    delta = redact_event({"type": "response.output_audio.delta", "delta": payload, "item_id": "i"})
    assert delta["delta"] == "" and delta["rtrace_audio_bytes"] == 2560
    kept = redact_event({"type": "response.audio.delta", "delta": payload}, keep_audio=True)
    assert kept["delta"] == payload
    secret = {"type": "session.created", "session": {"client_secret": {"value": EPHEMERAL, "expires_at": 5}}}
    clean = redact_event(secret)
    assert EPHEMERAL not in json.dumps(clean) and clean["session"]["client_secret"]["expires_at"] == 5
    assert EPHEMERAL not in json.dumps(redact_event({"type": "x", "text": f"use {EPHEMERAL}"}))
    original = {"type": "input_audio_buffer.append", "audio": payload}
    redact_event(original)
    assert original["audio"] == payload  # the forwarded frame is never touched


def test_safe_path_drops_the_keys_a_client_puts_in_its_path() -> None:
    assert safe_path(f"/v1/realtime?model=m&api-key={KEY}&token=x&client_secret=y") == "/v1/realtime?model=m"


def test_safe_path_removes_keys() -> None:
    assert safe_path("/v1/realtime?model=m&api_key=sk-1&token=t") == "/v1/realtime?model=m"
    assert safe_path("/v1/realtime") == "/v1/realtime"


def test_ids_and_types_are_not_mistaken_for_keys() -> None:
    event = {"type": "response.done", "event_id": "event_desk-abcdefghijkl", "response": {"id": "resp_week_abcdefghij"}}
    assert scrub_secrets(event) == event
    assert scrub_text("task-1234567890 and desk-1234567890") == "task-1234567890 and desk-1234567890"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(event=st.dictionaries(st.text(max_size=8), _json, max_size=5), where=st.integers(0, 50))
def test_redact_event_never_keeps_a_planted_key(event: dict[str, Any], where: int) -> None:
    """A key planted in any string of any event (or as a credential field) is gone; the input is untouched."""
    planted = dict(event)
    strings = [k for k, v in planted.items() if isinstance(v, str)]
    if strings:
        k = strings[where % len(strings)]
        planted[k] = planted[k] + f" {KEY} "
    planted["client_secret"] = {"value": EPHEMERAL}
    before = json.dumps(planted, sort_keys=True)
    clean = redact_event(planted)
    assert KEY not in json.dumps(clean) and EPHEMERAL not in json.dumps(clean)
    assert json.dumps(planted, sort_keys=True) == before


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_match_of_every_pattern_holds_a_trigger(data: st.DataObject) -> None:
    """What lets `scrub_text` return a text without a trigger untouched: no pattern can match it."""
    pattern, _ = data.draw(st.sampled_from(secrets._PATTERNS))
    text = data.draw(st.from_regex(pattern))
    match = pattern.search(text)
    assert match is not None
    assert any(trigger in match.group(0).casefold() for trigger in secrets.TRIGGERS), (pattern.pattern, text)


@given(st.text(alphabet=st.sampled_from(list("sk-ek_=BbearerAaicKkſ.?&; xyz09")), max_size=60))
def test_the_trigger_check_changes_no_result(text: str) -> None:
    full = text
    for pattern, repl in secrets._PATTERNS:
        full = pattern.sub(repl, full)
    assert scrub_text(text) == full
