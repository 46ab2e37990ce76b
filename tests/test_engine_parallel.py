"""rtrace.engine.parallel: -j N gives the reports of -j 1, in input order; one failing trace never takes the others
down;
the Dask engine (a local 2-worker cluster) gives the same reports as -j."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.generate import text_session, voice_call
from rtrace.core.facts import ConnOpened
from rtrace.core.state import TraceState
from rtrace.engine import parallel
from rtrace.engine.fold import TraceReport, analyze_path
from rtrace.rules import RULES
from rtrace.rules.base import Config, Rule, on

from .conftest import REAL, ROOT

RTRACE = [sys.executable, "-m", "rtrace.cli"]
MAX = 16 * 1024 * 1024


class Boom(Rule[Config]):
    """Test rule: fails on a connection whose path is /boom (an analysis bug in one trace)."""

    id = "RT900"
    slug = "boom"
    severity = "info"
    title = "test"
    fix = "test"
    @on(ConnOpened)
    def opened(self, fact: ConnOpened, state: TraceState) -> None:
        if fact.conn.path == "/boom":
            raise RuntimeError("boom")
        if fact.conn.path == "/die":
            os._exit(13)  # the worker process dies


def write(path: Path, kind: str, seed: int, seconds: float, faults: tuple[str, ...] = ()) -> str:
    buf = io.BytesIO()
    (voice_call if kind == "voice" else text_session)(buf, seed, seconds, faults)
    path.write_bytes(buf.getvalue())
    return str(path)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Small generated traces (two with a known fault) and the real traces with findings."""
    root = tmp_path_factory.mktemp("fleet")
    paths = [
        write(root / "a.jsonl", "text", 1, 300),
        write(root / "b.jsonl", "voice", 2, 40, ("unanswered-call",)),
        write(root / "c.jsonl", "text", 3, 200, ("unanswered-call",)),
        write(root / "d.jsonl", "voice", 4, 30),
    ]
    return paths + sorted(str(p) for p in REAL.glob("*.jsonl"))


def comparable(reports: list[TraceReport]) -> list[tuple[object, ...]]:
    return [(r.path, r.events, r.connections, r.findings, r.problems, r.by_dir, r.unreadable) for r in reports]


def test_two_jobs_give_the_reports_of_one_in_input_order(fleet: list[str]) -> None:
    paths = list(reversed(fleet))
    one = parallel.analyze_local(paths, Config(), RULES, MAX, jobs=1)
    two = parallel.analyze_local(paths, Config(), RULES, MAX, jobs=2)
    assert [r.path for r in two] == paths
    assert comparable(two) == comparable(one)
    assert sum(len(r.findings) for r in one) >= 4  # the faults and the real races are found
    assert any(f.rule == "RT103" for f in one[paths.index(fleet[1])].findings)


def test_a_failing_trace_does_not_stop_the_others(tmp_path: Path, fleet: list[str]) -> None:
    boom = tmp_path / "boom.jsonl"
    boom.write_text(
        '{"t":0.0,"dir":"meta","conn":1,"event":{"type":"connection.opened","path":"/boom"}}\n'
        '{"t":0.1,"dir":"server","conn":1,"event":{"type":"session.created","session":{}}}\n'
    )
    missing = str(tmp_path / "missing.jsonl")
    paths = [fleet[0], str(boom), missing, fleet[1]]
    reports = parallel.analyze_local(paths, Config(), (*RULES, Boom), MAX, jobs=2)
    assert [r.path for r in reports] == paths
    # The rule that raised is reported with its line and drops out; the trace itself is read (issue 16, class 2).
    assert reports[1].unreadable is None and reports[1].failed_rules == ("RT900",) and reports[1].events == 2
    assert "RT900" in reports[1].problems[0].message and "RuntimeError: boom" in reports[1].problems[0].message
    assert reports[2].unreadable is not None and "missing.jsonl" in reports[2].unreadable
    good = parallel.analyze_local([fleet[0], fleet[1]], Config(), RULES, MAX, jobs=1)
    assert comparable([reports[0], reports[3]]) == comparable(good)


def test_a_dead_worker_loses_only_its_trace(tmp_path: Path, fleet: list[str]) -> None:
    die = tmp_path / "die.jsonl"
    die.write_text('{"t":0.0,"dir":"meta","conn":1,"event":{"type":"connection.opened","path":"/die"}}\n')
    paths = [fleet[0], str(die), fleet[2], fleet[3]]
    reports = parallel.analyze_local(paths, Config(), (*RULES, Boom), MAX, jobs=2)
    assert [r.path for r in reports] == paths
    assert reports[1].unreadable is not None and "died" in reports[1].unreadable
    assert all(r.unreadable is None and r.events > 0 for k, r in enumerate(reports) if k != 1)


def split_and_whole(path: str | Path, share: float) -> tuple[TraceReport | None, TraceReport]:
    split = parallel.analyze_split(str(path), Config(), RULES, MAX, share=share, min_bytes=0)
    return split, analyze_path(path, Config(), RULES, max_line_bytes=MAX)


def line_shares(path: Path, most: int) -> list[float]:
    """Shares of the file that cut it just before each line (at most `most` of them, spread evenly)."""
    data = path.read_bytes()
    starts = [k + 1 for k, byte in enumerate(data[:-1]) if byte == 0x0A]
    step = max(1, len(starts) // most)
    return [(s - 1) / len(data) for s in starts[::step]]


@pytest.mark.parametrize("path", sorted(REAL.glob("*.jsonl")), ids=lambda p: p.name)
def test_a_trace_read_by_two_processes_gives_the_report_of_one(path: Path) -> None:
    for share in line_shares(path, 25):
        split, whole = split_and_whole(path, share)
        assert split is not None and split == whole, share


def test_every_golden_sample_split_in_three_places(tmp_path: Path) -> None:
    samples = sorted((ROOT / "sample_traces" / "rules").rglob("*.jsonl"))
    assert len(samples) > 50
    for path in samples:
        for share in (0.2, 0.5, 0.8):
            split, whole = split_and_whole(path, share)
            if split is not None:  # None: no line starts after that point
                assert split == whole, (path, share)


def test_split_bad_lines_keep_their_numbers_and_a_bom_is_skipped_once(tmp_path: Path) -> None:
    good = (REAL / "tool-output-race.livekit-1.8.8.jsonl").read_bytes().splitlines(keepends=True)
    lines = [b"\xef\xbb\xbf" + good[0], *good[1:20], b"{not json\n", b"[1]\n", b"\n", *good[20:], b'{"t": 1.0, "dir"']
    trace = tmp_path / "bad.jsonl"
    trace.write_bytes(b"".join(lines))
    for share in line_shares(trace, 40):
        split, whole = split_and_whole(trace, share)
        assert split is not None and split == whole, share
        assert [p.line for p in whole.problems] == [21, 22, len(lines)]


def test_split_oversized_and_undecodable_lines_are_reported_where_they_are(tmp_path: Path) -> None:
    good = (REAL / "tool-output-race.livekit-1.8.8.jsonl").read_bytes().splitlines(keepends=True)
    huge = b'{"t": 1.0, "dir": "client", "conn": 1, "event": {"type": "x", "pad": "' + b"a" * 5000 + b'"}}\n'
    bad_utf8 = good[30].replace(b"item", b"it\xffem", 1)
    lines = [*good[:10], huge, *good[10:30], bad_utf8, *good[31:], huge.rstrip(b"\n")]
    trace = tmp_path / "odd.jsonl"
    trace.write_bytes(b"".join(lines))
    for share in line_shares(trace, 30):
        split = parallel.analyze_split(str(trace), Config(), RULES, 2000, share=share, min_bytes=0)
        whole = analyze_path(trace, Config(), RULES, max_line_bytes=2000)
        assert split is not None and split == whole, share
    assert [p.line for p in whole.problems] == [11, 32, len(lines)]


def test_split_falls_back_to_one_reader_when_the_part_is_not_independent(tmp_path: Path) -> None:
    """A bare event (no `conn`, no `t`) takes both from the lines before it: the second part cannot be read alone."""
    good = (REAL / "tool-output-race.livekit-1.8.8.jsonl").read_bytes().splitlines(keepends=True)
    trace = tmp_path / "mixed.jsonl"
    trace.write_bytes(b"".join([*good, b'{"type":"response.output_text.delta","delta":"x"}\n']))
    assert parallel.analyze_split(str(trace), Config(), RULES, MAX, share=0.5, min_bytes=0) is None
    junk = tmp_path / "junk-first.jsonl"  # no record before the cut: the header question is open
    junk.write_bytes(b"x\n" * 40_000 + b'{"rtrace": 1}\n' + b"".join(good))
    assert parallel.analyze_split(str(junk), Config(), RULES, MAX, share=0.3, min_bytes=0) is None
    for path in (trace, junk):
        assert parallel.analyze_file(str(path), Config(), RULES, MAX, jobs=2) == analyze_path(path, max_line_bytes=MAX)


def test_split_is_not_tried_on_small_utf16_or_special_files(tmp_path: Path) -> None:
    race = REAL / "tool-output-race.livekit-1.8.8.jsonl"
    assert parallel.analyze_split(str(race), Config(), RULES, MAX) is None  # under SPLIT_MIN_BYTES
    utf16 = tmp_path / "u16.jsonl"
    utf16.write_bytes(race.read_text().encode("utf-16"))
    assert parallel.analyze_split(str(utf16), Config(), RULES, MAX, min_bytes=0) is None
    assert parallel.analyze_split("-", Config(), RULES, MAX, min_bytes=0) is None
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)  # no writer: opening it would block
    assert parallel.analyze_split(str(fifo), Config(), RULES, MAX, min_bytes=0) is None
    assert parallel.analyze_split(str(tmp_path / "missing.jsonl"), Config(), RULES, MAX, min_bytes=0) is None


def test_a_failing_child_leaves_the_whole_trace_to_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    race = REAL / "tool-output-race.livekit-1.8.8.jsonl"

    def crash(*args: object) -> int:
        raise MemoryError

    monkeypatch.setattr(parallel, "_digest_part", crash)
    assert parallel.analyze_split(str(race), Config(), RULES, MAX, share=0.5, min_bytes=0) is None
    monkeypatch.setattr(parallel, "SPLIT_MIN_BYTES", 0)
    assert parallel.analyze_file(str(race), Config(), RULES, MAX, jobs=2) == analyze_path(race)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_no_process_to_spare_means_one_reader_and_no_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    race = str(REAL / "tool-output-race.livekit-1.8.8.jsonl")
    before = open_fds()

    def no_fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    assert parallel.analyze_split(race, Config(), RULES, MAX, share=0.5, min_bytes=0) is None
    assert open_fds() == before


def test_an_interrupted_fold_stops_the_child_and_leaks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    race = str(REAL / "tool-output-race.livekit-1.8.8.jsonl")
    before = open_fds()

    def interrupted(self: object, rows: object) -> None:
        raise KeyboardInterrupt

    children: list[int] = []
    fork = os.fork

    def recorded_fork() -> int:
        pid = fork()
        if pid:
            children.append(pid)
        return pid

    monkeypatch.setattr(parallel.Fold, "rows", interrupted)
    monkeypatch.setattr(os, "fork", recorded_fork)
    with pytest.raises(KeyboardInterrupt):
        parallel.analyze_split(race, Config(), RULES, MAX, share=0.5, min_bytes=0)
    assert open_fds() == before and len(children) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(children[0], os.WNOHANG)  # the child was reaped


def test_the_cli_splits_a_large_trace_by_default_and_reports_the_same(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rtrace.cli import main

    race = str(REAL / "tool-output-race.livekit-1.8.8.jsonl")
    split_reports: list[TraceReport | None] = []
    split = parallel.analyze_split

    def recorded(*args: Any, **kw: Any) -> TraceReport | None:
        split_reports.append(split(*args, **kw))
        return split_reports[-1]

    def run(*args: str) -> Any:
        assert main(["analyze", race, "-f", "json", *args]) == 1
        return json.loads(capsys.readouterr().out)

    monkeypatch.setattr(parallel, "SPLIT_MIN_BYTES", 0)  # this trace is small: split it anyway
    monkeypatch.setattr(parallel, "analyze_split", recorded)
    default = run()
    assert len(split_reports) == 1 and split_reports[0] is not None  # read by two processes
    assert run("-j", "1") == default and len(split_reports) == 1  # -j 1: one process


def test_url_of_undoes_path_normalisation() -> None:
    assert parallel.url_of(Path("s3://bucket/day/*.jsonl")) == "s3://bucket/day/*.jsonl"
    assert parallel.url_of(Path("file:///tmp/x.jsonl")) == "file:///tmp/x.jsonl"
    assert parallel.url_of(Path("/tmp/x.jsonl")) == "/tmp/x.jsonl"
    assert parallel.url_of("-") == "-"


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RTRACE, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_cli_jobs_same_json_and_one_aggregate_table(tmp_path: Path, fleet: list[str]) -> None:
    for p in fleet:
        (tmp_path / Path(p).name).write_bytes(Path(p).read_bytes())
    one = cli("analyze", str(tmp_path), "-f", "json")
    two = cli("analyze", str(tmp_path), "-j", "2", "-f", "json")
    assert one.returncode == two.returncode == 1, two.stderr
    assert json.loads(two.stdout) == json.loads(one.stdout)
    text = cli("analyze", str(tmp_path), "-j", "2", "--fail-on", "never").stdout
    assert text.count("findings by rule over") == 1
    assert "RT103 unanswered-function-call" in text and f"/{len(fleet)}" in text
    assert all(Path(p).name in text for p in fleet)  # every per-trace report is there
    assert cli("analyze", str(tmp_path), "-j", "-1").returncode == 2


def test_cli_dask_engine_needs_a_scheduler(fleet: list[str]) -> None:
    proc = cli("analyze", fleet[0], "--engine", "dask")
    assert proc.returncode == 2 and "--scheduler" in proc.stderr


@pytest.mark.dask
def test_dask_engine_on_a_local_cluster_matches_jobs(tmp_path: Path, fleet: list[str]) -> None:
    distributed = pytest.importorskip("distributed")
    for p in fleet:
        (tmp_path / Path(p).name).write_bytes(Path(p).read_bytes())
    local = cli("analyze", str(tmp_path), "-j", "2", "-f", "json")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        on_dask = cli(
            "analyze", str(tmp_path), "--engine", "dask", "--scheduler", cluster.scheduler_address, "-f", "json"
        )
        urls = cli(
            "analyze",
            tmp_path.as_uri() + "/",
            "--engine",
            "dask",
            "--scheduler",
            cluster.scheduler_address,
            "-f",
            "json",
        )
    assert on_dask.returncode == local.returncode == 1, on_dask.stderr
    assert json.loads(on_dask.stdout) == json.loads(local.stdout)
    # Through fsspec (file:// URLs): the same reports, the paths written as URLs.
    by_url = json.loads(urls.stdout)
    for trace in by_url["traces"]:
        trace["path"] = trace["path"].removeprefix("file://")
    assert by_url == json.loads(local.stdout)
