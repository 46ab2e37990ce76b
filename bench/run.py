"""The benchmark runner: rtrace against its baselines on the generated workloads, in one invocation.

Every figure is a wall time of a subprocess (the best of `--repeat` runs, the machine is shared) measured on the
same file in the same run: `rtrace analyze`, the orjson floor (a bare Python loop parsing every line), `jq -c
.event.type` and `wc -l`. Peak RSS comes from `wait4` on the rtrace process itself. Prints a table and writes
`bench/out/results.json`. Timing targets are checked here, never in unit tests.
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench.generate import DEFAULT_OUT, DEFAULT_SEED, generate

ROOT = Path(__file__).resolve().parent.parent
#: The installed command when there is one (what users run), else the module.
_SCRIPT = Path(sys.executable).parent / "rtrace"
RTRACE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "rtrace.cli"]
FLOOR = (
    "import sys, orjson\n"
    "loads = orjson.loads\n"
    "with open(sys.argv[1], 'rb') as f:\n"
    "    for line in f:\n"
    "        loads(line)\n"
)
IN_PROCESS = (
    "import sys, time\n"
    "from rtrace.engine.fold import analyze_path\n"
    "t = time.perf_counter(); analyze_path(sys.argv[1]); print(time.perf_counter() - t)\n"
)
#: DuckDB's multi-threaded `read_json`, counting the event types (the `event` column read as a struct of its type
#: only): what a columnar engine takes to read the file, in a subprocess like the others (issue 15).
DUCKDB = (
    "import sys, duckdb\n"
    "duckdb.sql(\"SELECT event.type, count(*) FROM read_json(?, format='newline_delimited', \"\n"
    "           \"columns={'event': 'STRUCT(type VARCHAR)'}) GROUP BY 1\", params=[sys.argv[1]]).fetchall()\n"
)
#: The typed-decoder limit (issue 27): msgspec decoding each line into a typed Struct of what a record needs (`t`,
#: `dir`, `conn`, the event's `type`; the rest of the line is validated and skipped, never made into objects).
TYPED = (
    "import sys, msgspec\n"
    "class Event(msgspec.Struct):\n"
    "    type: str\n"
    "class Line(msgspec.Struct):\n"
    "    t: float\n"
    "    dir: str\n"
    "    conn: int\n"
    "    event: Event\n"
    "decode = msgspec.json.Decoder(Line).decode\n"
    "with open(sys.argv[1], 'rb') as f:\n"
    "    for line in f:\n"
    "        decode(line)\n"
)
#: CPU seconds in one process (issue 27: the machine is shared, so the ratios that count are of CPU time, measured
#: side by side in one interpreter): the orjson loop, the typed decoder (when msgspec is there) and the analysis
#: (`analyze_path`, no start-up or rendering), `--rounds` each in turn, the best of each printed as JSON.
CPU_IN_PROCESS = (
    "import json, sys, time, orjson\n"
    "from rtrace.engine.fold import analyze_path\n"
    "path, rounds = sys.argv[1], int(sys.argv[2])\n"
    "def floor():\n"
    "    loads = orjson.loads\n"
    "    with open(path, 'rb') as f:\n"
    "        for line in f:\n"
    "            loads(line)\n"
    "work = {'floor': floor, 'analysis': lambda: analyze_path(path)}\n"
    "try:\n"
    "    import msgspec\n"
    "except ImportError:\n"
    "    pass\n"
    "else:\n"
    "    class Event(msgspec.Struct):\n"
    "        type: str\n"
    "    class Line(msgspec.Struct):\n"
    "        t: float\n"
    "        dir: str\n"
    "        conn: int\n"
    "        event: Event\n"
    "    def typed():\n"
    "        decode = msgspec.json.Decoder(Line).decode\n"
    "        with open(path, 'rb') as f:\n"
    "            for line in f:\n"
    "                decode(line)\n"
    "    work['typed'] = typed\n"
    "best = {}\n"
    "for _ in range(rounds):\n"
    "    for name, fn in work.items():\n"
    "        t = time.process_time(); fn(); took = time.process_time() - t\n"
    "        best[name] = min(best.get(name, took), took)\n"
    "print(json.dumps(best))\n"
)
#: (workload, ratio to the floor it must stay within): issue 7 asked 1.5x and 2.5x, issue 15 and 27 the floor itself,
#: in the default mode and in one process.
TARGETS = {"audio-call": 1.0, "event-heavy": 1.0}
#: (workload, ratio to DuckDB's type count it must stay within): issue 15 asked 1.5x, issue 27 1.2x.
DUCKDB_TARGETS = {"event-heavy": 1.2}


class LoadSampler:
    """The machine's 1-minute load average every `every` seconds while a run lasts (others share the 2 cores): the
    table says how busy the machine was during the run, not only before and after."""

    def __init__(self, every: float = 5.0) -> None:
        self.every = every
        self.samples: list[float] = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])

    def summary(self) -> dict[str, float]:
        return {
            "min": min(self.samples),
            "mean": sum(self.samples) / len(self.samples),
            "max": max(self.samples),
        }


def run(cmd: list[str], stdout: Any = subprocess.DEVNULL) -> tuple[float, int, int, float]:
    """Run `cmd`; (wall seconds, peak RSS in KiB, exit status, CPU seconds). RSS and CPU come from `wait4`: the
    CPU time includes the process's own children (rtrace's split reader), the RSS is the largest of them."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.DEVNULL, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, usage.ru_maxrss, proc.returncode, usage.ru_utime + usage.ru_stime


def best(cmd: list[str], repeat: int) -> tuple[float, int]:
    """The best wall time of `repeat` runs, and the largest peak RSS seen."""
    found = best_of({"cmd": cmd}, repeat)["cmd"]
    return found[0], found[1]


def best_of(
    cmds: dict[str, list[str]], repeat: int, also: dict[str, Callable[[], float]] | None = None
) -> dict[str, tuple[float, int, float]]:
    """Each command's best wall time, largest peak RSS and the CPU seconds of its best run, over `repeat` rounds
    that run every command once in turn (a machine that slows down for a while slows them all). `also`: timings
    taken in the same rounds by other means (seconds; no RSS or CPU)."""
    runs: dict[str, list[tuple[float, int, int, float]]] = {name: [] for name in [*cmds, *(also or {})]}
    for _ in range(repeat):
        for name, cmd in cmds.items():
            runs[name].append(run(cmd))
        for name, timing in (also or {}).items():
            runs[name].append((timing(), 0, 0, 0.0))
    out = {}
    for name, seen in runs.items():
        fastest = min(seen)
        out[name] = (fastest[0], max(r[1] for r in seen), fastest[3])
    return out


def in_process(path: Path) -> float:
    """`analysis.analyze_path` alone, without interpreter start, imports or rendering, in one process."""
    proc = subprocess.run([sys.executable, "-c", IN_PROCESS, str(path)], capture_output=True, text=True, cwd=ROOT)
    return float(proc.stdout.strip() or "nan")


def cpu_in_process(path: Path, rounds: int) -> dict[str, float]:
    """CPU seconds of the orjson floor, the typed decoder and the analysis, side by side in one process (the best of
    `rounds` each; see `CPU_IN_PROCESS`): the ratios a loaded machine does not move much."""
    proc = subprocess.run(
        [sys.executable, "-c", CPU_IN_PROCESS, str(path), str(rounds)], capture_output=True, text=True, cwd=ROOT
    )
    try:
        found: dict[str, float] = orjson.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, orjson.JSONDecodeError):
        return {}
    return found


def has_module(name: str) -> bool:
    proc = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, check=False)
    return proc.returncode == 0


def ensure_jq() -> str | None:
    found = shutil.which("jq")
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "jq"], capture_output=True, check=False)
        found = shutil.which("jq")
    return found


def measure_trace(name: str, path: Path, repeat: int, jq: str | None) -> dict[str, Any]:
    cmds = {
        "rtrace": [*RTRACE, "analyze", str(path), "--fail-on", "never"],
        "one": [*RTRACE, "analyze", str(path), "-j", "1", "--fail-on", "never"],
        "floor": [sys.executable, "-c", FLOOR, str(path)],
        "wc": ["wc", "-l", str(path)],
    }
    if jq:
        cmds["jq"] = [jq, "-c", ".event.type", str(path)]
    if has_module("duckdb"):
        cmds["duckdb"] = [sys.executable, "-c", DUCKDB, str(path)]
    if has_module("msgspec"):
        cmds["typed"] = [sys.executable, "-c", TYPED, str(path)]
    found = best_of(cmds, repeat, {"analysis": lambda: in_process(path)})
    (rtrace, rss, cpu), floor = found["rtrace"], found["floor"][0]
    jq_time = found["jq"][0] if jq else None
    duck = found["duckdb"][0] if "duckdb" in found else None
    typed = found["typed"][0] if "typed" in found else None
    one_cpu = cpu_in_process(path, repeat)
    row = {
        "workload": name,
        "lines": sum(1 for _ in path.open("rb")),
        "mb": path.stat().st_size / 1e6,
        "rtrace_s": rtrace,
        "cpu_s": cpu,
        "one_process_s": found["one"][0],
        "one_process_rss_mb": found["one"][1] / 1024,
        "analysis_s": found["analysis"][0],
        "floor_s": floor,
        "jq_s": jq_time,
        "duckdb_s": duck,
        "typed_s": typed,
        "wc_s": found["wc"][0],
        "rss_mb": rss / 1024,
        "cpu_in_process": one_cpu,
    }
    row["vs_floor"] = rtrace / floor
    row["one_process_vs_floor"] = found["one"][0] / floor
    row["vs_jq"] = rtrace / jq_time if jq_time else None
    row["vs_duckdb"] = rtrace / duck if duck else None
    row["vs_typed"] = rtrace / typed if typed else None
    if "floor" in one_cpu and "analysis" in one_cpu:
        row["cpu_vs_floor"] = one_cpu["analysis"] / one_cpu["floor"]
        if "typed" in one_cpu:
            row["cpu_typed_vs_floor"] = one_cpu["typed"] / one_cpu["floor"]
            row["cpu_vs_typed"] = one_cpu["analysis"] / one_cpu["typed"]
    return row


def measure_fleet(fleet: Path, repeat: int) -> dict[str, Any]:
    found = best_of(
        {
            "one": [*RTRACE, "analyze", str(fleet), "-j", "1", "--fail-on", "never"],
            "two": [*RTRACE, "analyze", str(fleet), "-j", "2", "--fail-on", "never"],
        },
        repeat,
    )
    (one, rss1, _), (two, rss2, _) = found["one"], found["two"]
    traces = len(list(fleet.glob("*.jsonl")))
    return {"traces": traces, "j1_s": one, "j2_s": two, "speedup": one / two, "rss_mb": max(rss1, rss2) / 1024}


BURN = "import sys\ns = 0\nfor i in range(int(sys.argv[1])):\n    s += i\n"


def measure_capacity(repeat: int) -> float:
    """How much two processes get done at once on this machine now, relative to one after the other: a pure CPU
    loop run twice in sequence, then twice side by side. 2.0 on an idle 2-core machine; the fleet speedup cannot
    exceed it, so it is printed next to it (the machine is shared)."""
    cmd = [sys.executable, "-c", BURN, "15000000"]
    ratios = []
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(2):
            run(cmd)
        sequential = time.perf_counter() - started
        started = time.perf_counter()
        procs = [subprocess.Popen(cmd) for _ in range(2)]
        for proc in procs:
            proc.wait()
        ratios.append(sequential / (time.perf_counter() - started))
    return max(ratios)


def measure_startup(repeat: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        tiny = Path(tmp) / "tiny.jsonl"
        tiny.write_bytes(b'{"t":0.0,"dir":"server","conn":1,"event":{"type":"session.created","session":{}}}\n')
        return best([*RTRACE, "analyze", str(tiny)], repeat)[0]


def measure_html(path: Path, repeat: int) -> dict[str, Any] | None:
    """`rtrace report` HTML of the audio call: size, time to write, and time to open in headless Chromium."""
    try:
        import rtrace.report.html  # noqa: F401
    except ImportError:
        return None
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "audio-call.html"
        out["write_s"] = best([*RTRACE, "report", str(path), "-o", str(html)], repeat)[0]
        if not html.exists():
            return None
        out["mb"] = html.stat().st_size / 1e6
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium:
            from bench.bench_html import chromium_open  # dumps once the page is drawn (its data inflates async)

            blank = Path(tmp) / "blank.html"
            blank.write_text("<!doctype html><title>blank</title>")
            out["chromium_blank_s"], _ = chromium_open(chromium, blank, repeat, Path(tmp))
            out["chromium_open_s"], out["drawn_ms"] = chromium_open(chromium, html, repeat, Path(tmp))
    return out


def fmt(value: float | None, unit: str = "", digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}{unit}"


def table(results: dict[str, Any]) -> str:
    columns = ["workload", "lines", "MB", "rtrace", "CPU", "rtrace -j 1", "analysis only", "orjson floor", "jq"]
    columns += ["DuckDB", "typed (msgspec)", "wc -l", "rtrace/floor (<= 1.0x)", "-j 1/floor (<= 1.0x)", "rtrace/jq"]
    columns += ["rtrace/DuckDB", "rtrace/typed", "peak RSS (< 100 MB)"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in results["traces"]:
        duck = DUCKDB_TARGETS.get(r["workload"])
        vs_duck = fmt(r.get("vs_duckdb"), "x") + (f" (<= {duck}x)" if duck else "")
        lines.append(
            f"| {r['workload']} | {r['lines']:,} | {r['mb']:.0f} | {fmt(r['rtrace_s'], ' s')} | "
            f"{fmt(r['cpu_s'], ' s')} | {fmt(r['one_process_s'], ' s')} | "
            f"{fmt(r['analysis_s'], ' s')} | {fmt(r['floor_s'], ' s')} | {fmt(r['jq_s'], ' s')} | "
            f"{fmt(r.get('duckdb_s'), ' s')} | {fmt(r.get('typed_s'), ' s')} | {fmt(r['wc_s'], ' s', 3)} | "
            f"{fmt(r['vs_floor'], 'x')} | {fmt(r['one_process_vs_floor'], 'x')} | {fmt(r['vs_jq'], 'x')} | "
            f"{vs_duck} | {fmt(r.get('vs_typed'), 'x')} | {r['rss_mb']:.0f} MB |"
        )
    cpu_rows = [r for r in results["traces"] if r.get("cpu_in_process")]
    if cpu_rows:
        lines += ["", "CPU seconds in one process, side by side (best of each; no start-up, imports or rendering):", ""]
        head = ["workload", "orjson floor", "typed (msgspec)", "analysis", "analysis/floor (<= 1.0x)"]
        head += ["typed/floor", "analysis/typed"]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in cpu_rows:
            c = r["cpu_in_process"]
            lines.append(
                f"| {r['workload']} | {fmt(c.get('floor'), ' s')} | {fmt(c.get('typed'), ' s')} | "
                f"{fmt(c.get('analysis'), ' s')} | {fmt(r.get('cpu_vs_floor'), 'x')} | "
                f"{fmt(r.get('cpu_typed_vs_floor'), 'x')} | {fmt(r.get('cpu_vs_typed'), 'x')} |"
            )
    out = "\n".join(lines)
    f = results.get("fleet")
    if f:
        out += (
            f"\n\nfleet: {f['traces']} traces, `-j 1` {f['j1_s']:.2f} s, `-j 2` {f['j2_s']:.2f} s: "
            f"speedup {f['speedup']:.2f}x (peak RSS of the parent {f['rss_mb']:.0f} MB); two CPU-bound processes "
            f"side by side ran {f['capacity']:.2f}x as fast as one after the other on this machine at the time"
        )
    out += f"\n\nrtrace startup (analyze of a one-line trace): {results['startup_s']:.2f} s"
    h = results.get("html")
    if h:
        out += f"\n\nHTML report of the audio call: {h['mb']:.2f} MB, written in {h['write_s']:.2f} s"
        if "chromium_open_s" in h:
            out += (
                f"; headless Chromium --dump-dom {h['chromium_open_s']:.2f} s "
                f"(blank page {h['chromium_blank_s']:.2f} s)"
            )
    elif "html" in results:
        out += "\n\nHTML report: rtrace.report.html not available, skipped"
    return out


def verdicts(results: dict[str, Any]) -> list[str]:
    out = []
    rows = {r["workload"]: r for r in results["traces"]}
    for name, limit in TARGETS.items():
        r = rows.get(name)
        if r is None:
            continue
        out.append(f"{name}: rtrace/floor {r['vs_floor']:.2f}x (target <= {limit}x): {_ok(r['vs_floor'] <= limit)}")
        alone = r["one_process_vs_floor"]
        out.append(f"{name}: rtrace -j 1/floor {alone:.2f}x (one process; target <= {limit}x): {_ok(alone <= limit)}")
        cpu = r.get("cpu_vs_floor")
        if cpu is not None:
            out.append(
                f"{name}: analysis/floor in CPU time, one process {cpu:.2f}x (target <= {limit}x): {_ok(cpu <= limit)}"
            )
        if r.get("cpu_vs_typed") is not None:
            out.append(
                f"{name}: the typed-decoder limit (msgspec Struct) is {r['cpu_typed_vs_floor']:.2f}x the floor; "
                f"the analysis is {r['cpu_vs_typed']:.2f}x it (CPU, one process; the next floor, not a target)"
            )
        if r["vs_jq"] is not None:
            out.append(f"{name}: rtrace/jq {r['vs_jq']:.2f}x (target < 1x): {_ok(r['vs_jq'] < 1)}")
        duck_limit = DUCKDB_TARGETS.get(name)
        if duck_limit is not None and r.get("vs_duckdb") is not None:
            ok = _ok(r["vs_duckdb"] <= duck_limit)
            out.append(f"{name}: rtrace/DuckDB {r['vs_duckdb']:.2f}x (target <= {duck_limit}x): {ok}")
        out.append(f"{name}: peak RSS {r['rss_mb']:.0f} MB (target < 100 MB): {_ok(r['rss_mb'] < 100)}")
    if "audio-call" in rows and "event-heavy" in rows:
        growth = rows["event-heavy"]["rss_mb"] / rows["audio-call"]["rss_mb"] - 1
        out.append(f"RSS 20 h over 1 h: {growth * 100:+.0f}% (target <= +10%): {_ok(growth <= 0.10)}")
    f = results.get("fleet")
    if f:
        out.append(f"fleet -j 2 vs -j 1: {f['speedup']:.2f}x (target >= 1.7x): {_ok(f['speedup'] >= 1.7)}")
    h = results.get("html")
    if h:
        out.append(f"HTML size {h['mb']:.2f} MB (target < 5 MB): {_ok(h['mb'] < 5)}")
        if "chromium_open_s" in h:
            out.append(f"HTML open {h['chromium_open_s']:.2f} s (target < 2 s): {_ok(h['chromium_open_s'] < 2)}")
    return out


def _ok(passed: bool) -> str:
    return "met" if passed else "MISSED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement; the best is kept")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "results.json")
    parser.add_argument("--skip-fleet", action="store_true")
    args = parser.parse_args(argv)
    generate(args.data, args.seed, args.scale)
    # Measured as installed: pip byte-compiles a package when it installs it, an editable install is compiled
    # here (with PYTHONDONTWRITEBYTECODE set, as on this machine, every start-up would compile the sources).
    compileall.compile_dir(ROOT / "rtrace", quiet=1)
    jq = ensure_jq()
    results: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_before": os.getloadavg()[0],
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "repeat": args.repeat,
        "traces": [],
    }
    sampler = LoadSampler().__enter__()
    for name in ("audio-call", "event-heavy"):
        path = args.data / f"{name}.jsonl"
        print(f"measuring {name} ...", file=sys.stderr)
        results["traces"].append(measure_trace(name, path, args.repeat, jq))
    if not args.skip_fleet:
        print("measuring fleet ...", file=sys.stderr)
        results["fleet"] = measure_fleet(args.data / "fleet", args.repeat)
        results["fleet"]["capacity"] = measure_capacity(args.repeat)
    results["startup_s"] = measure_startup(args.repeat)
    print("measuring HTML report ...", file=sys.stderr)
    results["html"] = measure_html(args.data / "audio-call.jsonl", 1)
    results["load_after"] = os.getloadavg()[0]
    sampler.__exit__()
    results["load_during"] = sampler.summary()
    results["verdicts"] = verdicts(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    print(
        f"\n{results['date']} on {results['machine']}, best of {args.repeat}; "
        f"load average {results['load_before']:.1f} before, {results['load_after']:.1f} after, "
        f"{results['load_during']['min']:.1f}-{results['load_during']['max']:.1f} during "
        f"(mean {results['load_during']['mean']:.1f})\n"
    )
    print(table(results))
    print()
    for line in results["verdicts"]:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
