"""The file-to-file commands: minimize, convert (redact is tested with its transform)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtrace.cli import main

from .conftest import REAL

RACE_188 = REAL / "tool-output-race.livekit-1.8.8.jsonl"
RACE_189 = REAL / "tool-output-race.livekit-1.8.9.jsonl"


def test_minimize_writes_the_reproducer_and_prints_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "min.jsonl"
    assert main(["minimize", str(RACE_188), "--rule", "deleted-function-call-output", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert len(out.read_bytes().splitlines()) <= 12
    assert captured.err.startswith("rtrace minimize: 76 records -> 11 lines (RT101 deleted-function-call-output holds")
    assert "error   RT101 deleted-function-call-output" in captured.out
    # never its own input; a rule with no finding; an unknown rule
    copy = tmp_path / "race.jsonl"
    copy.write_bytes(RACE_188.read_bytes())
    assert main(["minimize", str(copy), "--rule", "RT101", "-o", str(copy)]) == 2
    assert copy.read_bytes() == RACE_188.read_bytes()
    assert main(["minimize", str(RACE_189), "--rule", "RT101", "-o", str(tmp_path / "x.jsonl")]) == 2
    assert main(["minimize", str(RACE_188), "--rule", "RT999", "-o", str(tmp_path / "x.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "is the input" in err and "RT101 deleted-function-call-output reports nothing here" in err
    assert "unknown rule 'RT999'" in err


def test_minimize_reads_a_compressed_trace_and_writes_one(tmp_path: Path) -> None:
    import bz2
    import gzip

    from rtrace.core.loader import compression_of_file

    packed, out = tmp_path / "race.jsonl.gz", tmp_path / "repro.jsonl.bz2"
    packed.write_bytes(gzip.compress(RACE_188.read_bytes()))
    assert main(["minimize", str(packed), "--rule", "RT101", "-o", str(out)]) == 0
    plain = tmp_path / "repro.jsonl"
    assert main(["minimize", str(RACE_188), "--rule", "RT101", "-o", str(plain)]) == 0
    assert compression_of_file(out) == "bzip2"
    assert bz2.decompress(out.read_bytes()).splitlines()[1:] == plain.read_bytes().splitlines()[1:]


def test_convert_writes_a_native_trace_and_refuses_nothing_to_convert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "native.jsonl"
    assert main(["convert", str(RACE_188), "-o", str(out)]) == 0
    assert "rtrace convert: " in capsys.readouterr().err
    assert main(["analyze", str(out), "-q"]) == 1
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    assert main(["convert", str(empty), "-o", str(tmp_path / "none.jsonl")]) == 3
    assert not (tmp_path / "none.jsonl").exists()
