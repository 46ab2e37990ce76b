"""rtrace.engine.parallel: -j N gives the reports of -j 1, in input order; one failing trace never takes the others
down;
the Dask engine (a local 2-worker cluster) gives the same reports as -j."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
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


class Agrees:
    """A split's watch that never calls it off (`watch.Watch` looks at the machine's load, which no test sets)."""

    def __init__(self, child: int) -> None:
        self.child = child

    def alone(self) -> bool | None:
        return False


@pytest.fixture(autouse=True)
def _split_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "Watch", Agrees)


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


@pytest.mark.parametrize("jobs", [1, 2])
def test_progress_is_told_how_far_one_trace_is_read_and_as_each_trace_of_a_fleet_is_done(
    fleet: list[str], tmp_path: Path, jobs: int
) -> None:
    done: list[int] = []
    parallel.analyze_local(fleet, Config(), RULES, MAX, jobs=jobs, on_trace=lambda: done.append(1))
    assert len(done) == len(fleet)
    big = write(tmp_path / "big.jsonl", "voice", 5, 120)
    size = os.path.getsize(big)
    read: list[int] = []
    parallel.analyze_local([big], Config(), RULES, MAX, jobs=1, on_read=read.append)
    assert size > 3 * (1 << 18) and len(read) >= 3 and read == sorted(read) and read[-1] == size
    packed = tmp_path / "big.jsonl.gz"
    import gzip

    packed.write_bytes(gzip.compress(Path(big).read_bytes()))
    read = []
    parallel.analyze_local([str(packed)], Config(), RULES, MAX, jobs=1, on_read=read.append)
    assert read and read[-1] == os.path.getsize(packed)  # the compressed file's bytes, as the bar's total is


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
    # The rule that raised is reported with its line and drops out; the trace itself is read (one bad field never
    # discards a trace).
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
    monkeypatch.setattr(parallel, "SPLIT_MIN_LINE_BYTES", 0)  # and its lines are short
    monkeypatch.setattr(parallel, "free_cores", lambda: 2.0)  # on a machine with a core free
    monkeypatch.setattr(parallel, "analyze_split", recorded)
    default = run()
    assert len(split_reports) == 1 and split_reports[0] is not None  # read by two processes
    assert run("-j", "1") == default and len(split_reports) == 1  # -j 1: one process


def test_the_split_is_chosen_only_with_a_free_core_and_long_lines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The two-process read lost to one process whenever no core was free, and on traces of small events
    at any load; it is now chosen only where it can win (decided by counting, not by timing)."""
    audio = b'{"t":0.0,"dir":"server","conn":1,"event":{"type":"response.output_audio.delta","delta":"%s"}}\n' % (
        b"A" * 2000
    )
    small = b'{"t":0.0,"dir":"server","conn":1,"event":{"type":"response.output_text.delta","delta":"x"}}\n'
    long_lines, short_lines = tmp_path / "audio.jsonl", tmp_path / "text.jsonl"
    long_lines.write_bytes(audio * 200)
    short_lines.write_bytes(small * 4000)
    monkeypatch.setattr(parallel, "SPLIT_MIN_BYTES", 0)
    for free, path, pays in (
        (2.0, long_lines, True),
        (1.0, long_lines, True),
        (0.6, long_lines, False),  # load 1.4 on 2 cores: the second process would share a core
        (-3.0, long_lines, False),
        (2.0, short_lines, False),  # a fold of small events is serial: the split cannot win
    ):
        monkeypatch.setattr(parallel, "free_cores", lambda free=free: free)
        assert parallel.split_pays(str(path)) is pays, (free, path.name)
    monkeypatch.setattr(parallel, "free_cores", lambda: 2.0)
    assert not parallel.split_pays("-") and not parallel.split_pays(str(tmp_path / "missing.jsonl"))
    monkeypatch.setattr(parallel, "SPLIT_MIN_BYTES", 1 << 30)
    assert not parallel.split_pays(str(long_lines))  # small: one process
    free = parallel.free_cores()
    assert free <= len(os.sched_getaffinity(0))


def test_free_cores_are_what_runs_beside_this_process_now_not_the_minute_before() -> None:
    """The split is decided by the run queue sampled at start (`free_of`, a pure function of the samples): a
    neighbour busy in every sample takes its core, one that only passed by does not, and the load average (a
    minute behind) is used only where there is no run queue to read."""
    free_of = parallel.free_of
    assert free_of(2, [1, 1, 1, 1], 1.9) == 2  # idle now, however busy the last minute was
    assert free_of(2, [2, 3, 2, 2], 0.1) == 1  # one neighbour busy throughout, one passing by
    assert free_of(2, [3, 3, 4, 3], 0.1) == 0  # two busy neighbours (load 2): no core for a second process
    assert free_of(4, [6, 7, 6, 6], None) == -1
    assert free_of(2, [0], None) == 2  # a run queue read without this process in it counts nothing below zero
    assert free_of(2, [], 0.5) == 1.5  # no /proc/stat: the load average
    assert free_of(2, [], None) == 0  # neither: read alone
    for samples, pays in (([1, 1, 1, 1], True), ([2, 2, 2, 2], True), ([3, 3, 3, 3], False), ([3, 2, 3, 3], True)):
        assert (free_of(2, samples, None) >= parallel.SPLIT_FREE_CORES) is pays, samples
    if parallel.procs_running() is not None:  # Linux: counted here, this process included
        assert parallel.procs_running() >= 1  # type: ignore[operator]
        assert parallel.free_cores() <= len(os.sched_getaffinity(0))


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
    unwrapped = text.replace("\n", "")  # a long temporary path is wrapped at 120 columns
    assert all(Path(p).name in unwrapped for p in fleet)  # every per-trace report is there
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


# -- fleets: batching, storage options, fsspec URLs, a real S3 API (moto's server on 127.0.0.1) -----------------


def test_batches_keep_the_order_and_cover_every_trace_once() -> None:
    for sizes, threads in (([1] * 2000, 2), ([10, 1, 1, 1, 500, 1, 1], 1), ([5], 8), ([], 2), ([0, 0, 0], 1)):
        runs = parallel.batches(sizes, threads)
        assert [k for r in runs for k in r] == list(range(len(sizes)))
        assert all(len(r) for r in runs)
        assert len(runs) <= max(threads * parallel.TASKS_PER_THREAD, 1) or len(runs) == len(sizes)
    # 2,000 small traces on 2 threads: 8 tasks, not 2,000.
    assert len(parallel.batches([3000] * 2000, 2)) == 2 * parallel.TASKS_PER_THREAD
    # A large trace is a run of its own; many large traces make as many runs as their bytes need.
    runs = parallel.batches([100, 100, 10**9, 100, 100], 1)
    assert range(2, 3) in runs
    assert len(parallel.batches([parallel.BATCH_BYTES] * 50, 1)) == 50


def test_storage_options_from_json_and_pairs() -> None:
    from rtrace.cli import UsageError
    from rtrace.cli.common import storage_options_of

    got = storage_options_of('{"key": "a", "client_kwargs": {"region_name": "x"}}', ["key=b", "anon=false", "x=1=2"])
    assert got == {"key": "b", "client_kwargs": {"region_name": "x"}, "anon": False, "x": "1=2"}
    assert storage_options_of(None, None) == {}
    for text, pairs in (("{nope", None), ("[1]", None), (None, ["sekrit-value"]), (None, ["=v"])):
        with pytest.raises(UsageError) as e:
            storage_options_of(text, pairs)
        assert "sekrit" not in str(e.value)


def test_a_fleet_where_every_trace_failed_never_exits_0(tmp_path: Path) -> None:
    for k in range(3):
        (tmp_path / f"bad-{k}.jsonl").write_bytes(b"\x00\xff garbage\n")
    assert cli("analyze", str(tmp_path), "-j", "2").returncode == 3
    assert cli("analyze", str(tmp_path), "-j", "1", "-f", "json").returncode == 3
    nothing = cli("analyze", tmp_path.as_uri() + "/none-*.jsonl")
    assert nothing.returncode == 3 and "no trace there" in nothing.stderr, nothing.stderr
    assert "Traceback" not in nothing.stderr


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


#: No credentials or endpoint from the machine: only what a test passes (and no lookup of a metadata service).
AWS_ISOLATED = {
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": "/nonexistent/rtrace-test",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/rtrace-test",
}


@pytest.fixture(scope="module")
def s3(fleet: list[str]) -> Iterator[dict[str, Any]]:
    """A real S3 API on 127.0.0.1 (moto's server mode, in a thread) holding the fleet under s3://rtrace-fleet/day/."""
    moto_server = pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    import boto3

    with pytest.MonkeyPatch.context() as mp:
        for name in [k for k in os.environ if k.startswith("AWS_")]:
            mp.delenv(name)
        for name, value in AWS_ISOLATED.items():
            mp.setenv(name, value)
        port = _free_port()
        server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        try:
            endpoint = f"http://127.0.0.1:{port}"
            client = boto3.client(
                "s3",
                endpoint_url=endpoint,
                aws_access_key_id="rtrace-test",
                aws_secret_access_key="rtrace-test-secret",
                region_name="us-east-1",
            )
            client.create_bucket(Bucket="rtrace-fleet")
            for p in fleet:
                client.put_object(Bucket="rtrace-fleet", Key=f"day/{Path(p).name}", Body=Path(p).read_bytes())
            client.put_object(Bucket="rtrace-fleet", Key="day/README.txt", Body=b"not a trace")
            options = {"key": "rtrace-test", "secret": "rtrace-test-secret", "endpoint_url": endpoint}
            yield {"endpoint": endpoint, "options": options, "port": port}
        finally:
            server.stop()


def s3_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | AWS_ISOLATED
    return subprocess.run([*RTRACE, *args], capture_output=True, text=True, timeout=180, cwd=ROOT, env=env)


def as_local(report: dict[str, Any], prefix: str) -> dict[str, Any]:
    for trace in report["traces"]:
        trace["path"] = Path(trace["path"].removeprefix(prefix)).name
    return report


def local_fleet_report(fleet: list[str], tmp_path: Path) -> dict[str, Any]:
    for p in fleet:
        (tmp_path / Path(p).name).write_bytes(Path(p).read_bytes())
    local = cli("analyze", str(tmp_path), "-f", "json")
    assert local.returncode == 1, local.stderr
    return as_local(json.loads(local.stdout), str(tmp_path))


def test_s3_urls_with_the_local_engine(s3: dict[str, Any], fleet: list[str], tmp_path: Path) -> None:
    """`rtrace analyze s3://...` without Dask: the directory's *.jsonl (not the README), in one process and in a
    pool (each worker opens its URL with the options), options as JSON or KEY=VALUE."""
    want = local_fleet_report(fleet, tmp_path)
    pairs = [f"--storage-option={k}={v}" for k, v in s3["options"].items()]
    one = s3_cli("analyze", "s3://rtrace-fleet/day/", *pairs, "-j", "1", "-f", "json")
    assert one.returncode == 1, one.stderr
    assert as_local(json.loads(one.stdout), "s3://rtrace-fleet/day/") == want
    two = s3_cli(
        "analyze", "s3://rtrace-fleet/day/*.jsonl", "--storage-options", json.dumps(s3["options"]), "-j", "2",
        "-f", "json",
    )  # fmt: skip
    assert two.returncode == 1, two.stderr
    assert as_local(json.loads(two.stdout), "s3://rtrace-fleet/day/") == want
    assert s3["options"]["secret"] not in one.stdout + one.stderr + two.stdout + two.stderr


def test_s3_without_credentials_or_endpoint_is_exit_3(s3: dict[str, Any]) -> None:
    endpoint = f"--storage-option=endpoint_url={s3['endpoint']}"
    no_creds = s3_cli("analyze", "s3://rtrace-fleet/day/", endpoint)
    closed = f"http://127.0.0.1:{_free_port()}"
    once = {"config_kwargs": {"retries": {"max_attempts": 1}}}  # give up at once (botocore backs off)
    no_endpoint = s3_cli(
        "analyze", "s3://rtrace-fleet/day/", "--storage-options",
        json.dumps({**s3["options"], **once, "endpoint_url": closed}),
    )  # fmt: skip
    no_bucket = s3_cli("analyze", "s3://no-such-bucket/day/", "--storage-options", json.dumps(s3["options"]))
    for proc, says in ((no_creds, "no credentials"), (no_endpoint, "cannot reach the storage endpoint"),
                       (no_bucket, "not found")):  # fmt: skip
        assert proc.returncode == 3, proc.stderr
        assert says in proc.stderr and "s3://" in proc.stderr
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
        assert s3["options"]["secret"] not in proc.stderr


@pytest.mark.dask
def test_s3_urls_on_a_dask_cluster(s3: dict[str, Any], fleet: list[str], tmp_path: Path) -> None:
    """Every worker (its own process, no AWS credentials in its environment) opens its URLs with the options the
    client was given; the reports are the local ones."""
    distributed = pytest.importorskip("distributed")
    want = local_fleet_report(fleet, tmp_path)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        args = ["--engine", "dask", "--scheduler", cluster.scheduler_address]
        got = s3_cli("analyze", "s3://rtrace-fleet/day/", "--storage-options", json.dumps(s3["options"]), *args,
                     "-f", "json")  # fmt: skip
        batched = cluster.scheduler.task_prefixes["analyze_batch"].state_counts
    assert got.returncode == 1, got.stderr
    assert as_local(json.loads(got.stdout), "s3://rtrace-fleet/day/") == want
    # Small traces go by the batch: 2 threads, at most 8 tasks for the whole fleet.
    assert 0 < batched["memory"] <= 2 * parallel.TASKS_PER_THREAD < len(fleet)


@pytest.mark.dask
def test_dask_a_trace_that_kills_its_worker_fails_alone(tmp_path: Path, fleet: list[str]) -> None:
    distributed = pytest.importorskip("distributed")
    import dask

    die = tmp_path / "die.jsonl"
    die.write_text('{"t":0.0,"dir":"meta","conn":1,"event":{"type":"connection.opened","path":"/die"}}\n')
    paths = [*fleet[:3], str(die), *fleet[3:6]]
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        reports = parallel.analyze_dask(paths, Config(), (*RULES, Boom), MAX, cluster.scheduler_address)
    assert [r.path for r in reports] == paths
    assert reports[3].unreadable is not None and "cluster" in reports[3].unreadable
    good = parallel.analyze_local([p for p in paths if p != str(die)], Config(), RULES, MAX, jobs=1)
    assert comparable([r for k, r in enumerate(reports) if k != 3]) == comparable(good)


def test_a_storage_option_the_backend_does_not_take_is_named() -> None:
    from rtrace.engine.parallel import storage_error

    e = TypeError("AioSession.__init__() got an unexpected keyword argument 'retries'")
    assert storage_error("s3://b/day/", e) == (
        "s3://b/day/: the s3:// backend has no storage option 'retries' (see its fsspec docs)"
    )


def test_a_compressed_trace_is_read_by_one_process_and_a_folder_of_them_is_a_fleet(tmp_path: Path) -> None:
    import gzip

    from rtrace.cli import main

    big = tmp_path / "big.jsonl"
    write(big, "text", 3, 600.0)
    packed = tmp_path / "fleet" / "big.jsonl.gz"
    packed.parent.mkdir()
    packed.write_bytes(gzip.compress(big.read_bytes(), 1))
    assert parallel.analyze_split(str(big), Config(), RULES, MAX, min_bytes=0) is not None
    assert parallel.analyze_split(str(packed), Config(), RULES, MAX, min_bytes=0) is None
    one = parallel.analyze_file(str(packed), Config(), RULES, MAX, jobs=2)
    plain = analyze_path(big)
    assert (one.events, len(one.findings), one.problem_count) == (plain.events, len(plain.findings), 0)
    (packed.parent / "notes.txt").write_text("not a trace")
    (packed.parent / "b.jsonl").write_bytes(big.read_bytes())
    out = tmp_path / "r.json"
    main(["analyze", str(packed.parent), "-j", "2", "--format", "json", "-o", str(out)])
    paths = [t["path"] for t in json.loads(out.read_text())["traces"]]
    assert paths == [str(packed.parent / "b.jsonl"), str(packed)]
    assert [url for url, _ in parallel.expand_urls([f"file://{packed.parent}"])] == [
        f"file://{packed.parent / 'b.jsonl'}",
        f"file://{packed}",
    ]


def test_free_cores_read_the_run_queue_once_and_the_load_average_only_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The decision on scripted run queues (no timing): one sample, this process counted in it; a busy machine is
    never slept on (a sleep waited for a core to wake on), nor an idle one (a later sample could only find more
    free). The load average (a minute behind) is read only where the run queue cannot be."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    read: list[int] = []

    def queue(*samples: int | None) -> Any:
        read.clear()
        left = iter(samples)

        def sample() -> int | None:
            read.append(1)
            return next(left)  # a second read would raise StopIteration

        return sample

    def no_load() -> float | None:
        raise AssertionError("the load average was read beside a run queue")

    for samples, free in (((1,), 2), ((2,), 1), ((3,), 0), ((4,), -1)):  # idle, one busy neighbour, two, three
        assert parallel.free_cores(queue(*samples), no_load) == free and len(read) == 1
    assert (parallel.free_cores(queue(3), no_load) >= parallel.SPLIT_FREE_CORES) is False  # load 2: one process
    assert (parallel.free_cores(queue(2), no_load) >= parallel.SPLIT_FREE_CORES) is True
    assert parallel.free_cores(queue(None), lambda: 0.5) == 1.5  # no /proc/stat: the load average
    assert parallel.free_cores(queue(None), lambda: None) == 0  # neither: read alone


def test_a_split_the_watch_calls_off_reads_on_alone_to_the_same_report(tmp_path: Path) -> None:
    """When the two processes turn out to share cores with others (`watch.Watch`), the child is killed and this
    process reads past the cut to the end: the report is the one-process report (a BOM and bad lines included,
    the verdict before the first block or at the cut), its marks are where its lines start (for excerpts), and no
    child is left behind."""
    good = (REAL / "tool-output-race.livekit-1.8.8.jsonl").read_bytes().splitlines(keepends=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join([b"\xef\xbb\xbf" + good[0], *good[1:20], b"{not json\n", b"[1]\n", *good[20:], b'{"t"']))
    told: list[int] = []
    for trace in (REAL / "tool-output-race.livekit-1.8.8.jsonl", bad):
        for share in (0.3, 0.7):
            for verdict_at in (1, 2):  # before the first block; at the cut (the read that would end the part)

                class CallsOff:
                    def __init__(self, child: int, at: int = verdict_at) -> None:
                        told.append(child)
                        self.asked, self.at = 0, at

                    def alone(self) -> bool | None:
                        self.asked += 1
                        return None if self.asked < self.at else True

                split = parallel.analyze_split(
                    str(trace), Config(), RULES, MAX, share=share, min_bytes=0, watch=CallsOff
                )
                one = analyze_path(trace)
                assert split == one, (trace.name, share, verdict_at)
                data = trace.read_bytes()
                starts = [0, *(k + 1 for k, byte in enumerate(data) if byte == 0x0A)]
                assert split.line_marks and all(starts[line - 1] == at for line, at in split.line_marks)
                with pytest.raises(ChildProcessError):
                    os.waitpid(told[-1], os.WNOHANG)  # killed and reaped



