"""The suite's fast subset of `bench/harden_hunt.py` (issue 42): every bad schedule value of the harness's list is
refused where it enters, in-process; every odd `--out` and `-o` is refused before the command runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.harden_hunt import _bad_faults
from rtrace.cli import main
from rtrace.net.hunt.bugscript import load_schedule


def test_every_bad_schedule_value_is_refused_with_its_place(tmp_path: Path) -> None:
    cases = list(_bad_faults())
    assert len(cases) > 60
    for n, (value, what) in enumerate(cases):
        path = tmp_path / f"bug-{n}.toml"
        path.write_text(f"# rtrace-schedule: {value}\n", encoding="utf-8")
        with pytest.raises(ValueError, match=rf"bug-{n}\.toml:1:\d+: the schedule is not readable: "):
            load_schedule(path)
        assert what


@pytest.mark.parametrize("command", ["hunt", "sweep"])
def test_every_odd_out_is_refused_before_the_command_runs(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("x")
    marker = tmp_path / "ran"
    for out in (tmp_path / "file", tmp_path / "file" / "d", Path("/proc/rtrace"), Path("/dev/null")):
        assert main([command, "--runs", "1", "--out", str(out), "--", "touch", str(marker)]) == 2, out
        assert f"--out {out}: " in capsys.readouterr().err
    for report in (tmp_path / "no" / "r.json", tmp_path, Path("/proc/r.json"), tmp_path / "file" / "r.json"):
        if command == "hunt":
            argv = ["hunt", "--runs", "1", "--out", str(tmp_path / "h"), "-o", str(report), "--", "touch", str(marker)]
            assert main(argv) == 2, report
            assert f"-o {report}: cannot write there" in capsys.readouterr().err
    assert not marker.exists()
