"""rtrace.parallel: -j N gives the reports of -j 1, in input order; one failing trace never takes the others down;
the Dask engine (a local 2-worker cluster) gives the same reports as -j."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from bench.generate import text_session, voice_call
from rtrace import parallel
from rtrace.analysis import TraceReport
from rtrace.detectors import RULES
from rtrace.detectors.base import Config, Finding, Rule
from rtrace.reducer import ConnOpened, Fact
from rtrace.state import TraceState

from .conftest import REAL, ROOT

RTRACE = [sys.executable, "-m", "rtrace.cli"]
MAX = 16 * 1024 * 1024


class Boom(Rule):
    """Test rule: fails on a connection whose path is /boom (an analysis bug in one trace)."""

    id = "RT900"
    slug = "boom"
    severity = "info"
    title = "test"
    fix = "test"
    facts = ("conn.opened",)

    def on_fact(self, fact: Fact, state: TraceState) -> Iterable[Finding] | None:
        assert isinstance(fact, ConnOpened)
        if fact.conn.path == "/boom":
            raise RuntimeError("boom")
        if fact.conn.path == "/die":
            os._exit(13)  # the worker process dies
        return None


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
    assert reports[1].unreadable is not None and "RuntimeError: boom" in reports[1].unreadable
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
