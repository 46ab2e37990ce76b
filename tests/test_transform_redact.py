"""rtrace redact: secrets never survive, ids/types/times/lines do, and the findings of every sample are unchanged."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtrace.engine.fold import analyze_path
from rtrace.transform.redact import DROPPED_NOTE, RedactOptions, redact_file, redact_stream

from .conftest import SAMPLES
from .strategies import BOUNDED

KEY = "sk-proj-TESTKEY0123456789abcdefXYZ"
EK = "ek_68af3c0d2e1f4a5b9c8d7e6f5a4b3c2d"
ALL = RedactOptions(user_text=True, audio=True, tool_output=True)
SAMPLE_FILES = sorted(SAMPLES.rglob("*.jsonl"))


def _redact_bytes(data: bytes, options: RedactOptions | None = None) -> tuple[bytes, list[tuple[int, str]]]:
    out = io.BytesIO()
    drops: list[tuple[int, str]] = []
    redact_stream(io.BytesIO(data), out, options, lambda line, why: drops.append((line, why)))
    return out.getvalue(), drops


def _signature(path: Path) -> tuple[Any, ...]:
    report = analyze_path(path)
    findings = tuple(
        (f.rule, f.severity, f.conn, f.at_line, f.lines, tuple(sorted(f.ids.items()))) for f in report.findings
    )
    return report.events, report.connections, report.by_dir, findings


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_same_findings_after_full_redaction(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    stats = redact_file(path, out, ALL)
    assert stats.dropped == 0
    assert len(out.read_bytes().splitlines()) == len(path.read_bytes().splitlines())
    assert _signature(out) == _signature(path)


def test_samples_exist() -> None:
    assert len(SAMPLE_FILES) >= 20


def _secret_trace() -> bytes:
    lines = [
        {"rtrace": 1, "recorder": "test", "api_key": KEY, "headers": {"Authorization": f"Bearer {KEY}"}},
        {
            "t": 0.0,
            "dir": "meta",
            "conn": 1,
            "event": {
                "type": "connection.opened",
                "path": f"/v1/realtime?model=gpt-realtime&api-key={KEY}&x=1",
                "headers": [["Authorization", f"Bearer {KEY}"], ["api-key", KEY], ["OpenAI-Beta", "realtime=v1"]],
                "subprotocols": ["realtime", f"openai-insecure-api-key.{KEY}", "openai-beta.realtime-v1"],
            },
        },
        {
            "t": 0.01,
            "dir": "server",
            "conn": 1,
            "event": {
                "type": "session.created",
                "event_id": "event_1",
                "session": {"id": "sess_1", "client_secret": {"value": EK, "expires_at": 1700000000}},
            },
        },
        {
            "t": 0.02,
            "dir": "client",
            "conn": 1,
            "event": {
                "type": "conversation.item.create",
                "event_id": "evt_1",
                "item": {
                    "id": "item_1",
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": f"my key is {KEY} and {EK}, url https://x/?token={EK}"}],
                },
            },
        },
        {"t": 0.03, "dir": "server", "conn": 1, "event": {"type": "error", "error": {"message": f"bad key {KEY}"}}},
    ]
    return b"".join(orjson.dumps(x) + b"\n" for x in lines)


def test_secrets_removed_everywhere_ids_kept() -> None:
    out, drops = _redact_bytes(_secret_trace())
    assert not drops
    text = out.decode()
    assert KEY not in text and EK not in text
    assert "TESTKEY" not in text and "68af3c0d" not in text
    rows = [orjson.loads(x) for x in out.splitlines()]
    assert rows[1]["event"]["path"].startswith("/v1/realtime?model=gpt-realtime&api-key=[redacted]&x=1")
    assert rows[1]["event"]["subprotocols"] == [
        "realtime",
        "openai-insecure-api-key.[redacted]",
        "openai-beta.realtime-v1",
    ]
    assert rows[1]["event"]["headers"][2] == ["OpenAI-Beta", "realtime=v1"]
    assert rows[2]["event"]["session"]["client_secret"] == {"value": "[redacted]", "expires_at": 1700000000}
    assert rows[3]["event"]["item"]["id"] == "item_1" and rows[3]["event"]["event_id"] == "evt_1"
    assert [r.get("t") for r in rows] == [None, 0.0, 0.01, 0.02, 0.03]


def test_bad_lines_become_placeholders(tmp_path: Path) -> None:
    good = b'{"t":1.5,"dir":"server","conn":2,"event":{"type":"session.created","event_id":"e"}}'
    data = b"\n".join(
        [
            good,
            b'{"t":2,"dir":"client","conn":2,"event":{"type":"x","k":"' + KEY.encode() + b'"',  # malformed
            b'{"k":"\xff' + KEY.encode() + b'"',  # invalid UTF-8, not JSON
            b"[" * 5000 + b"]" * 5000,  # too deep for orjson
            b"",
            b'{"oops": "' + KEY.encode(),  # truncated last line
        ]
    )
    out, drops = _redact_bytes(data)
    assert KEY.encode() not in out
    lines = out.split(b"\n")
    assert len(lines) == 7 and lines[-1] == b""
    assert [n for n, _ in drops] == [2, 3, 4, 6]
    note = orjson.loads(lines[1])
    assert note == {"t": 1.5, "dir": "meta", "conn": 2, "event": {"type": "note", "text": DROPPED_NOTE}}
    assert lines[4] == b""


def test_oversized_line_is_dropped_not_held() -> None:
    big = b'{"t":0.0,"dir":"client","conn":1,"event":{"type":"x","a":"' + b"A" * 3000 + KEY.encode() + b'"}}'
    out, drops = _redact_bytes(big + b"\n" + big + b"\n", RedactOptions(max_line_bytes=1000))
    assert [n for n, _ in drops] == [1, 2] and "over the 1,000-byte limit" in drops[0][1]
    assert KEY.encode() not in out and len(out.splitlines()) == 2


def test_audio_becomes_counts_the_reducer_reads() -> None:
    pcm = bytes(range(256)) * 10
    b64 = base64.b64encode(pcm).decode()
    lines = [
        {"t": 0.0, "dir": "client", "conn": 1, "event": {"type": "input_audio_buffer.append", "audio": b64}},
        {
            "t": 0.1,
            "dir": "server",
            "conn": 1,
            "event": {"type": "response.output_audio.delta", "item_id": "i", "delta": b64},
        },
        {
            "t": 0.2,
            "dir": "client",
            "conn": 1,
            "event": {
                "type": "conversation.item.create",
                "item": {"id": "u", "type": "message", "content": [{"type": "input_audio", "audio": b64}]},
            },
        },
    ]
    out, _ = _redact_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines), RedactOptions(audio=True))
    rows = [orjson.loads(x)["event"] for x in out.splitlines()]
    digest = hashlib.sha256(pcm).hexdigest()
    assert (
        rows[0]["audio"] == ""
        and rows[0]["rtrace_audio_bytes"] == len(pcm)
        and rows[0]["rtrace_audio_sha256"] == digest
    )
    assert rows[1]["delta"] == "" and rows[1]["rtrace_audio_bytes"] == len(pcm)
    part = rows[2]["item"]["content"][0]
    assert part["rtrace_audio_bytes"] == len(pcm) and part["audio"] == ""
    # Without the flag audio stays.
    kept, _ = _redact_bytes(orjson.dumps(lines[0]), RedactOptions())
    assert b64.encode() in kept


def test_text_and_tool_flags() -> None:
    lines = [
        {
            "t": 0.0,
            "dir": "client",
            "conn": 1,
            "event": {"type": "session.update", "session": {"type": "realtime", "instructions": "Be Bob the helper"}},
        },
        {
            "t": 0.1,
            "dir": "client",
            "conn": 1,
            "event": {
                "type": "conversation.item.create",
                "item": {"id": "o", "type": "function_call_output", "call_id": "c", "output": '{"ssn":"123-45"}'},
            },
        },
        {
            "t": 0.2,
            "dir": "server",
            "conn": 1,
            "event": {"type": "response.output_audio_transcript.done", "transcript": "Hi Bob"},
        },
        {
            "t": 0.3,
            "dir": "server",
            "conn": 1,
            "event": {"type": "response.function_call_arguments.done", "arguments": '{"city":"Oslo"}'},
        },
    ]
    data = b"".join(orjson.dumps(x) + b"\n" for x in lines)
    plain, _ = _redact_bytes(data)
    assert b"Bob" in plain and b"Oslo" in plain and b"123-45" in plain
    text_only, _ = _redact_bytes(data, RedactOptions(user_text=True))
    assert b"Bob" not in text_only and b"Oslo" in text_only and b"123-45" in text_only
    both, _ = _redact_bytes(data, RedactOptions(user_text=True, tool_output=True))
    assert b"Bob" not in both and b"Oslo" not in both and b"123-45" not in both
    assert b'"call_id":"c"' in both and b'"id":"o"' in both


_JSON = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False), st.text(max_size=8)
    ),
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=6), kids, max_size=4)),
    max_leaves=20,
)
_PLACES = st.sampled_from(
    [
        "{k}",
        "Bearer {k}",
        "openai-insecure-api-key.{k}",
        "/v1/realtime?api-key={k}",
        "x {k} y",
        "wss://h/p?model=m&key={k}#f",
    ]
)


@BOUNDED
@given(value=_JSON, where=st.lists(st.text(max_size=4), max_size=3), place=_PLACES, key=st.sampled_from([KEY, EK]))
def test_property_secret_never_survives(value: Any, where: list[str], place: str, key: str) -> None:
    secret_value: Any = place.format(k=key)
    for name in reversed(where):
        secret_value = {name: secret_value}
    line = {"t": 0.0, "dir": "client", "conn": 1, "event": {"type": "x", "v": value, "s": secret_value}}
    out, drops = _redact_bytes(orjson.dumps(line) + b"\n", ALL)
    assert key.encode() not in out and not drops
    assert len(out.splitlines()) == 1


@BOUNDED
@given(data=st.binary(max_size=300))
def test_property_any_bytes_keeps_line_count(data: bytes) -> None:
    written = io.BytesIO()
    stats = redact_stream(io.BytesIO(data), written, ALL)
    out = written.getvalue()
    if stats.unusable is not None:  # empty, or binary data: nothing of it is written (redact_file refuses)
        assert out == b"" and stats.unusable.startswith(("not a text trace", "the file is empty"))
        return
    data = data.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark is no line
    assert out.count(b"\n") == len(data.splitlines()) or out.count(b"\n") == data.count(b"\n") + (
        0 if data.endswith(b"\n") or not data else 1
    )
    for line in out.splitlines():
        if line.strip():
            orjson.loads(line)


def test_cli_redact(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(_secret_trace() + b"{broken " + KEY.encode() + b"\n")
    dst = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "rtrace.cli", "redact", str(src), "-o", str(dst), "--user-text"],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert KEY.encode() not in dst.read_bytes() + proc.stdout + proc.stderr
    assert f"{src}:6:1: malformed JSON".encode() in proc.stderr
    assert b"Traceback" not in proc.stderr
    # In place is refused (no command writes over its input), then unreadable input.
    before = src.read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "rtrace.cli", "redact", str(src), "-o", str(src)], capture_output=True, timeout=60
    )
    assert proc.returncode == 2 and b"is the input" in proc.stderr and src.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    proc = subprocess.run(
        [sys.executable, "-m", "rtrace.cli", "redact", str(tmp_path / "nope")], capture_output=True, timeout=60
    )
    assert proc.returncode == 3 and b"Traceback" not in proc.stderr


def test_the_temporary_file_is_unpredictable_and_never_a_planted_symlink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temporary file was `OUT.rtrace-redact-PID.tmp`, opened through any symlink there."""
    src, out, victim = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "victim"
    src.write_bytes(_secret_trace())
    victim.write_bytes(b"precious")
    monkeypatch.setattr(os, "getpid", lambda: 4242)
    (tmp_path / "out.jsonl.rtrace-redact-4242.tmp").symlink_to(victim)
    redact_file(src, out)
    assert victim.read_bytes() == b"precious"
    assert KEY.encode() not in out.read_bytes() and out.read_bytes().count(b"\n") == src.read_bytes().count(b"\n")


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b'{"name": "x",\n "version": "1"}\n', "no trace record"),
        (bytes(range(256)) * 8, r"not a text trace \(binary data: a NUL byte at byte 1"),
        (b"\n\n", "no trace record"),
        (b"", "the (file|gzip data) is empty"),
    ],
)
def test_redact_of_what_is_not_a_trace_raises_and_writes_nothing(tmp_path: Path, content: bytes, why: str) -> None:
    import gzip

    from rtrace.core.loader import UnreadableInput

    for data in (content, gzip.compress(content)):
        src, out = tmp_path / "in.bin", tmp_path / "out.jsonl"
        src.write_bytes(data)
        with pytest.raises(UnreadableInput, match=why):
            redact_file(src, out)
        assert not out.exists()


def test_redact_reads_compressed_input_and_keeps_the_outputs_compression(tmp_path: Path) -> None:
    import gzip
    import lzma

    from rtrace.core.loader import compression_of_file

    sample = SAMPLES / "real" / "tool-output-race.livekit-1.8.8.jsonl"
    src = tmp_path / "in.jsonl.gz"
    src.write_bytes(gzip.compress(sample.read_bytes()))
    out = tmp_path / "out.jsonl.xz"
    stats = redact_file(src, out)
    assert stats.records == stats.lines == 76 and compression_of_file(out) == "xz"
    plain = tmp_path / "plain.jsonl"
    redact_file(sample, plain)
    assert lzma.decompress(out.read_bytes()) == plain.read_bytes()
    # a truncated input: the lines before the break are kept, a note stands where it broke
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(src.read_bytes()[: len(src.read_bytes()) // 2])
    kept = tmp_path / "kept.jsonl"
    stats = redact_file(cut, kept)
    assert 0 < stats.records < 76 and stats.notes[-1][0] == stats.lines
    assert "stream breaks here" in stats.notes[-1][1]
