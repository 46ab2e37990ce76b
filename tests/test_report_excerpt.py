"""Quoted trace lines: re-read by number, payloads cut, credentials redacted, never a traceback."""

from __future__ import annotations

from pathlib import Path

import orjson
from hypothesis import given
from hypothesis import strategies as st

from rtrace.report import excerpt

from .conftest import REAL


def test_reads_the_requested_lines_only() -> None:
    path = REAL / "tool-output-race.livekit-1.8.8.jsonl"
    got = excerpt.read_lines(path, [45, 1, 76, 999])
    assert sorted(got) == [1, 45, 76]
    source = path.read_bytes().splitlines()
    assert orjson.loads(got[45]) == orjson.loads(source[44])


def test_payloads_are_cut_and_secrets_redacted(tmp_path: Path) -> None:
    line = {
        "t": 1.0,
        "dir": "client",
        "conn": 1,
        "event": {
            "type": "input_audio_buffer.append",
            "audio": "QUJD" * 10_000,
            "headers": {"Authorization": "Bearer abcdefghijklmnop", "x-api-key": "whatever"},
            "note": "key sk-abcdefghijklmnop123 and openai-insecure-api-key.sk-zzzzzzzzzz in text",
            "usage": {"total_tokens": 12},
        },
    }
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + orjson.dumps(line) + b"\n" + b"not json sk-abcdefghijklmnop123\n")
    got = excerpt.read_lines(path, [1, 2])
    quoted = orjson.loads(got[1])
    assert len(got[1]) < 600
    assert quoted["event"]["audio"].startswith("QUJD") and "(+39976 chars)" in quoted["event"]["audio"]
    assert quoted["event"]["headers"] == {"Authorization": "[redacted]", "x-api-key": "[redacted]"}
    assert "abcdefghijklmnop" not in got[1] and "zzzzzzzzzz" not in got[1]
    assert quoted["event"]["usage"] == {"total_tokens": 12}
    assert got[2] == "not json sk-[redacted]"


def test_unreadable_sources_give_nothing(tmp_path: Path) -> None:
    assert excerpt.read_lines(tmp_path / "missing.jsonl", [1]) == {}
    assert excerpt.read_lines("-", [1]) == {}
    assert excerpt.read_lines(tmp_path, []) == {}


@given(st.binary(max_size=300))
def test_any_bytes_quote_without_error(raw: bytes) -> None:
    text = excerpt.quote_line(raw)
    assert isinstance(text, str) and len(text) <= 2000


def test_lines_of_a_compressed_trace_are_quoted_from_its_plain_text(tmp_path: Path) -> None:
    import gzip

    path = REAL / "tool-output-race.livekit-1.8.8.jsonl"
    packed = tmp_path / "t.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert excerpt.read_lines(packed, [1, 45]) == excerpt.read_lines(path, [1, 45])
