"""Added latency of `rtrace record` on loopback: the round trip of one realtime-sized event through an echo upstream,
direct, through the recording proxy, and through mitmproxy's `mitmdump` in reverse-proxy mode, on the same run.

Each party runs in its own process (upstream echo, recorder, mitmdump), so the client's timers measure only the path.
Run: `.venv/bin/python bench/bench_record.py [--rounds 2000 --mitmdump PATH]`; mitmdump is optional (`pip install
mitmproxy` anywhere; found on PATH or given), its row is skipped when absent.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parent.parent

ECHO_SERVER = """
import asyncio, sys
from websockets.asyncio.server import serve
async def echo(ws):
    async for m in ws:
        await ws.send(m)
async def main():
    async with serve(echo, "127.0.0.1", int(sys.argv[1]), compression=None, max_size=None):
        await asyncio.Future()
asyncio.run(main())
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port} after {timeout}s")


def events() -> list[bytes]:
    """A text create (about 300 bytes) and a 20 ms audio append (1280 base64 chars), alternating."""
    audio = base64.b64encode(os.urandom(960)).decode()
    item = {"id": "item_x", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi " * 60}]}
    return [
        orjson.dumps({"type": "conversation.item.create", "event_id": "ev_1", "item": item}),
        orjson.dumps({"type": "input_audio_buffer.append", "event_id": "ev_2", "audio": audio}),
    ]


async def measure(url: str, rounds: int, warmup: int = 100) -> list[float]:
    frames = [f.decode() for f in events()]
    out: list[float] = []
    async with connect(url, compression=None, max_size=None, ping_interval=None, proxy=None) as ws:
        for i in range(rounds + warmup):
            t = time.perf_counter()
            await ws.send(frames[i % 2])
            await ws.recv()
            if i >= warmup:
                out.append(time.perf_counter() - t)
    return out


def row(name: str, samples: list[float], base: float | None) -> str:
    med = statistics.median(samples) * 1e6
    p99 = statistics.quantiles(samples, n=100)[98] * 1e6
    added = "" if base is None else f"{med - base:+9.0f}"
    return f"{name:<28} {med:9.0f} {p99:9.0f} {added:>10}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--mitmdump", default=shutil.which("mitmdump"), help="path to mitmdump (optional)")
    args = parser.parse_args(argv)
    procs: list[subprocess.Popen[Any]] = []
    tmp = Path(tempfile.mkdtemp(prefix="rtrace-bench-record-"))
    try:
        up = free_port()
        procs.append(subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(up)]))
        wait_port(up)
        rec = free_port()
        trace = tmp / "recorded.jsonl"
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "rtrace.cli", "record", "--upstream", f"ws://127.0.0.1:{up}/v1",
                 "-o", str(trace), "--port", str(rec)],
                cwd=str(ROOT), stdout=subprocess.DEVNULL,
            )
        )  # fmt: skip
        wait_port(rec)
        paths = [("direct", f"ws://127.0.0.1:{up}/v1/realtime"), ("rtrace record", f"ws://127.0.0.1:{rec}/v1/realtime")]
        if args.mitmdump:
            mitm = free_port()
            procs.append(
                subprocess.Popen(
                    [args.mitmdump, "-q", "--mode", f"reverse:http://127.0.0.1:{up}", "--listen-host", "127.0.0.1",
                     "--listen-port", str(mitm), "--set", "confdir=" + str(tmp / "mitm")],
                    stdout=subprocess.DEVNULL,
                )
            )  # fmt: skip
            wait_port(mitm)
            paths.append(("mitmdump (reverse)", f"ws://127.0.0.1:{mitm}/v1/realtime"))
        print(f"round trip of one event, {args.rounds} rounds, loopback (microseconds)")
        print(f"{'path':<28} {'median':>9} {'p99':>9} {'added':>10}")
        base = None
        for name, url in paths:
            samples = asyncio.run(measure(url, args.rounds))
            print(row(name, samples, base))
            if base is None:
                base = statistics.median(samples) * 1e6
        lines = trace.read_bytes().count(b"\n")
        print(
            f"rtrace record wrote {lines} lines ({trace.stat().st_size:,} bytes) for {2 * (args.rounds + 100)} frames"
        )
        if not args.mitmdump:
            print("mitmdump not found: pip install mitmproxy (or --mitmdump PATH) for its row")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
