"""The loader: every input shape, every kind of bad input as a `file:line:col` problem, and the round trip."""

from __future__ import annotations

import codecs
import gzip
import io
import json
import os
import random
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtrace.core.loader import TraceReader, UnreadableInput, load, write
from rtrace.core.trace import AudioRun, Problem, QuietRun, Record

from .conftest import REAL
from .strategies import BOUNDED, envelopes

OK = b'{"t": 0.5, "dir": "client", "conn": 1, "event": {"type": "response.create"}}'
REAL_TRACES = sorted(REAL.glob("*.jsonl"))


def read(data: bytes, **kw: Any) -> tuple[list[Record], TraceReader]:
    reader = TraceReader(io.BytesIO(data), "t.jsonl", **kw)
    return list(reader), reader


def lines_of(records: list[Record]) -> list[int]:
    return [r.line for r in records]


def only_problem(reader: TraceReader) -> Problem:
    assert len(reader.problems) == 1, [str(p) for p in reader.problems]
    return reader.problems[0]


def key(rec: Record) -> tuple[Any, ...]:
    """What a record says, without where it was in its file."""
    return (rec.seq, rec.t, rec.dir, rec.conn, rec.event, rec.type, rec.raw_type)


def roundtrip(records: list[Record], reader: TraceReader) -> tuple[list[Record], TraceReader]:
    buf = io.BytesIO()
    write(records, buf, reader.header.fields if reader.header else None)
    return read(buf.getvalue())


# -- bad input ----------------------------------------------------------------------------------------------


def test_last_line_without_newline_but_complete_is_read() -> None:
    recs, reader = read(OK + b"\n" + OK)
    assert lines_of(recs) == [1, 2] and reader.problems == []


def test_utf8_bom_is_skipped() -> None:
    recs, reader = read(b"\xef\xbb\xbf" + OK + b"\n" + OK + b"\n")
    assert lines_of(recs) == [1, 2] and reader.problems == []


def test_crlf_line_ends() -> None:
    recs, reader = read(OK + b"\r\n" + OK + b"\r\n")
    assert lines_of(recs) == [1, 2] and reader.problems == []
    assert recs[0].event == {"type": "response.create"}


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be-bom", "utf-16-le", "utf-16-be"])
def test_utf16_file_is_converted(codec: str) -> None:
    text = OK.decode() + "\r\n" + OK.decode() + "\n"
    data = text.encode(codec.removesuffix("-bom"))
    if codec == "utf-16-be-bom":
        data = b"\xfe\xff" + data
    recs, reader = read(data)
    assert lines_of(recs) == [1, 2]
    p = only_problem(reader)
    assert (p.line, p.col) == (1, 1) and "UTF-16" in p.message


def test_nul_bytes() -> None:
    recs, reader = read(b"\x00\x00\x00\n" + OK + b"\x00\n" + OK + b"\n")
    assert lines_of(recs) == [3]
    assert [(p.line, p.col) for p in reader.problems] == [(1, 1), (2, len(OK) + 1)]
    assert all("malformed JSON" in p.message for p in reader.problems)


def test_empty_file() -> None:
    recs, reader = read(b"")
    assert recs == [] and reader.problems == [] and reader.count == 0
    assert reader.unusable == "the file is empty"
    for data in (b"\xef\xbb\xbf", gzip.compress(b"")):
        assert read(data)[1].unusable in ("the file is empty", "the gzip data is empty")
    assert read(b"\n")[1].unusable is None  # a blank line is a file with nothing usable in it, not an empty one


@pytest.mark.parametrize(
    ("data", "what"),
    [
        (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 40, "a NUL byte at byte 8"),
        (bytes(range(128, 256)) * 40, "of its first"),  # no NUL, no line of text
        (gzip.compress(b"PK\x03\x04\x14\x00" * 500, mtime=0), "a NUL byte at byte 6 of the gzip data"),
    ],
)
def test_binary_data_is_not_a_text_trace_and_is_not_read_line_by_line(data: bytes, what: str) -> None:
    recs, reader = read(data)
    assert recs == [] and reader.problems == [] and reader.lines == 0
    assert reader.unusable is not None and reader.unusable.startswith("not a text trace (binary data: ")
    assert what in reader.unusable and "JSON lines" in reader.unusable


def test_a_trace_with_bad_bytes_in_some_lines_is_still_text() -> None:
    """NUL padding left by a crash, or a corrupt line, among lines of JSON: the lines are read, each bad one a
    problem."""
    padded = OK + b"\n" + b"\x00" * 4000 + b"\n" + OK + b"\n"
    recs, reader = read(padded)
    assert reader.unusable is None and lines_of(recs) == [1, 3] and len(reader.problems) == 1
    noisy = b"\n".join([OK, bytes(range(128, 256)) * 4, OK]) + b"\n"
    assert read(noisy)[1].unusable is None


def test_blank_lines_are_ignored() -> None:
    recs, reader = read(b"\n\n  \t \n" + OK + b"\n\r\n\n" + OK + b"\n\n")
    assert lines_of(recs) == [4, 7] and reader.problems == []


def test_long_line_skipped_with_its_size() -> None:
    long = b'{"t": 1, "dir": "client", "conn": 1, "event": {"type": "x", "pad": "' + b"a" * 500 + b'"}}'
    recs, reader = read(OK + b"\n" + long + b"\n" + OK + b"\n", max_line_bytes=200)
    assert lines_of(recs) == [1, 3]
    p = only_problem(reader)
    assert str(p) == f"t.jsonl:2:1: line is {len(long) + 1:,} bytes, over the 200-byte limit; skipped"


def test_50_mb_line_is_skipped_without_being_held(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    size = 50 * 1024 * 1024
    with path.open("wb") as fp:
        fp.write(OK + b"\n")
        fp.write(b'{"t": 1, "dir": "server", "conn": 1, "event": {"type": "response.output_audio.delta", "delta": "')
        chunk = b"QUJD" * (1 << 18)  # 1 MiB of base64
        for _ in range(size // len(chunk)):
            fp.write(chunk)
        fp.write(b'"}}\n')
        fp.write(OK + b"\n")
    big = path.stat().st_size - 2 * (len(OK) + 1)
    records, reader = load(path)
    assert lines_of(records) == [1, 3]
    p = only_problem(reader)
    assert str(p) == f"{path}:2:1: line is {big:,} bytes, over the 16,777,216-byte limit; skipped"
    # Memory follows the limit, not the line: with a 1 MiB limit, reading the 50 MB line peaks at a few MiB.
    tracemalloc.start()
    try:
        records, reader = load(path, max_line_bytes=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert lines_of(records) == [1, 3] and "over the 1,048,576-byte limit" in only_problem(reader).message
    assert peak < 8 * 1024 * 1024, peak


def test_unreadable_paths(tmp_path: Path) -> None:
    with pytest.raises(UnreadableInput, match="is a directory"):
        TraceReader.open(tmp_path)
    with pytest.raises(UnreadableInput, match=r"nope\.jsonl"):
        TraceReader.open(tmp_path / "nope.jsonl")


# -- the shared real traces ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", REAL_TRACES, ids=[p.name for p in REAL_TRACES])
def test_real_traces_load_with_zero_problems(path: Path) -> None:
    records, reader = load(path)
    assert reader.problems == [] and reader.problem_count == 0
    assert len(records) == len(path.read_bytes().splitlines())
    assert all(r.type == r.raw_type for r in records)


@pytest.mark.parametrize("path", REAL_TRACES, ids=[p.name for p in REAL_TRACES])
def test_real_traces_round_trip(path: Path) -> None:
    records, reader = load(path)
    again, reader2 = roundtrip(records, reader)
    assert [key(r) for r in again] == [key(r) for r in records]
    assert reader2.problems == []


def test_round_trip_of_other_shapes_keeps_everything() -> None:
    data = b"\n".join(
        [
            b'{"rtrace": 1, "recorder": "x"}',
            b'{"time": 1730973600000, "source": "server", "event": {"type": "session.created"}}',
            b'{"time": 1730973600500, "source": "client", "event": {"type": "conversation.item.create"}}',
            b'{"time": 1730973601000, "source": "server", "event": {"type": "conversation.item.created"}}',
        ]
    )
    records, reader = read(data + b"\n")
    again, reader2 = roundtrip(records, reader)
    assert [key(r) for r in again] == [key(r) for r in records]
    assert reader2.header == reader.header and reader2.shapes == {"native": 3}


# -- properties ---------------------------------------------------------------------------------------------


def _assert_clean_problems(reader: TraceReader) -> None:
    for p in reader.problems:
        assert p.line >= 1 and p.col >= 1 and p.message
        assert str(p).startswith(f"t.jsonl:{p.line}:{p.col}: ")
        assert "\x1b" not in p.message and "\x1b" not in p.excerpt


@BOUNDED
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_crash(data: bytes) -> None:
    recs, reader = read(data, max_line_bytes=120)
    assert reader.count == len(recs)
    _assert_clean_problems(reader)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10,
)
envelope_like = st.fixed_dictionaries(
    {},
    optional={
        "t": json_values,
        "dir": st.sampled_from(["client", "server", "meta", "local", "bogus"]) | json_values,
        "src": json_values,
        "conn": st.integers(-1, 3) | json_values,
        "event": st.fixed_dictionaries({}, optional={"type": st.sampled_from(["session.created", "x"]) | json_values})
        | json_values,
        "time": json_values,
        "source": json_values,
        "type": json_values,
        "rtrace": json_values,
    },
)


@BOUNDED
@given(st.lists(json_values | envelope_like, max_size=12))
def test_arbitrary_json_values_per_line(values: list[Any]) -> None:
    data = b"".join(json.dumps(v).encode() + b"\n" for v in values)
    recs, reader = read(data)
    _assert_clean_problems(reader)
    for rec in recs:
        assert rec.dir in ("client", "server", "meta", "local")
        assert isinstance(rec.conn, int) and rec.conn >= 1 and isinstance(rec.t, float)
        assert isinstance(rec.type, str) and rec.type
    again, _ = roundtrip(recs, reader)
    assert [key(r) for r in again] == [key(r) for r in recs]


@BOUNDED
@given(envelopes())
def test_round_trip_generated(lines: list[dict[str, Any]]) -> None:
    data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    records, reader = read(data)
    assert len(records) == len(lines)
    again, reader2 = roundtrip(records, reader)
    assert [key(r) for r in again] == [key(r) for r in records]
    assert reader2.problem_count == reader.problem_count


def test_a_reader_of_a_later_part_looks_for_no_bom_header_or_utf16() -> None:
    rest = b'\xef\xbb\xbf{"rtrace": 1}\n' + orjson.dumps(_native_lines(1)[0]) + b"\n"
    reader = TraceReader(io.BytesIO(rest), "x", at_start=False)
    records = list(reader)
    assert reader.header is None and [r.line for r in records] == [2]
    assert [p.line for p in reader.problems] == [1]  # the BOM is not skipped there: line 1 is not JSON
    assert reader.inferred == 0


def _native_lines(n: int) -> list[dict[str, Any]]:
    return [
        {"t": float(k), "dir": "server", "conn": 1, "event": {"type": "session.updated", "session": {}}}
        for k in range(n)
    ]


# -- the fast path: the C scanner takes only what a full parse reads the same way -------------------------------

from rtrace.core import loader as loader_module  # noqa: E402
from rtrace.core import rowpath  # noqa: E402
from rtrace.core.catalog import BETA_TO_GA  # noqa: E402
from rtrace.core.reducer import AUDIO_DELTAS, TRANSITIONS  # noqa: E402
from rtrace.core.trace import DIRECTIONS  # noqa: E402

SCANNER = loader_module._scanner
needs_scanner = pytest.mark.skipif(SCANNER is None, reason="the C scanner is not built")
TABLE = loader_module.scan_table(TRANSITIONS, AUDIO_DELTAS)
#: Types the scanner may take (quiet or audio somewhere), types it must leave (transitions, unknown), beta names.
QUIET = ["response.output_text.delta", "input_audio_buffer.append", "rate_limits.updated", "response.text.delta"]
AUDIO = ["response.output_audio.delta", "response.audio.delta"]
OTHERS = ["conversation.item.create", "response.done", "x.unknown", "", "response.output_text.DELTA"]
TYPES = st.sampled_from(QUIET + AUDIO + OTHERS + sorted(BETA_TO_GA)[:6])
#: Text with what JSON must escape, non-ASCII, and what a naive scanner trips on.
_CHARS = st.sampled_from(list('ab "\\/\n\t\x00\x1f\x7fé€😀\ud83d{}[],:'))
TEXT = st.one_of(st.text(alphabet=_CHARS, max_size=8), st.just("type"))
SCALARS = st.one_of(TEXT, st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.booleans(), st.none())
VALUES = st.recursive(SCALARS, lambda v: st.lists(v, max_size=3) | st.dictionaries(TEXT, v, max_size=3))


def _encode(value: Any, style: str) -> str:
    """JSON text of `value`: compact as rtrace writes it, with spaces as Python's json does, or with every
    non-ASCII character (and '/') escaped."""
    if style == "spaces":
        return json.dumps(value, ensure_ascii=False)
    if style == "ascii":
        return json.dumps(value, ensure_ascii=True).replace("/", "\\/")
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))  # a lone surrogate stays: bad UTF-8


@st.composite
def trace_lines(draw: st.DrawFn) -> bytes:
    """One trace line: a native record of any type, keys in any order, odd values and encodings; or a mutation of
    one (truncated, a byte changed, a duplicate key, an escaped type, bad UTF-8, whitespace)."""
    event: dict[str, Any] = {"type": draw(TYPES)}
    if draw(st.integers(0, 3)):
        event["item_id"] = draw(st.one_of(st.just("item_a"), st.just("item_a"), TEXT, SCALARS))
    if draw(st.integers(0, 3)):
        event["delta"] = draw(st.one_of(st.sampled_from(["AAAAAA==", "QUJD", "QQ=", "Q"]), TEXT, SCALARS))
    if draw(st.integers(0, 5)) == 0:
        event["rtrace_audio_bytes"] = draw(st.integers(0, 99))
    for k in draw(st.lists(TEXT, max_size=3)):
        event[k] = draw(VALUES)
    keys = list(event)
    draw(st.randoms()).shuffle(keys)
    event = {k: event[k] for k in keys}
    top: dict[str, Any] = {
        "t": draw(st.one_of(st.floats(-1e6, 1e9, allow_nan=False), st.integers(0, 9), st.just("1.5"))),
        "dir": draw(st.sampled_from([*DIRECTIONS, "Server", "src"])),
        "conn": draw(st.one_of(st.integers(1, 3), st.integers(-1, 0), st.just(2**40), st.just(1.0))),
        "event": event,
    }
    if draw(st.booleans()):
        top[draw(TEXT)] = draw(VALUES)
    order = list(top)
    if draw(st.booleans()):
        draw(st.randoms()).shuffle(order)
    text = _encode({k: top[k] for k in order}, draw(st.sampled_from(["compact", "spaces", "ascii"])))
    raw = text.encode("utf-8", "surrogatepass")
    mutation = draw(st.sampled_from(["none"] * 6 + ["cut", "byte", "dup-type", "escape-type", "dup-top", "ws"]))
    if mutation == "cut":
        raw = raw[: draw(st.integers(0, max(0, len(raw) - 1)))]
    elif mutation == "byte" and raw:
        k = draw(st.integers(0, len(raw) - 1))
        bad = draw(st.sampled_from([0x00, 0x22, 0x5C, 0x7D, 0x2C, 0x80, 0xC0, 0xED, 0xFF]))
        raw = raw[:k] + bytes([bad]) + raw[k + 1 :]
    elif mutation == "dup-type":
        raw = raw.replace(b'"event":{', b'"event":{"type":"conversation.item.create",', 1)
        raw = raw.replace(b'"event": {', b'"event": {"type": "response.done", ', 1)
    elif mutation == "escape-type":
        raw = raw.replace(b".delta", b"\\u002edelta", 1).replace(b"rate_", b"rate\\u005f", 1)
    elif mutation == "dup-top":
        raw = raw[:-1] + b',"t":2.5,"conn":2}'
    elif mutation == "ws":
        raw = b" \t" + raw.replace(b":", b" : ", 2) + b" \r"
    return raw


#: Bytes of any kind, one line each.
ARBITRARY_LINES = st.binary(max_size=60).map(lambda b: b.replace(b"\n", b" "))


def _expected(raw: bytes) -> tuple[str, float, int, str, Any] | None:
    """What a full parse makes of one line, as the fold sees it: ('quiet' or 'audio', t, conn, dir, (item_id,
    bytes) for audio), or None when the line is no record of either kind."""
    try:
        obj = orjson.loads(raw)
        event, raw_type = obj["event"], obj["event"]["type"]
        etype = loader_module._GA_NAMES[raw_type]
        direction, t, conn = rowpath._DIRECTIONS[obj["dir"]], obj["t"], obj["conn"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    if type(t) is not float or type(conn) is not int or conn < 1:
        return None
    if (direction, etype) in AUDIO_DELTAS:
        from rtrace.core.audio import delta_bytes

        item_id = event.get("item_id")
        return "audio", t, conn, direction, (item_id, delta_bytes(event))
    if (direction, etype) in TRANSITIONS:
        return None
    return "quiet", t, conn, direction, None


def _scanned(lines: list[bytes], seen: set[int], keep: int = 0) -> list[tuple[int, tuple[Any, ...]]]:
    """The runs the scanner makes of `lines` (a block of them), each with the index of its last line."""
    block = b"".join(line + b"\n" for line in lines)
    out, k = [], 0
    for entry in SCANNER.scan(block, 0, len(block), TABLE, seen, keep):  # type: ignore[union-attr]
        if type(entry) is bytes:
            assert entry == lines[k]
            k += 1
            continue
        k += entry[0]
        out.append((k - 1, entry))
    assert k == len(lines)
    return out


@needs_scanner
@BOUNDED
@given(
    st.lists(trace_lines() | ARBITRARY_LINES, min_size=1, max_size=12), st.sets(st.integers(1, 3)), st.integers(0, 3)
)
def test_the_scanner_takes_only_lines_a_full_parse_reads_the_same(
    lines: list[bytes], seen: set[int], keep: int
) -> None:
    """Every line of a run the scanner takes is a record a full parse reads as quiet (or an audio delta) on a
    connection the reader has seen, with the run's direction and connection; the run's t is its last line's, and
    an audio run's item and bytes are its lines'. A connection it is told to keep (`show --conn`) is in no run."""
    known = set(seen)
    for last, entry in _scanned(lines, seen, keep):
        count, t, conn, d = entry[:4]
        assert conn != keep
        first = last - count + 1
        before = {got[2] for got in map(_expected, lines[:first]) if got is not None}
        assert conn in known | before, "a connection's first line must be left whole"
        for k in range(first, last + 1):
            got = _expected(lines[k])
            assert got is not None, lines[k]
            kind, t_k, conn_k, dir_k, audio = got
            assert (kind, conn_k, dir_k) == ("quiet" if len(entry) == 4 else "audio", conn, DIRECTIONS[d])
            if k == last:
                assert t_k == t and type(t) is float
            if len(entry) > 4:
                item_id, n_bytes, times, sizes = entry[4:]
                assert audio == (item_id, sizes[k - last + count - 1]) and times[k - last + count - 1] == t_k
                assert n_bytes == sum(sizes)


@needs_scanner
@BOUNDED
@given(st.lists(trace_lines() | ARBITRARY_LINES, min_size=1, max_size=12), st.sets(st.integers(1, 3)))
def test_with_detail_a_quiet_run_has_each_lines_time_and_type(lines: list[bytes], seen: set[int]) -> None:
    """With `detail` (the HTML report's fold) the scanner takes the same lines as without, and a quiet run carries
    each line's `t` and raw type, as a full parse reads them."""
    block = b"".join(line + b"\n" for line in lines)
    plain = SCANNER.scan(block, 0, len(block), TABLE, set(seen))  # type: ignore[union-attr]
    detailed = SCANNER.scan(block, 0, len(block), TABLE, set(seen), 0, True)  # type: ignore[union-attr]
    assert [type(e) for e in plain] == [type(e) for e in detailed]
    k = 0
    for a, b in zip(plain, detailed, strict=True):
        if type(a) is bytes:
            assert a == b
            k += 1
            continue
        if len(a) == 4:
            assert b[:4] == a and len(b) == 6
            times, types = b[4], b[5]
            assert len(times) == len(types) == a[0]
            for j in range(a[0]):
                obj = orjson.loads(lines[k + j])
                assert (times[j], types[j]) == (obj["t"], obj["event"]["type"])
        else:
            assert a == b  # audio runs are the same
        k += a[0]


@needs_scanner
@BOUNDED
@given(
    st.lists(trace_lines() | ARBITRARY_LINES, min_size=1, max_size=12), st.sets(st.integers(1, 3)), st.integers(0, 3)
)
def test_a_head_is_what_the_inline_path_reads_of_its_line(lines: list[bytes], seen: set[int], keep: int) -> None:
    """With `heads` (the reader's fast path) the scanner takes the same runs as without, and a line it leaves whole
    comes as (its event's bytes, t, conn, dir index) only when the inline path reads that line as a record with
    that event, t, connection and direction (a float t, an int conn from 1, a type of the catalogue)."""
    block = b"".join(line + b"\n" for line in lines)
    plain = SCANNER.scan(block, 0, len(block), TABLE, set(seen), keep)  # type: ignore[union-attr]
    headed = SCANNER.scan(block, 0, len(block), TABLE, set(seen), keep, False, True)  # type: ignore[union-attr]
    assert len(plain) == len(headed)
    for a, b in zip(plain, headed, strict=True):
        if type(a) is not bytes or type(b) is bytes:
            assert a == b
            continue
        body, t, conn, d = b
        obj = orjson.loads(a)
        event = orjson.loads(body)
        assert type(event) is dict and event == obj["event"] and event["type"] in loader_module._GA_NAMES
        assert type(obj["t"]) is float and type(t) is float and repr(t) == repr(obj["t"])
        assert type(obj["conn"]) is int and obj["conn"] == conn >= 1
        assert DIRECTIONS[d] == obj["dir"]
    spread = json.dumps({"t": 1.5, "dir": "server", "conn": 1, "event": {"type": "rate_limits.updated"}}, indent=1)
    block = spread.encode() + b"\n"  # a record over several lines: each line is one of its own, and no record
    assert SCANNER.scan(block, 0, len(block), TABLE, {1}, 0, False, True) == block.split(b"\n")[:-1]  # type: ignore[union-attr]
    canonical = b'{"t":1.5,"dir":"client","conn":7,"event":{"type":"response.create","response":{"x":[1]}}}'
    [(body, t, conn, d)] = SCANNER.scan(canonical, 0, len(canonical), TABLE, set(), 0, False, True)  # type: ignore[union-attr]
    assert (body, t, conn, DIRECTIONS[d]) == (b'{"type":"response.create","response":{"x":[1]}}', 1.5, 7, "client")


#: Float literals at the edges of the scanner's exact fast path (at most 2^53 in all digits, a power of ten to 22).
T_LITERALS = (
    "0.0", "-0.0", "0.1", "10.999105", "1e22", "1.5e-22", "1e23", "1.5e-23", "9007199254740992.0",
    "9007199254740993.0", "9007199254740993e-5", "0.30000000000000004", "1234567890123456789.5", "4.35E-7", "1E+2",
    "0.0000000000000000000000001", "179.76931348623157e99", "2.2250738585072014e-99", "8.5070591730234615e+37",
)


@needs_scanner
@pytest.mark.parametrize("literal", T_LITERALS)
def test_the_scanners_t_is_the_float_a_full_parse_reads(literal: str) -> None:
    """A record's `t` as the scanner makes it, in a head and in a run, is the float orjson reads, to the bit."""
    line = b'{"t":%s,"dir":"server","conn":1,"event":{"type":"%s"}}'
    head, quiet = (line % (literal.encode(), etype) for etype in (b"response.done", b"response.output_text.delta"))
    want = orjson.loads(head)["t"]
    block = head + b"\n" + quiet + b"\n" + quiet + b"\n"
    got = SCANNER.scan(block, 0, len(block), TABLE, {1}, 0, False, True)  # type: ignore[union-attr]
    assert [type(e[0]) for e in got] == [bytes, int]
    assert repr(got[0][1]) == repr(got[1][1]) == repr(want)


@needs_scanner
def test_the_scanner_takes_the_canonical_lines_of_every_quiet_type() -> None:
    """Lines as rtrace writes them (and with spaces, as Python's json does) are taken: the fast path is used."""
    lines = []
    for raw, ga in sorted(loader_module._GA_NAMES.items()):
        for direction in DIRECTIONS:
            if (direction, ga) not in TRANSITIONS:
                for style in ("compact", "spaces"):
                    event = {"event_id": "ev_1", "type": raw, "delta": 'héllo "x" \\n'}
                    lines.append(_encode({"t": 1.25, "dir": direction, "conn": 1, "event": event}, style).encode())
    taken = sum(entry[0] for _, entry in _scanned(lines, {1}))
    assert taken == len(lines)
    delta = {"type": AUDIO[0], "item_id": "i", "delta": "AAAA"}
    audio = orjson.dumps({"t": 2.5, "dir": "server", "conn": 1, "event": delta})
    [(_, entry)] = _scanned([audio, audio], {1})
    assert entry[:6] == (2, 2.5, 1, 1, "i", 6)


@needs_scanner
@given(st.binary(max_size=300), st.integers(0, 300), st.integers(0, 300))
def test_the_scanners_line_count_is_bytes_count(data: bytes, start: int, end: int) -> None:
    """`_scan.lines` counts the newlines of a region as `bytes.count` does, and refuses a region outside the buffer
    as the scanner does."""
    data = data + b"\n" * (start % 37) + data  # runs of newlines, and regions that start or end inside them
    start, end = min(start, end, len(data)), min(max(start, end), len(data))
    assert SCANNER.lines(data, start, end) == data.count(b"\n", start, end)
    assert loader_module._count_lines is SCANNER.lines
    for outside in ((-1, end), (start, len(data) + 1), (end + 1, end) if end < len(data) else (1, 0)):
        with pytest.raises(ValueError):
            SCANNER.lines(data, *outside)


def _report_both_ways(data: bytes, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    from rtrace.engine.fold import analyze_reader
    from rtrace.rules.base import Config

    config = Config(ack_timeout=0.2, reply_timeout=0.5)
    fast = analyze_reader(TraceReader(io.BytesIO(data), "t.jsonl"), config)
    with monkeypatch.context() as m:
        m.setattr(loader_module, "_scanner", None)
        pure = analyze_reader(TraceReader(io.BytesIO(data), "t.jsonl"), config)
    return fast, pure


@needs_scanner
@BOUNDED
@given(envelopes(max_size=50), st.lists(trace_lines(), max_size=30), st.randoms())
def test_the_fast_path_gives_the_report_of_a_full_parse_on_random_traces(
    lines: list[dict[str, Any]], odd: list[bytes], rnd: Any
) -> None:
    """A random trace (the reducer's strategies) with odd lines mixed in: the report, problems and counts included,
    is the one the pure path gives."""
    raw = [orjson.dumps(line) for line in lines]
    for line in odd:
        raw.insert(rnd.randint(0, len(raw)), line)
    fast, pure = _report_both_ways(b"\n".join(raw) + b"\n", pytest.MonkeyPatch())
    assert fast == pure


@needs_scanner
def test_the_fast_path_gives_the_report_of_a_full_parse_on_every_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    from .conftest import SAMPLES

    for path in sorted(SAMPLES.rglob("*.jsonl")):
        fast, pure = _report_both_ways(path.read_bytes(), monkeypatch)
        assert fast == pure, path


def test_the_scanner_is_built_where_ci_runs() -> None:
    """`make test` in a fresh clone (CI) builds the C scanner: the fast path is what CI tests, not only the pure one."""
    import os

    if not os.environ.get("CI"):
        pytest.skip("only CI promises a C compiler")
    assert SCANNER is not None


@pytest.mark.parametrize("scanner", [True, False])
def test_a_reader_counts_every_line_of_a_trace_of_many_blocks(scanner: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """`lines` after the entries of a fold is the trace's line count, bad, blank and quiet lines included, whether
    its lines were counted by the reader or by the fold's reading of them (the scanner's regions); reading up to a
    line stops at or after it."""
    if not scanner:
        monkeypatch.setattr(loader_module, "_scanner", None)
    quiet = b'{"t":1.5,"dir":"server","conn":1,"event":{"type":"response.output_text.delta","delta":"%d"}}'
    first = b'{"t":1.0,"dir":"server","conn":1,"event":{"type":"session.created","session":{}}}'
    lines = [first] + [quiet % k if k % 97 else b"{bad" if k % 2 else b"" for k in range(1, 9000)]
    data = b"\n".join(lines) + b"\n"
    assert len(data) > 3 * loader_module._CHUNK
    reader = TraceReader(io.BytesIO(data), "t.jsonl")
    for _ in reader.rows().entries(TRANSITIONS, AUDIO_DELTAS):
        pass
    assert reader.lines == len(lines)
    for until in (1, 4000, len(lines)):
        reader = TraceReader(io.BytesIO(data), "t.jsonl")
        for _ in reader.rows().entries(TRANSITIONS, AUDIO_DELTAS, until_line=until):
            pass
        assert until <= reader.lines <= len(lines)


def test_entries_up_to_a_line_stop_there_and_give_the_records_of_the_rows() -> None:
    from .test_engine_fold import RACE_188

    data = RACE_188.read_bytes()
    rows = list(TraceReader(io.BytesIO(data), "t.jsonl").rows())
    for until in (1, 2, 17, 45, len(rows)):
        reader = TraceReader(io.BytesIO(data), "t.jsonl")
        got = list(reader.rows().entries(TRANSITIONS, AUDIO_DELTAS, until_line=until))
        count = sum(e.size if type(e) in (QuietRun, AudioRun) else 1 for e in got)
        assert count == len([r for r in rows if r[1] <= until]) == reader.count
        whole = [e for e in got if type(e) not in (QuietRun, AudioRun)]
        assert whole == [r for r in rows if r[1] <= until and r in got]


def test_a_connection_to_keep_past_what_the_scanner_reads_is_no_connection_to_it() -> None:
    """`keep` of any size (`show --conn 99999999999999999999999`) reads as `keep=0` does: the scanner takes no line
    of a connection past nine digits, so each of them is parsed whole already."""
    from .test_engine_fold import RACE_188

    data = RACE_188.read_bytes()

    def entries(keep: int) -> list[Any]:
        reader = TraceReader(io.BytesIO(data), "t.jsonl")
        return [type(e).__name__ for e in reader.rows().entries(TRANSITIONS, AUDIO_DELTAS, keep=keep)]

    plain = entries(0)
    for keep in (10**23, loader_module.SCANNED_CONN_MAX + 1, -1, -(10**30)):
        assert entries(keep) == plain


@needs_scanner
def test_the_scanner_takes_lines_of_connections_up_to_scanned_conn_max_and_no_further() -> None:
    """`SCANNED_CONN_MAX` is the C scanner's own limit: a quiet line of that connection is taken in a run, one of
    the next is left to the full parse."""
    for conn, taken in ((loader_module.SCANNED_CONN_MAX, True), (loader_module.SCANNED_CONN_MAX + 1, False)):
        line = b'{"t":1.0,"dir":"server","conn":%d,"event":{"type":"response.text.delta"}}' % conn
        assert bool(_scanned([line, line], {conn})) is taken


def test_a_line_end_is_looked_for_at_most_max_skip_factor_times_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from rtrace.core import loader

    monkeypatch.setattr(loader, "MIN_SKIP_BYTES", 0)
    horizon = 1000 * loader.MAX_SKIP_FACTOR
    ok = b'{"t":0.0,"dir":"server","conn":1,"event":{"type":"session.created"}}\n'
    for size, read_on in ((horizon - 10, True), (horizon + 300_000, False)):
        reader = TraceReader(io.BytesIO(ok + b"x" * size + b"\n" + ok), "t.jsonl", max_line_bytes=1000)
        records = list(reader)
        if read_on:
            assert [r.line for r in records] == [1, 3] and reader.gave_up is None  # skipped, read on
        else:
            assert [r.line for r in records] == [1] and reader.gave_up == 2
            assert "no line end" in reader.problems[-1].message and reader.problems[-1].line == 2


def test_utf16_is_converted_a_chunk_at_a_time() -> None:
    line = '{"t":0.0,"dir":"server","conn":1,"event":{"type":"session.created","x":"é"}}\n'
    data = (line * 5000).encode("utf-16")
    reader = TraceReader(io.BytesIO(data), "t.jsonl")
    records = list(reader)
    assert len(records) == 5000 and records[-1].event["x"] == "é"
    assert reader.problems[0].message.startswith("file is UTF-16")


@pytest.mark.parametrize("fast", [False, True])
def test_the_fast_path_looks_for_a_line_end_only_as_far_as_the_pure_path(
    monkeypatch: pytest.MonkeyPatch, fast: bool
) -> None:
    """The scanner's regions (a line limit of a block or more) stop looking for a line end where `_blocks` does,
    and give the records and problems of the pure path."""
    from rtrace.core import loader

    monkeypatch.setattr(loader, "MIN_SKIP_BYTES", 0)
    limit = loader._CHUNK
    horizon = limit * loader.MAX_SKIP_FACTOR
    ok = b'{"t":0.0,"dir":"server","conn":1,"event":{"type":"session.created"}}\n'
    quiet = b'{"t":0.5,"dir":"server","conn":1,"event":{"type":"response.output_text.delta","delta":"x"}}\n'
    for size, read_on in ((horizon - 10, True), (horizon + 3 * limit, False)):
        data = ok + quiet * 3 + b"x" * size + b"\n" + ok + quiet
        reader = TraceReader(io.BytesIO(data), "t.jsonl", max_line_bytes=limit)
        rows = reader.rows()
        got = list(rows.entries(TRANSITIONS, AUDIO_DELTAS) if fast else rows)
        pure = TraceReader(io.BytesIO(data), "t.jsonl", max_line_bytes=limit)
        want = [r[1] for r in pure.rows()]
        lines = [e[1] for e in got]  # a row's line, or a run's last line
        assert lines[-1] == want[-1] and [p.line for p in reader.problems] == [p.line for p in pure.problems]
        if read_on:
            assert want == [1, 2, 3, 4, 6, 7] and reader.gave_up is None
        else:
            assert want == [1, 2, 3, 4] and reader.gave_up == 5 and "no line end" in reader.problems[-1].message


def test_the_fast_path_refuses_special_files_as_the_pure_path(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero"):
        with pytest.raises(UnreadableInput, match="not a regular file"):
            with TraceReader.open(path) as reader:
                list(reader.rows().entries(TRANSITIONS, AUDIO_DELTAS))


# -- compressed traces -------------------------------------------------------------------------------------------


def _compress(codec: str, data: bytes) -> bytes:
    import bz2
    import gzip
    import lzma

    import zstandard

    packers = {
        "gzip": gzip.compress,
        "bzip2": bz2.compress,
        "xz": lzma.compress,
        "zstd": zstandard.ZstdCompressor().compress,
    }
    return packers[codec](data)


CODECS = ("gzip", "bzip2", "xz", "zstd")


@pytest.mark.parametrize("codec", CODECS)
def test_a_compressed_trace_is_read_as_the_plain_one_whatever_its_name(codec: str, tmp_path: Path) -> None:
    from rtrace.core.loader import compression_of, compression_of_file

    plain = REAL / "tool-output-race.livekit-1.8.8.jsonl"
    packed = tmp_path / "misleading.jsonl"  # no .gz: the magic bytes decide
    packed.write_bytes(_compress(codec, plain.read_bytes()))
    assert compression_of(packed.read_bytes()[:8]) == codec == compression_of_file(packed)
    records, reader = load(packed)
    expected, _ = load(plain)
    assert [r.to_json() for r in records] == [r.to_json() for r in expected]
    assert [r.line for r in records] == [r.line for r in expected]
    assert reader.compression == codec and reader.problems == []
    assert compression_of_file(plain) is None


def test_a_compressed_stream_is_read_on_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    data = (OK + b"\n") * 3
    fake = io.TextIOWrapper(io.BufferedReader(io.BytesIO(_compress("gzip", data))))
    monkeypatch.setattr(sys, "stdin", fake)
    with TraceReader.open("-") as reader:
        assert len(list(reader)) == 3 and reader.compression == "gzip"


@pytest.mark.parametrize("codec", CODECS)
def test_a_truncated_compressed_trace_breaks_at_a_line_and_the_lines_before_are_read(codec: str) -> None:
    # 3 MB: bzip2 decompresses by blocks of 900 kB, so half the file holds at least one whole block
    line = b'{"t":%d.0,"dir":"server","conn":1,"event":{"type":"rate_limits.updated","n":%d}}'
    lines = [line % (n, n) for n in range(36_000)]
    packed = _compress(codec, b"\n".join(lines) + b"\n")
    records, reader = read(packed[: len(packed) // 2])
    assert 0 < len(records) < len(lines)
    assert [r.line for r in records] == list(range(1, len(records) + 1))
    broke = [p for p in reader.problems if "stream breaks here" in p.message]
    assert len(broke) == 1 and broke[0].line == reader.broken
    assert reader.broken in (len(records) + 1, len(records) + 2)  # the first line not read whole


def test_corrupt_compressed_data_is_a_problem_never_an_exception() -> None:
    import gzip

    records, reader = read(gzip.compress(OK + b"\n")[:10] + os.urandom(200))
    assert records == [] and reader.broken == 1
    assert "gzip stream breaks here" in reader.problems[-1].message


@pytest.mark.parametrize("codec", CODECS)
def test_a_decompression_bomb_is_read_in_bounded_memory(codec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from rtrace.core import loader

    monkeypatch.setattr(loader, "MIN_SKIP_BYTES", 0)
    # 64 MiB of zeros without a line end, in at most 128 KiB compressed, after one good line: the line limit (1 MiB,
    # its end looked for up to 16 MiB) bounds the decompressed data held, and reading stops at the horizon
    packed = _compress(codec, OK + b"\n" + b"\0" * (64 << 20))
    assert len(packed) < 1 << 17
    tracemalloc.start()
    try:
        records, reader = read(packed, max_line_bytes=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert lines_of(records) == [1] and reader.gave_up == 2
    assert peak < 16 * 1024 * 1024, peak  # a quarter of the data: the decompressor's buffers and a block or two


def test_zstd_without_zstandard_is_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_zstandard(name: str, *args: Any, **kw: Any) -> Any:
        if name == "zstandard":
            raise ImportError(name)
        return real_import(name, *args, **kw)

    packed = _compress("zstd", OK + b"\n")
    monkeypatch.setattr(builtins, "__import__", no_zstandard)
    records, reader = read(packed)
    assert records == [] and "needs the zstandard package" in only_problem(reader).message


def test_open_trace_gives_the_plain_bytes_of_a_compressed_file(tmp_path: Path) -> None:
    from rtrace.core.loader import is_trace_name, open_trace

    path = tmp_path / "t.jsonl.xz"
    path.write_bytes(_compress("xz", OK + b"\n"))
    with open_trace(path) as f:
        assert f.read() == OK + b"\n"
    assert [is_trace_name(n) for n in ("a.jsonl", "a.jsonl.gz", "a.jsonl.zst", "a.json", "a.gz")] == [
        True, True, True, False, False,
    ]  # fmt: skip


@pytest.mark.parametrize("bom", [b"", codecs.BOM_UTF8])
@pytest.mark.parametrize("fast", [True, False])
def test_marks_are_where_their_lines_start_in_the_file(tmp_path: Path, bom: bytes, fast: bool) -> None:
    """Each mark (line, offset) of a reader is the byte where that line starts in the file (a BOM, lines across
    blocks, an oversized line and blank lines included): what a report seeks to when it quotes a line."""
    rnd = random.Random(7)
    line = b'{"t":0.5,"dir":"server","conn":1,"event":{"type":"rate_limits.updated","x":"%s"}}'
    lines = [line % (b"y" * rnd.randint(0, 3000)) for _ in range(900)]
    lines[300] = b'{"x":"' + b"z" * 700_000 + b'"}'  # over the limit below, across blocks
    lines[400] = b""
    path = tmp_path / "t.jsonl"
    data = bom + b"\n".join(lines) + b"\n"
    path.write_bytes(data)
    starts = [len(bom), *[k + 1 for k in range(len(data)) if data[k] == 0x0A][:-1]]
    with TraceReader.open(path, max_line_bytes=500_000) as reader:
        if fast:
            list(reader.rows().entries(TRANSITIONS, AUDIO_DELTAS))
        else:
            list(reader)
    assert reader.marks is not None and len(reader.marks) > 4
    for line, offset in reader.marks:
        assert starts[line - 1] == offset, line


def test_a_compressed_or_utf16_trace_has_no_marks() -> None:
    """Offsets into decompressed or converted bytes are not the file's: no marks (a report reads from the start)."""
    plain = b'{"t":0.5,"dir":"server","conn":1,"event":{"type":"rate_limits.updated"}}\n' * 3
    for data in (gzip.compress(plain, mtime=0), plain.decode().encode("utf-16")):
        reader = TraceReader(io.BytesIO(data), "t.jsonl")
        assert len(list(reader)) == 3 and reader.marks is None
