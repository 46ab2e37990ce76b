"""The Dask engine's cost per trace (issue 15): a fleet of small traces on a local cluster against `-j 1`.

Writes `--traces` small text sessions (`bench.generate.text_session` of `--seconds` each, about 240 lines and
64 KB at 10 s; cached under bench/data/dask-small/), then times, best of `--repeat` rounds, each a subprocess:

* `rtrace analyze DIR -j 1` (one process, no cluster);
* `rtrace analyze DIR --engine dask` on a local cluster of one worker process with one thread: the same work in
  one process plus everything the engine adds (connecting, scheduling, pickling reports back), so
  (dask - j1) / traces is the engine's cost per trace;
* the same on two worker processes, and `-j 2`, for the speedup.

The cluster runs in a helper process (`python -c`, started in a scratch directory) so that `--pythonpath` can
point the CLI, the scheduler and the workers at another checkout of rtrace (the code before a change). Every
command writes its JSON report to a file; all must agree. Prints one table; writes bench/out/dask.json.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench.generate import text_session
from bench.run import ROOT, RTRACE

DATA = ROOT / "bench" / "data" / "dask-small"
OUT = ROOT / "bench" / "out" / "dask.json"

_CLUSTER = """
import sys
from distributed import LocalCluster
cluster = LocalCluster(n_workers=int(sys.argv[1]), threads_per_worker=1, processes=True, host="127.0.0.1",
                       dashboard_address=None)
print(cluster.scheduler_address, flush=True)
sys.stdin.read()
cluster.close()
"""


def ensure_fleet(count: int, seconds: float, seed: int = 15) -> Path:
    """`count` small text sessions under DATA (rewritten when the parameters or the generator change)."""
    key = hashlib.sha256(
        orjson.dumps([count, seconds, seed]) + (ROOT / "bench" / "generate.py").read_bytes()
    ).hexdigest()[:16]
    stamp = DATA / "KEY"
    if stamp.exists() and stamp.read_text() == key:
        return DATA
    DATA.mkdir(parents=True, exist_ok=True)
    for old in DATA.glob("*.jsonl"):
        old.unlink()
    for k in range(count):
        with (DATA / f"t{k:05d}.jsonl").open("wb") as fp:
            text_session(fp, seed + k, seconds)
    stamp.write_text(key)
    return DATA


class Cluster:
    """A local Dask cluster in a helper process (its own sys.path: the scratch directory, then PYTHONPATH)."""

    def __init__(self, workers: int, env: dict[str, str], cwd: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CLUSTER, str(workers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            text=True,
        )
        assert self.proc.stdout is not None
        self.address = self.proc.stdout.readline().strip()
        if not self.address.startswith("tcp://"):
            self.close()
            raise RuntimeError("the local cluster did not start")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def timed(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each text session")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pythonpath", help="run rtrace from this checkout (CLI, scheduler and workers)")
    parser.add_argument("--json", type=Path, default=OUT)
    args = parser.parse_args(argv)
    fleet = ensure_fleet(args.traces, args.seconds)
    traces = sorted(fleet.glob("*.jsonl"))
    lines = sum(p.read_bytes().count(b"\n") for p in traces)
    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = os.path.abspath(args.pythonpath)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        base = [*RTRACE, "analyze", str(fleet), "-f", "json", "--fail-on", "never"]
        cmds: dict[str, list[str]] = {
            "j1": [*base, "-j", "1", "-o", str(out / "j1.json")],
            "j2": [*base, "-j", "2", "-o", str(out / "j2.json")],
        }
        clusters = {name: Cluster(n, env, tmp) for name, n in (("dask1", 1), ("dask2", 2))}
        try:
            for name, cluster in clusters.items():
                target = str(out / f"{name}.json")
                cmds[name] = [*base, "--engine", "dask", "--scheduler", cluster.address, "-o", target]
            best: dict[str, float] = {}
            for _ in range(args.repeat):
                for name, cmd in cmds.items():
                    best[name] = min(best.get(name, float("inf")), timed(cmd, env, tmp))
        finally:
            for cluster in clusters.values():
                cluster.close()
        reports = {name: orjson.loads((out / f"{name}.json").read_bytes()) for name in cmds}
    same = all(r == reports["j1"] for r in reports.values())
    per_trace_ms = (best["dask1"] - best["j1"]) / len(traces) * 1000
    results: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "pythonpath": args.pythonpath,
        "traces": len(traces),
        "lines": lines,
        "seconds": best,
        "per_trace_overhead_ms": per_trace_ms,
        "same_reports": same,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    print(
        f"{results['date']} on {results['machine']}; load {load_before[0]:.2f} before, "
        f"{results['load_after'][0]:.2f} after; best of {args.repeat}"
        + (f"; rtrace from {args.pythonpath}" if args.pythonpath else "")
    )
    print(f"{len(traces):,} traces, {lines:,} lines; every engine gave the same JSON report: {same}")
    print("| -j 1 | dask, 1 worker | dask, 2 workers | -j 2 | dask 1 worker / -j 1 | overhead per trace |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {best['j1']:.2f} s | {best['dask1']:.2f} s | {best['dask2']:.2f} s | {best['j2']:.2f} s | "
        f"{best['dask1'] / best['j1']:.2f}x | {per_trace_ms:.2f} ms |"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
