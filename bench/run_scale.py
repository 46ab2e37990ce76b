"""The scaling suite (issue 15): every shape of `bench.scale` at 1x, 4x and 16x, and how its cost grows.

For each shape and size: the wall time of the rtrace command in a subprocess (`rtrace analyze -j 1`; `rtrace
report -o x.html` for `html-report`; `rtrace show --at N` for `show-at`), the orjson floor on the same file (a bare
`for line in f: orjson.loads(line)` loop in a subprocess; for `show-at`, on the N lines `--at` reads), the ratio
of the two, microseconds per line, the peak RSS of the rtrace process (`wait4`), and per shape the growth exponent
log(t16 / t4) / log(4). A run is killed at `--timeout` and shown as "> timeout"; a size after a timed-out one is
not run. Each figure is the best of `--repeat` runs (a run over `REPEAT_UNDER` seconds is not repeated).

The analysis runs with `--strict --fail-on info`, so its exit status also says whether the trace is clean (0: no
finding, no input problem). `html-report` and `show-at` run that analysis too, as a reference (of the prefix, for
`show-at`). On every other shape, at the sizes of `--report-sizes` (default 16x), `rtrace report -o x.html` is timed
too: the `vs analyze` column is the report's time over the analysis's (for `show-at`, show's over analyze's).

Each run's CPU seconds (user + system, `wait4`) are kept beside its wall time: the machine is shared, and the ratio
of CPU times moves far less with its load than the ratio of wall times. The `x floor (CPU)` column and the verdict
use the CPU ratio (issue 27), the `x floor (wall)` column is the wall ratio.

When the fold is compiled (setup.py, `rtrace._compiled`), the analysis at the sizes of `--source-sizes` (default 4x)
runs from source too (`RTRACE_PURE=1`, the pure path a machine without a compiler gets): the `from source` column is
its CPU ratio to the floor, and what the compiler took off. The verdict judges the rtrace as installed.

Issue 41's figures come in a second table from the same run (`issue_table`): beside each analysis, the typed
decoder's limit (msgspec decoding each line into a Struct of what a record needs, `bench.run.TYPED`, CPU), DuckDB's
count of the event types with `DUCKDB_THREADS` threads (wall, against rtrace's default mode, which may read with two
processes), and for the shapes of `--loaded-shapes` the default mode, `-j 1` and the floor again with `BUSY` busy
processes beside them (wall: what a user waits for on a loaded machine; the default mode against `-j 1` as the
median of the runs taken in turn, wall and CPU), each against its targets (`ISSUE41_RATIO`, `ISSUE41_RSS_MB`), and
for the shapes of `SHOW_AT_END`, `rtrace show --at` the trace's last line over the analysis of the trace (CPU).

Verdict per shape: `linear` when the exponent from 4x to 16x is at most 1.1, the 4x run (`JUDGED_SIZE`, the size
issue 27 states its targets at; the largest when 4x was not run) is within 3x the floor in CPU time and under
100 MB peak RSS, the HTML report is within 2x the analysis and `show --at` within 1.1x the analysis of its prefix
(both in CPU time, at the largest size), and every size measured is clean. The exit status is 1 if any shape fails,
so the suite can gate. Prints a table (each target beside its column); writes `bench/out/scale.json`.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import datetime
import functools
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from bench.generate import DEFAULT_OUT
from bench.run import DUCKDB, FLOOR, ROOT, RTRACE, TYPED, LoadSampler, has_module
from bench.scale import DATA, DEFAULT_SEED, SHAPES, SIZES, Case, case_from_json
from rtrace._compiled import PURE_ENV

OUT = ROOT / "bench" / "out" / "scale.json"
DEFAULT_TIMEOUT = 120.0
DEFAULT_REPEAT = 3
#: Runs longer than this many seconds are not repeated (the quadratic ones: precision does not matter there).
REPEAT_UNDER = 20.0
MAX_EXPONENT = 1.1
MAX_RATIO = 3.0
MAX_RSS_MB = 100.0
#: The size at which the ratio to the floor and the peak RSS are judged (issue 27: "<= 3x, <= 100 MB at 4S"; at 1x
#: start-up is most of a run); the largest measured when it was not.
JUDGED_SIZE = 4
#: `rtrace report -o x.html` over `rtrace analyze -j 1` of the same trace (issue 27: within 2x).
MAX_REPORT_RATIO = 2.0
#: `rtrace show --at N` over `rtrace analyze -j 1` of the N lines: no slower, give or take a shared machine's noise.
MAX_SHOW_RATIO = 1.1
#: The analysis shapes whose trace `rtrace show --at` its last line is timed too, against the analysis of the same
#: trace (issue 41: "`show --at` near the end"): pipelined-creates-ids is one conversation of 50,000 items at 4x, a
#: view of 100,000 lines (`show-at`'s own trace is a long session of few items).
SHOW_AT_END = ("pipelined-creates-ids",)


#: Issue 41's targets at `JUDGED_SIZE`: every analysis shape within this many times the floor (CPU), peak RSS at most
#: this; the audio call's default mode within the floor idle and with `BUSY` busy processes beside it; the event-heavy
#: default mode faster than DuckDB's count; `show --at` no slower than the analysis.
ISSUE41_RATIO = 2.0
ISSUE41_RSS_MB = 64.0
ISSUE41_AUDIO = 1.0
#: Busy processes beside the loaded runs (issue 41: "at load 2 (two busy processes beside it)").
BUSY = 2
#: DuckDB's threads for its count (issue 41: "DuckDB's count with 2 threads").
DUCKDB_THREADS = 2
DUCKDB_COUNT = DUCKDB.replace(
    "import sys, duckdb\n", f"import sys, duckdb\nduckdb.sql('SET threads TO {DUCKDB_THREADS}')\n", 1
)
#: A busy process: one core's worth of load.
_SPIN = "while True:\n    pass\n"


@contextlib.contextmanager
def busy(n: int) -> Iterator[None]:
    """`n` processes that each keep a core busy while the block runs (killed after, by their own handles)."""
    spinners = [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(n)]
    try:
        time.sleep(0.2)  # running before the first measured command starts
        yield
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()


def timed(cmd: list[str], timeout: float | None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `cmd` (output discarded; `env` added to the environment); wall seconds, peak RSS in MB and exit status
    from `wait4`. Killed after `timeout` seconds: then `timed_out` is set and `wall_s` is the time it ran."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env={**os.environ, **(env or {})}
    )
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        proc.kill()

    timer = threading.Timer(timeout, kill) if timeout else None
    if timer is not None:
        timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        if timer is not None:
            timer.cancel()
    elapsed = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "wall_s": elapsed,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024,
        "exit": proc.returncode,
        "timed_out": killed.is_set(),
    }


def best(cmd: list[str], repeat: int, timeout: float | None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The fastest of up to `repeat` runs (stops repeating after a slow or timed-out run); RSS is the largest."""
    runs = []
    for _ in range(repeat):
        run = timed(cmd, timeout, env)
        runs.append(run)
        if run["timed_out"] or run["wall_s"] > REPEAT_UNDER:
            break
    fastest = min(runs, key=lambda r: (r["timed_out"], r["wall_s"]))
    cpu = min(r["cpu_s"] for r in runs if r["timed_out"] == fastest["timed_out"])
    return {**fastest, "cpu_s": cpu, "rss_mb": max(r["rss_mb"] for r in runs), "runs": len(runs)}


def commands(case: Case, tmp: Path) -> tuple[list[str], list[str] | None]:
    """The measured command of a case, and the analysis run as a reference (None: the measured command is it)."""
    kind = SHAPES[case.shape].kind
    analyze = [*RTRACE, "analyze", str(case.floor_path), "-j", "1", "--strict", "--fail-on", "info"]
    if kind == "analyze":
        return analyze, None
    if kind == "report":
        return [*RTRACE, "report", str(case.path), "-o", str(tmp / "report.html")], analyze
    assert kind == "show-at" and case.at is not None
    return [*RTRACE, "show", str(case.path), "--at", str(case.at)], analyze


def compiled() -> bool:
    """Whether the rtrace that is measured runs its compiled fold (`rtrace._compiled`), asked of a child process."""
    ask = "import rtrace._compiled as c; print(c.compiled())"
    done = subprocess.run([sys.executable, "-c", ask], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip() == "True"


@functools.cache
def _has(module: str) -> bool:
    """Whether the interpreter that runs the baselines has `module` (asked once per run)."""
    return has_module(module)


def baselines(case: Case, repeat: int, timeout: float, loaded: bool) -> dict[str, Any]:
    """Issue 41's figures of one size of an analysis shape (see the module's docstring): the default mode against
    DuckDB's count (wall), the analysis against the typed decoder (CPU), and with `loaded`, the default mode, `-j 1`
    and the floor with `BUSY` busy processes beside them (wall, each the best of `repeat` runs in turn)."""
    path = str(case.floor_path)
    default = [*RTRACE, "analyze", path, "--strict", "--fail-on", "info"]
    out: dict[str, Any] = {"default_s": best(default, repeat, timeout)["wall_s"]}
    if _has("duckdb"):
        out["duckdb_s"] = best([sys.executable, "-c", DUCKDB_COUNT, path], repeat, timeout)["wall_s"]
        out["vs_duckdb"] = out["default_s"] / out["duckdb_s"]
    if _has("msgspec"):
        out["typed_cpu_s"] = best([sys.executable, "-c", TYPED, path], repeat, timeout)["cpu_s"]
    if loaded:
        cmds = {
            "default": default,
            "one": [*RTRACE, "analyze", path, "-j", "1"],
            "floor": [sys.executable, "-c", FLOOR, path],
        }
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in cmds}
        with busy(BUSY):
            out["load_busy"] = os.getloadavg()[0]
            for _ in range(repeat):
                for name, cmd in cmds.items():
                    runs[name].append(timed(cmd, timeout))
        for name, done in runs.items():
            out[f"loaded_{name}_s"] = min(r["wall_s"] for r in done)
        # The default mode against `-j 1` run by run (each pair ran in turn, under the same load): the median ratio,
        # of wall and of CPU time (more CPU: the split ran). A best against a best compares two moments of a machine
        # whose load others move too.
        pairs = list(zip(runs["default"], runs["one"], strict=True))
        out["loaded_vs_one"] = statistics.median(d["wall_s"] / o["wall_s"] for d, o in pairs)
        out["loaded_vs_one_cpu"] = statistics.median(d["cpu_s"] / max(o["cpu_s"], 1e-9) for d, o in pairs)
    return out


def measure(
    case: Case,
    repeat: int,
    timeout: float,
    tmp: Path,
    with_report: bool = False,
    with_source: bool = False,
    loaded: bool = False,
) -> dict[str, Any]:
    """One size of one shape; `with_source`: the analysis run from source (`RTRACE_PURE=1`) too; `loaded`: the
    default mode under load too (`baselines`)."""
    cmd, reference = commands(case, tmp)
    found = best(cmd, repeat, timeout)
    floor = best([sys.executable, "-c", FLOOR, str(case.floor_path)], repeat, None)
    row: dict[str, Any] = {
        "size": case.size,
        "n": case.n,
        "lines": case.lines,
        "mb": case.floor_path.stat().st_size / 1e6,
        "rtrace_s": found["wall_s"],
        "timed_out": found["timed_out"],
        "exit": found["exit"],
        "runs": found["runs"],
        "rss_mb": found["rss_mb"],
        "floor_s": floor["wall_s"],
        "cpu_s": found["cpu_s"],
        "floor_cpu_s": floor["cpu_s"],
        "reference_s": None,
        "reference_timed_out": False,
    }
    if case.at is not None:
        row["at"] = case.at
    check = found
    if reference is not None:
        ref = best(reference, repeat, timeout)
        row["reference_s"] = ref["wall_s"]
        row["reference_cpu_s"] = ref["cpu_s"]
        row["reference_timed_out"] = ref["timed_out"]
        check = ref
        if found["exit"] != 0 and not found["timed_out"]:
            row["clean"] = False  # the report or show itself failed
    if "clean" not in row:
        row["clean"] = None if check["timed_out"] else check["exit"] == 0
    row["analysis_exit"] = None if check["timed_out"] else check["exit"]
    kind = SHAPES[case.shape].kind
    if kind == "analyze" and with_report and not found["timed_out"]:
        report = best([*RTRACE, "report", str(case.path), "-o", str(tmp / "report.html")], repeat, timeout)
        row["report_s"], row["report_timed_out"] = report["wall_s"], report["timed_out"]
        row["report_rss_mb"] = report["rss_mb"]
        row["vs_analyze"] = report["wall_s"] / found["wall_s"]
        row["cpu_vs_analyze"] = report["cpu_s"] / found["cpu_s"]
    elif kind != "analyze" and row["reference_s"] and not row["reference_timed_out"]:
        row["vs_analyze"] = row["rtrace_s"] / row["reference_s"]
        row["cpu_vs_analyze"] = row["cpu_s"] / row["reference_cpu_s"]
    if kind == "analyze" and case.shape in SHOW_AT_END and not found["timed_out"]:
        at_end = best([*RTRACE, "show", str(case.path), "--at", str(case.lines)], repeat, timeout)
        row["show_end_cpu_s"], row["show_end_timed_out"] = at_end["cpu_s"], at_end["timed_out"]
        row["show_end_vs_analyze"] = at_end["cpu_s"] / found["cpu_s"]
    if with_source and kind == "analyze" and not found["timed_out"]:
        source = best(cmd, repeat, timeout, {PURE_ENV: "1"})
        row["source_cpu_s"], row["source_timed_out"] = source["cpu_s"], source["timed_out"]
        row["source_cpu_ratio"] = source["cpu_s"] / row["floor_cpu_s"]
    if kind == "analyze" and not found["timed_out"]:
        row.update(baselines(case, repeat, timeout, loaded))
        if row.get("typed_cpu_s"):
            row["cpu_vs_typed"] = row["cpu_s"] / row["typed_cpu_s"]
    row["ratio"] = row["rtrace_s"] / row["floor_s"]
    row["cpu_ratio"] = row["cpu_s"] / row["floor_cpu_s"]
    row["us_per_line"] = row["rtrace_s"] / max(case.lines, 1) * 1e6
    return row


def judged_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The row whose ratio to the floor and peak RSS are judged: `JUDGED_SIZE`, else the largest size."""
    for r in rows:
        if r["size"] == JUDGED_SIZE:
            return r
    return max(rows, key=lambda r: r["size"])


def ratio_of(row: dict[str, Any]) -> float:
    """The ratio to the floor a row is judged by: of CPU seconds (rtrace's over the floor's, each a subprocess; what
    a shared machine's load moves least), or of wall time in results that have no CPU figures."""
    cpu: float | None = row.get("cpu_ratio")
    return float(row["ratio"]) if cpu is None else cpu


def vs_analyze_of(row: dict[str, Any]) -> float | None:
    """The report's (or show's) time over the analysis's, of CPU seconds when measured, else of wall time."""
    cpu: float | None = row.get("cpu_vs_analyze")
    return row.get("vs_analyze") if cpu is None else cpu


def judge(rows: list[dict[str, Any]], timeout: float, kind: str = "analyze") -> dict[str, Any]:
    """Exponent between 4x and 16x (a lower bound when 16x timed out), and the verdict."""
    by_size = {r["size"]: r for r in rows}
    out: dict[str, Any] = {"exponent": None, "exponent_is_bound": False, "failures": []}
    lo, hi = by_size.get(4), by_size.get(16)
    if lo is not None and hi is not None and not lo["timed_out"] and not hi.get("skipped"):
        out["exponent"] = math.log(hi["rtrace_s"] / lo["rtrace_s"]) / math.log(4)
        out["exponent_is_bound"] = hi["timed_out"]
    elif by_size.get(1) is not None and lo is not None and not by_size[1]["timed_out"] and lo["timed_out"]:
        out["exponent"] = math.log(lo["rtrace_s"] / by_size[1]["rtrace_s"]) / math.log(4)
        out["exponent_is_bound"] = True
        out["exponent_span"] = "1x-4x"
    failures = out["failures"]
    if out["exponent"] is None or out["exponent_is_bound"] or out["exponent"] > MAX_EXPONENT:
        exp = out["exponent"]
        bound = "> " if out["exponent_is_bound"] else ""
        failures.append("not linear" if exp is None else f"exponent {bound}{exp:.2f}")
    top = max(rows, key=lambda r: r["size"])
    judged = judged_row(rows)
    out["judged_size"] = judged["size"]
    if top.get("skipped"):
        failures.append(f"{top['size']}x not run")
    elif top["timed_out"]:
        failures.append(f"{top['size']}x > {timeout:.0f} s")
    if judged is not top and not judged.get("skipped") and judged["timed_out"]:
        failures.append(f"{judged['size']}x > {timeout:.0f} s")
    if not judged.get("skipped") and not judged["timed_out"] and kind != "report":
        ratio = ratio_of(judged)
        if ratio > MAX_RATIO:
            failures.append(f"{ratio:.2f}x floor" if ratio < 10 else f"{ratio:.1f}x floor")
    limit = MAX_SHOW_RATIO if kind == "show-at" else MAX_REPORT_RATIO
    for r in [top] if not top.get("skipped") else []:  # as for the floor: at 1x, start-up is most of the time
        vs = vs_analyze_of(r)
        if r.get("report_timed_out"):
            failures.append(f"report at {r['size']}x > {timeout:.0f} s")
        elif vs is not None and vs > limit:
            what = "show" if kind == "show-at" else "report"
            failures.append(f"{what} {vs:.2f}x analyze at {r['size']}x")
    if kind == "report" and not top.get("skipped") and not top["timed_out"] and top.get("vs_analyze") is None:
        failures.append("no analysis to compare with")
    if not judged.get("skipped") and judged["rss_mb"] >= MAX_RSS_MB:
        failures.append(f"{'>= ' if judged['timed_out'] else ''}{judged['rss_mb']:.0f} MB at {judged['size']}x")
    dirty = [f"{r['size']}x" for r in rows if r.get("clean") is False]
    if dirty:
        failures.append(f"not clean at {', '.join(dirty)}")
    out["verdict"] = "linear" if not failures else "FAIL: " + ", ".join(failures)
    return out


def prepare(name: str, size: int, seed: int, data: Path) -> Case:
    """`scale.ensure` in a child process. The generators grow this process, and a child's peak RSS as `wait4`
    reports it starts from its parent's (the high-water mark of the address space it forked from), so this
    process stays small for the RSS column to be the rtrace command's own."""
    cmd = [sys.executable, "-m", "bench.scale", "--shapes", name, "--sizes", str(size), "--seed", str(seed)]
    proc = subprocess.run([*cmd, "--data", str(data), "--json"], cwd=ROOT, stdout=subprocess.PIPE, check=True)
    return case_from_json(proc.stdout.decode().strip().splitlines()[-1])


def run_shape(
    name: str,
    sizes: list[int],
    repeat: int,
    timeout: float,
    seed: int,
    data: Path,
    report_sizes: set[int],
    source_sizes: set[int] = frozenset(),
    loaded: bool = False,
) -> dict[str, Any]:
    shape = SHAPES[name]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            if rows and (rows[-1]["timed_out"] or rows[-1].get("skipped")):
                rows.append({"size": size, "n": shape.base * size, "skipped": True})
                continue
            case = prepare(name, size, seed, data)
            print(f"  {name} {size}x ({case.lines:,} lines) ...", file=sys.stderr, flush=True)
            rows.append(measure(case, repeat, timeout, Path(tmp), size in report_sizes, size in source_sizes, loaded))
    return {"shape": name, "unit": shape.unit, "kind": shape.kind, "base": shape.base, "sizes": rows}


#: `bench.generate`'s workloads (the 60-minute call, the 20-hour text session), measured whole by `--headline`.
HEADLINE = ("audio-call", "event-heavy")


def headline(repeat: int, timeout: float, loaded: set[str], data: Path = DEFAULT_OUT) -> list[dict[str, Any]]:
    """The analysis of `bench.generate`'s workloads (generated first when missing, in a child process) with issue
    41's figures beside it, as one-row shapes of size 0 (the whole workload)."""
    subprocess.run(
        [sys.executable, "-m", "bench.generate", "--out", str(data)], cwd=ROOT, check=True, capture_output=True
    )
    out = []
    for name in HEADLINE:
        path = data / f"{name}.jsonl"
        with path.open("rb") as f:
            lines = sum(1 for _ in f)
        print(f"  {name} (bench.generate, {lines:,} lines) ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            row = measure(Case(name, 0, lines, path, path, lines), repeat, timeout, Path(tmp), loaded=name in loaded)
        out.append({"shape": f"{name} (bench.generate)", "unit": "lines", "kind": "analyze", "sizes": [row]})
    return out


# -- output --------------------------------------------------------------------------------------------------


def _time(r: dict[str, Any], key: str = "rtrace_s", timed_out: str = "timed_out") -> str:
    if r[timed_out]:
        return f"> {r[key]:.0f} s"
    return f"{r[key]:.2f} s" if r[key] < 100 else f"{r[key]:.0f} s"


def table(results: dict[str, Any]) -> str:
    columns = ["shape", "size", "n", "lines", "MB", "rtrace", "floor", "x floor (wall)"]
    columns += [f"x floor (CPU; <= {MAX_RATIO:g}x at {JUDGED_SIZE}x)", "us/line"]
    columns += ["from source (x floor, CPU)"]
    columns += [f"peak RSS (< {MAX_RSS_MB:.0f} MB at {JUDGED_SIZE}x)", "clean", "reference"]
    columns += [f"vs analyze (CPU; <= {MAX_REPORT_RATIO:g}x, show {MAX_SHOW_RATIO:g}x)", "exponent 4x-16x", "verdict"]
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for s in results["shapes"]:
        judged_size = judged_row(s["sizes"])["size"]
        for k, r in enumerate(s["sizes"]):
            last = k == len(s["sizes"]) - 1
            at_judged = r["size"] == judged_size
            exp, verdict = "", ""
            if last:
                e = s["exponent"]
                span = f" ({s['exponent_span']})" if s.get("exponent_span") else ""
                exp = "-" if e is None else f"{'> ' if s['exponent_is_bound'] else ''}{e:.2f}{span}"
                verdict = s["verdict"]
            name = s["shape"] if k == 0 else ""
            if r.get("skipped"):
                cells = [name, f"{r['size']}x", f"{r['n']:,} {s['unit']}", "", "", "not run", *[""] * 7]
                out.append("| " + " | ".join([*cells, "", "", exp, verdict]) + " |")
                continue
            wall = f"{r['ratio']:.2f}x" if r["ratio"] < 10 else f"{r['ratio']:.1f}x"
            wall = f"> {wall}" if r["timed_out"] else wall
            cpu = r.get("cpu_ratio")
            ratio = "-" if cpu is None else f"{cpu:.2f}x" if cpu < 10 else f"{cpu:.1f}x"
            judged = at_judged and s.get("kind", "analyze") != "report"  # ratio and RSS: judged at JUDGED_SIZE
            ratio += (" ok" if ratio_of(r) <= MAX_RATIO else " MISSED") if judged and not r["timed_out"] else ""
            rss = f"{'>= ' if r['timed_out'] else ''}{r['rss_mb']:.0f} MB"
            rss += (" ok" if r["rss_mb"] < MAX_RSS_MB else " MISSED") if at_judged and not r["timed_out"] else ""
            clean = {True: "yes", False: "NO", None: "?"}[r["clean"]]
            ref = ""
            if r["reference_s"] is not None:
                ref = f"analyze {_time(r, 'reference_s', 'reference_timed_out')}"
            elif r.get("report_s") is not None:
                ref = f"report {_time(r, 'report_s', 'report_timed_out')}, {r['report_rss_mb']:.0f} MB"
            vs_cpu = vs_analyze_of(r)
            vs = f"{vs_cpu:.2f}x" if vs_cpu is not None else ""
            if r.get("cpu_vs_analyze") is not None and r.get("vs_analyze") is not None:
                vs += f" (wall {r['vs_analyze']:.2f}x)"
            n = f"{r['n']:,} {s['unit']}" + (f" (--at {r['at']:,})" if "at" in r else "")
            source = ""
            if r.get("source_cpu_ratio") is not None:
                gain = 1 - r["cpu_s"] / r["source_cpu_s"]
                source = f"{'> ' if r['source_timed_out'] else ''}{r['source_cpu_ratio']:.2f}x (compiled {gain:+.0%})"
            cells = [
                name,
                f"{r['size']}x",
                n,
                f"{r['lines']:,}",
                f"{r['mb']:.0f}" if r["mb"] >= 10 else f"{r['mb']:.1f}",
                _time(r),
                f"{r['floor_s']:.2f} s",
                wall,
                ratio,
                f"{'> ' if r['timed_out'] else ''}{r['us_per_line']:.1f}",
                source,
                rss,
                clean,
                ref,
                vs,
                exp,
                verdict,
            ]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="*", default=None, help="shape names (space or comma separated); all")
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="multiples of each base size")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per rtrace run")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="runs per figure; the best is kept")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", type=Path, default=OUT, help=f"where to write the results (default {OUT})")
    parser.add_argument("--print", type=Path, metavar="JSON", help="only print the table of earlier results")
    parser.add_argument(
        "--report-sizes", default="16", help="sizes at which `rtrace report` is timed too on analysis shapes ('': none)"
    )
    parser.add_argument(
        "--source-sizes",
        default=str(JUDGED_SIZE),
        help="sizes at which a compiled rtrace's analysis is timed from source too (RTRACE_PURE=1; '': none)",
    )
    parser.add_argument(
        "--headline",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure bench.generate's whole workloads too (the 60-minute call, the 20-hour session)",
    )
    parser.add_argument(
        "--loaded-shapes",
        default="audio-call",
        help=f"shapes whose default mode is timed with {BUSY} busy processes beside it too ('': none)",
    )
    args = parser.parse_args(argv)
    if args.print is not None:
        saved = orjson.loads(args.print.read_bytes())
        for shape in saved["shapes"]:
            shape.update(judge(shape["sizes"], saved["timeout_s"], shape.get("kind", "analyze")))
        return report(saved)
    names = [n for arg in (args.shapes or [",".join(SHAPES)]) for n in arg.split(",") if n]
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        parser.error(f"unknown shape(s) {', '.join(unknown)}; known: {', '.join(SHAPES)}")
    sizes = sorted(int(x) for x in args.sizes.split(","))
    report_sizes = {int(x) for x in args.report_sizes.split(",") if x}
    is_compiled = compiled()
    source_sizes = {int(x) for x in args.source_sizes.split(",") if x} if is_compiled else set()
    # Measured as installed (see bench.run): compiled once, not at every start-up.
    compileall.compile_dir(ROOT / "rtrace", quiet=1)
    results: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_before": os.getloadavg(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "timeout_s": args.timeout,
        "repeat": args.repeat,
        "seed": args.seed,
        "compiled": is_compiled,
        "shapes": [],
    }
    started = time.perf_counter()
    with LoadSampler() as sampler:
        for name in names:
            print(f"{name}:", file=sys.stderr, flush=True)
            loaded = name in args.loaded_shapes.split(",")
            shape = run_shape(
                name, sizes, args.repeat, args.timeout, args.seed, args.data, report_sizes, source_sizes, loaded
            )
            shape.update(judge(shape["sizes"], args.timeout, shape["kind"]))
            results["shapes"].append(shape)
        if args.headline:
            print("bench.generate's workloads:", file=sys.stderr, flush=True)
            results["headline"] = headline(args.repeat, args.timeout, set(args.loaded_shapes.split(",")))
    results["load_during"] = sampler.summary()
    results["load_after"] = os.getloadavg()
    results["total_s"] = time.perf_counter() - started
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    return report(results)


def _x(value: float | None, target: float | None = None, judged: bool = False) -> str:
    """A ratio, with `ok`/`MISSED` against `target` where it is judged."""
    if value is None:
        return "-"
    cell = f"{value:.2f}x"
    if judged and target is not None:
        cell += " ok" if value <= target else " MISSED"
    return cell


def _loaded_vs_one(r: dict[str, Any], judged: bool) -> str:
    """The default mode over `-j 1` under load: the median of the pairs (wall, judged; CPU beside it), or the ratio
    of the bests in results written before the pairs were kept."""
    if "loaded_vs_one" not in r:
        return _x(r["loaded_default_s"] / r["loaded_one_s"], 1.0, judged)
    return f"{_x(r['loaded_vs_one'], 1.0, judged)} (CPU {r['loaded_vs_one_cpu']:.2f}x)"


def issue_table(results: dict[str, Any]) -> str:
    """Issue 41's table, one row per shape and size: the analysis (`-j 1`) over the floor and over the typed decoder
    (CPU), peak RSS, the default mode over DuckDB's count (wall), the default mode, `-j 1` and the floor under load,
    and show's (or the report's) time over the analysis's."""
    columns = [
        "shape",
        "size",
        "lines",
        f"x floor (CPU; <= {ISSUE41_RATIO:g}x)",
        "x typed (CPU)",
        f"peak RSS (<= {ISSUE41_RSS_MB:.0f} MB)",
        "default mode x floor (wall)",
        "default mode / DuckDB count (wall)",
        f"loaded: default mode x floor (<= {ISSUE41_AUDIO:g}x)",
        "loaded: -j 1 x floor",
        "loaded: default / -j 1 (median of pairs, wall; CPU)",
        "show or report / analyze (CPU)",
        f"show --at its end / analyze (CPU; <= 1x; {', '.join(SHOW_AT_END)})",
    ]
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for s in [*results["shapes"], *results.get("headline", [])]:
        for r in s["sizes"]:
            if r.get("skipped") or r.get("timed_out"):
                continue
            judged = r["size"] in (JUDGED_SIZE, 0)  # 0: a whole workload of `bench.generate` (`headline`)
            analysis = s.get("kind", "analyze") == "analyze"
            rss = f"{r['rss_mb']:.0f} MB" + (
                (" ok" if r["rss_mb"] <= ISSUE41_RSS_MB else " MISSED") if judged and s["kind"] != "report" else ""
            )
            floor = r["floor_s"]
            default = r.get("default_s")
            loaded = r.get("loaded_floor_s")
            cells = [
                s["shape"],
                f"{r['size']}x" if r["size"] else "whole",
                f"{r['lines']:,}",
                _x(ratio_of(r), ISSUE41_RATIO, judged and analysis and r["size"] != 0),
                _x(r.get("cpu_vs_typed")),
                rss,
                _x(default / floor if default else None, ISSUE41_AUDIO, judged and s["shape"].startswith("audio-call")),
                _x(r.get("vs_duckdb"), 1.0, judged and s["shape"].startswith("event-heavy")),
                _x(r["loaded_default_s"] / loaded if loaded else None, ISSUE41_AUDIO, judged),
                _x(r["loaded_one_s"] / loaded if loaded else None),
                _loaded_vs_one(r, judged) if loaded else "-",
                _x(vs_analyze_of(r), 1.0 if s["kind"] == "show-at" else None, judged),
                _x(r.get("show_end_vs_analyze"), 1.0, judged),
            ]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def fold_of(results: dict[str, Any]) -> str:
    """How the measured rtrace ran its fold: compiled (`setup.py`), or from source (no compiler, `RTRACE_PURE`)."""
    return {True: "compiled (mypyc)", False: "from source"}.get(results.get("compiled"), "(build not recorded)")


def report(results: dict[str, Any]) -> int:
    """Print the results; 1 if any shape is not linear."""
    before, after = results["load_before"], results["load_after"]
    during = results.get("load_during")
    seen = f", {during['min']:.2f}-{during['max']:.2f} during (mean {during['mean']:.2f})" if during else ""
    print(
        f"\n{results['date']} on {results['machine']}; best of {results['repeat']} (runs over {REPEAT_UNDER:.0f} s "
        f"once), timeout {results['timeout_s']:.0f} s; load average {before[0]:.2f} before, {after[0]:.2f} after"
        f"{seen}; {results['total_s'] / 60:.1f} min; rtrace {fold_of(results)}\n"
    )
    print(table(results))
    print(
        f"\nIssue 41 (targets at {JUDGED_SIZE}x; typed: msgspec into a Struct; DuckDB: its count with "
        f"{DUCKDB_THREADS} threads; loaded: {BUSY} busy processes beside each run):\n"
    )
    print(issue_table(results))
    failed = [s["shape"] for s in results["shapes"] if s["verdict"] != "linear"]
    print(f"\n{len(results['shapes']) - len(failed)} of {len(results['shapes'])} shapes linear", end="")
    print(f"; failing: {', '.join(failed)}" if failed else "")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
