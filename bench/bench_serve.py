"""Ack-latency accuracy of `rtrace serve`: N concurrent clients on loopback each push R creates per second for a
bounded time against `--latency L`; reports the median and p99 error of the measured ack delay and events lost.

The server runs in its own process (`python -m rtrace.cli serve`), so the clients' work does not skew its timers.
Run: `.venv/bin/python bench/bench_serve.py [--clients 50 --rate 20 --duration 10 --latency 50ms]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import time
from typing import Any

import orjson
from websockets.asyncio.client import connect

from rtrace.core.durations import parse_duration


async def client(url: str, k: int, rate: float, duration: float, start: float, out: dict[str, Any]) -> None:
    sent: dict[str, float] = {}
    delays: list[float] = []
    async with connect(url, max_queue=None) as ws:
        await ws.recv()  # session.created

        async def reader() -> None:
            async for message in ws:
                ev = orjson.loads(message)
                if ev.get("type") == "conversation.item.added":
                    t = sent.pop(ev["item"]["id"], None)
                    if t is not None:
                        delays.append(time.monotonic() - t)

        task = asyncio.create_task(reader())
        period = 1.0 / rate
        # Spread the clients' send instants over one period.
        next_t = start + period * k / max(1, out["clients"])
        n = 0
        while next_t < start + duration:
            wait = next_t - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            item_id = f"c{k}_{n}"
            item = {"type": "message", "role": "user", "id": item_id, "content": [{"type": "input_text", "text": "x"}]}
            sent[item_id] = time.monotonic()
            await ws.send(orjson.dumps({"type": "conversation.item.create", "item": item}).decode())
            n += 1
            next_t += period
        grace = time.monotonic() + 2.0
        while sent and time.monotonic() < grace:
            await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    out["delays"].extend(delays)
    out["sent"] += n
    out["lost"] += len(sent)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    idx = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[idx]


async def run(
    clients: int, rate: float, duration: float, latency: float, record: str | None, url: str | None = None
) -> dict[str, Any]:
    if url is not None:  # a server started by hand (e.g. under a profiler)
        out: dict[str, Any] = {"clients": clients, "delays": [], "sent": 0, "lost": 0}
        start = time.monotonic() + 0.5
        await asyncio.gather(*(client(url, k, rate, duration, start, out) for k in range(clients)))
        return out
    extra = ["--record", record] if record else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtrace.cli", "serve", "--latency", f"{latency}s", *extra],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"ws://\S+", line)
        if not found:
            raise SystemExit(f"bench_serve: the server did not start: {line!r}")
        url = found.group(0) + "/realtime?model=gpt-realtime"
        out = {"clients": clients, "delays": [], "sent": 0, "lost": 0}
        start = time.monotonic() + 0.5
        await asyncio.gather(*(client(url, k, rate, duration, start, out) for k in range(clients)))
        return out
    finally:
        proc.terminate()
        proc.wait(10)


def server_delays(path: str, latency: float) -> list[float]:
    """From the server's own trace: create received -> `conversation.item.added` sent, minus the latency (ms)."""
    from rtrace.core.loader import TraceReader

    received: dict[tuple[int, str], float] = {}
    out: list[float] = []
    with TraceReader.open(path) as reader:
        for rec in reader:
            if rec.type == "conversation.item.create" and rec.dir == "client":
                received[(rec.conn, rec.event["item"]["id"])] = rec.t
            elif rec.type == "conversation.item.added":
                t = received.pop((rec.conn, rec.event["item"]["id"]), None)
                if t is not None:
                    out.append((rec.t - t - latency) * 1000)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--rate", type=float, default=20.0, help="creates per second per client")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of sending")
    parser.add_argument("--latency", default="50ms")
    parser.add_argument(
        "--record", metavar="TRACE", help="also record the server's trace here and report its own (send-side) delays"
    )
    parser.add_argument("--url", help="use this running server (ws://.../v1/realtime?...) instead of starting one")
    args = parser.parse_args(argv)
    latency = parse_duration(args.latency, "--latency")
    out = asyncio.run(run(args.clients, args.rate, args.duration, latency, args.record, args.url))
    errors_ms = [(d - latency) * 1000 for d in out["delays"]]
    median = statistics.median(errors_ms) if errors_ms else float("nan")
    p99 = percentile(errors_ms, 0.99)
    print(f"rtrace serve ack latency: {args.clients} clients x {args.rate:g} creates/s for {args.duration:g} s, "
          f"--latency {latency * 1000:g}ms, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'metric':<28}{'value':>12}")
    print(f"{'creates sent':<28}{out['sent']:>12}")
    print(f"{'acks measured':<28}{len(errors_ms):>12}")
    print(f"{'events lost':<28}{out['lost']:>12}")
    print(f"{'median ack delay (ms)':<28}{median + latency * 1000:>12.2f}")
    print(f"{'median error (ms)':<28}{median:>12.2f}")
    print(f"{'p99 error (ms)':<28}{p99:>12.2f}")
    print(f"{'max error (ms)':<28}{max(errors_ms, default=float('nan')):>12.2f}")
    if args.record:
        server_ms = server_delays(args.record, latency)
        print(f"{'server-side median error (ms)':<28}{statistics.median(server_ms):>12.2f}")
        print(f"{'server-side p99 error (ms)':<28}{percentile(server_ms, 0.99):>12.2f}")
    return 0 if out["lost"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
