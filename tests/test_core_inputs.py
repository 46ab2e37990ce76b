"""`core.inputs`: opening user input (special files refused by name, never a block on a FIFO)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rtrace.core.inputs import UnreadableInput, open_input


def test_open_input_refuses_special_files_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(UnreadableInput, match="is a FIFO, not a regular file"):
        open_input(fifo)
    with pytest.raises(UnreadableInput, match="is a character device"):
        open_input("/dev/zero")
    with open_input("/dev/zero", allow_special=True) as f:
        assert f.read(4) == b"\0\0\0\0"
    with pytest.raises(UnreadableInput, match="is a directory"):
        open_input(tmp_path)


def _frames() -> tuple[bytes, list[int]]:
    """zstd frames of every header shape (checksum or not, content size or not, a skippable frame, RLE and raw
    blocks), and the offsets where one ends."""
    import zstandard

    parts = [
        zstandard.ZstdCompressor(write_checksum=True).compress(b"a" * 300_000 + b"\n"),
        zstandard.ZstdCompressor(write_content_size=False).compress(os.urandom(200_000)),
        b"\x50\x2a\x4d\x18" + (5).to_bytes(4, "little") + b"skip!",
        zstandard.ZstdCompressor(level=1).compress(b""),
        zstandard.ZstdCompressor(level=19, write_checksum=True).compress(b"x\n" * 40_000),
    ]
    ends, at = [0], 0
    for part in parts:
        at += len(part)
        ends.append(at)
    return b"".join(parts), ends


def test_the_zstd_frame_walker_knows_a_frame_boundary_from_a_truncation() -> None:
    from rtrace.core.inputs import _ZstdFrames

    data, ends = _frames()
    cuts = sorted({*ends, *range(0, len(data), 997), *(e + d for e in ends for d in (-5, -4, -3, -1, 1, 3, 4, 9))})
    for cut in (c for c in cuts if 0 <= c <= len(data)):
        frames = _ZstdFrames()
        for k in range(0, cut, 4096):  # fed in pieces, as a stream passes
            frames.feed(data[k : min(cut, k + 4096)])
        assert frames.between == (cut in ends), cut


def test_a_zstd_stream_cut_anywhere_reads_what_it_holds_and_says_where_it_broke() -> None:
    import io

    import zstandard

    from rtrace.core.inputs import _Decompressed

    data, ends = _frames()
    whole = zstandard.ZstdDecompressor().decompressobj().decompress(data[: ends[1]])
    for cut in (ends[1], ends[1] - 2, ends[2] - 100, ends[-1], ends[-1] - 1, 7):
        reader = _Decompressed(io.BytesIO(data[:cut]), "zstd")
        got = io.BufferedReader(reader).read()
        assert (reader.error is None) == (cut in ends), (cut, reader.error)
        if cut >= ends[1]:
            assert got.startswith(whole)


def test_nesting_is_found_before_a_parser_recurses_at_its_line_and_column() -> None:
    from rtrace.core.inputs import TooDeep, check_nesting, nesting_over, value_nesting_over

    assert nesting_over("[" * 100 + "]" * 100) is None
    assert nesting_over('{"a": "[[[[", "b":\n' + "[" * 101) == (2, 100)  # the brace is the first level
    assert nesting_over("x = '[[[[' # [[[[\n" + "y = " + "[" * 101, "toml") == (2, 105)
    assert nesting_over("a" + ".a" * 150 + " = 1", "toml") == (1, 202)  # dotted keys nest too
    assert nesting_over("x = [" + "1.5, " * 1000 + "]\nt = 07:32:00.999", "toml") is None  # a value's dots do not
    with pytest.raises(TooDeep, match=r"^f.toml:1:101: arrays and tables nested deeper than 100 levels"):
        check_nesting("[" * 200, "f.toml", "toml")
    deep: list[object] = []
    for _ in range(5000):
        deep = [deep]
    assert value_nesting_over(deep) and not value_nesting_over({"a": [{"b": 1}]})
