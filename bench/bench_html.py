"""The HTML report of the 1M-event text session (issue 15): its size, the time to write it, and the time headless
Chromium takes to draw it.

The session is `bench.generate`'s event-heavy workload (twenty hours of text, 992,577 lines; generated once under
bench/data/). Each figure is the best of `--repeat` rounds, every command a subprocess:

* `rtrace report FILE -o x.html` against `rtrace analyze -j 1 FILE` (the report must stay within 3x of it);
* headless Chromium (Debian's /usr/bin/chromium, flags as tests/chromium.py) on a blank page and on the report,
  `--dump-dom` with a virtual-time budget, so that it dumps only once the page is idle: its data inflated,
  decoded, the timeline and the step view drawn. That wall time includes Chromium's own start (the blank page);
* `drawn`: what the page itself measured, milliseconds from navigation start to the end of its first draw (it
  puts it on `<body data-shown-ms>`).

Targets: the file under 5 MB, drawn in under 2 s. Prints a table; writes bench/out/html.json.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench.generate import DEFAULT_OUT, generate
from bench.run import ROOT, RTRACE, best

OUT = ROOT / "bench" / "out" / "html.json"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--virtual-time-budget=30000",
    "--dump-dom",
]
TARGET_MB = 5.0
TARGET_DRAW_S = 2.0


def chromium_open(chromium: str, page: Path, repeat: int, workdir: Path) -> tuple[float, float | None]:
    """The best wall time of Chromium dumping `page` once idle, and the best `data-shown-ms` the page reported."""
    walls, shown = [], []
    for k in range(repeat):
        cmd = [chromium, *FLAGS, f"--user-data-dir={workdir}/profile-{page.stem}-{k}", page.as_uri()]
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        walls.append(time.perf_counter() - started)
        found = re.search(r'data-shown-ms="([0-9.]+)"', proc.stdout)
        if found:
            shown.append(float(found.group(1)))
    return min(walls), (min(shown) if shown else None)


def measure(path: Path, repeat: int) -> dict[str, Any]:
    with path.open("rb") as fp:  # a block at a time: this process's high-water mark is every child's RSS floor
        lines = sum(block.count(b"\n") for block in iter(lambda: fp.read(1 << 20), b""))
    out: dict[str, Any] = {"trace": str(path.relative_to(ROOT)), "lines": lines}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        page = work / "report.html"
        out["report_s"], out["report_rss_mb"] = best([*RTRACE, "report", str(path), "-o", str(page)], repeat)
        out["report_rss_mb"] /= 1024
        out["analyze_s"] = best([*RTRACE, "analyze", "-j", "1", str(path)], repeat)[0]
        out["mb"] = page.stat().st_size / 1e6
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium:
            blank = work / "blank.html"
            blank.write_text("<!doctype html><title>blank</title>")
            out["chromium_blank_s"], _ = chromium_open(chromium, blank, repeat, work)
            out["chromium_report_s"], out["drawn_ms"] = chromium_open(chromium, page, repeat, work)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--json", type=Path, default=OUT)
    args = parser.parse_args(argv)
    generate(args.data)
    load_before = os.getloadavg()
    row = measure(args.data / "event-heavy.jsonl", args.repeat)
    results = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "load_before": load_before,
        "load_after": os.getloadavg(),
        **row,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    print(
        f"{results['date']} on {results['machine']}; load {load_before[0]:.2f} before, "
        f"{results['load_after'][0]:.2f} after; best of {args.repeat}"
    )
    print("| trace | lines | report | analyze -j 1 | report/analyze | peak RSS | page | Chromium (blank) | drawn |")
    print("|---|---|---|---|---|---|---|---|---|")
    chromium = (
        f"{row['chromium_report_s']:.2f} s ({row['chromium_blank_s']:.2f} s)" if "chromium_report_s" in row else "-"
    )
    drawn = f"{row['drawn_ms']:.0f} ms" if row.get("drawn_ms") is not None else "-"
    print(
        f"| {row['trace']} | {row['lines']:,} | {row['report_s']:.2f} s | {row['analyze_s']:.2f} s | "
        f"{row['report_s'] / row['analyze_s']:.2f}x | {row['report_rss_mb']:.0f} MB | {row['mb']:.2f} MB | "
        f"{chromium} | {drawn} |"
    )
    ok = row["mb"] < TARGET_MB and row.get("chromium_report_s", 0) < TARGET_DRAW_S
    ok = ok and row["report_s"] <= 3 * row["analyze_s"]
    targets = f"page < {TARGET_MB:.0f} MB, drawn < {TARGET_DRAW_S:.0f} s, report <= 3x analyze"
    print(f"targets ({targets}): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
