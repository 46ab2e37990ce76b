"""The hardening tally of issue 42: `hunt`, `sweep`, `serve` and `record` under hostile commands, clients, signals
and outputs, class by class, every case counted as `bench/harden.py` counts its own (`make harden` runs both).

The hunted commands are tiny scripted ones (`sh -c`, `python -c`), not real clients: each case takes a second or
so. A case holds when the exit code is the one expected, the bound held (no hang), no traceback or internal error
showed, no process the command started is left, and the report or the trace says what happened. Writes
`bench/out/harden_hunt.json`; exit 1 when a case failed.

    .venv/bin/python -m bench.harden_hunt            # every class
    .venv/bin/python -m bench.harden_hunt --quick    # a sample of each
    .venv/bin/python -m bench.harden_hunt --only 15,16
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.harden import RTRACE, TALLY, clean, run, run_classes

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "harden_hunt.json"
PY = sys.executable
CLIENT = [PY, str(ROOT / "tests" / "sweep_client.py")]
LATENCY = '{"faults": [{"kind": "latency", "moment": "all", "target": "*", "value": 0.05, "k": 1}], "seed": 3}'

CLASSES = {
    14: "each run's evidence is its own (reused --out, no connection)",
    15: "every process a run starts ends with it (setsid, new groups, daemons)",
    16: "every stop leaves a report (SIGINT, SIGTERM, SIGHUP, twice)",
    17: "schedule values and seeds checked where they enter",
    18: "odd --out and -o refused before any run",
    19: "every queue bounded (ping floods through serve and record)",
    20: "record tells what the upstream did (silent, oversized frame)",
}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _script(tmp: Path, name: str, value: str) -> Path:
    path = tmp / name
    path.write_text(f"# rtrace-schedule: {value}\n", encoding="utf-8")
    return path


def _gone(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if stat.rpartition(")")[2].split()[0] == "Z":
            return True
        time.sleep(0.05)
    return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


# -- 14. evidence of its own -----------------------------------------------------------------------------------------


def class_14(quick: bool, tmp: Path) -> None:
    """A first hunt (and sweep) into --out finds RT101; each later command into the same --out that never connects
    (or connects and does nothing) must report nothing of it."""
    bug = _script(tmp, "bug-3.toml", LATENCY)
    out = tmp / "hunt"
    first = run(["hunt", "--schedule", str(bug), "--runs", "1", "--out", str(out), "-f", "json", "--", *CLIENT], tmp)
    TALLY.case(14, clean(first) and first is not None and first.returncode == 1, "the first hunt found RT101")
    quiet = [["true"], ["sh", "-c", "exit 0"], [PY, "-c", "pass"], ["sleep", "0"],
             [PY, "-c", "import socket; socket.socket()"], ["sh", "-c", "echo hello >&2"]]  # fmt: skip
    if quick:
        quiet = quiet[:2]
    for command in quiet:
        again = run(["hunt", "--schedule", str(bug), "--runs", "1", "--out", str(out), "-f", "json", "--", *command],
                    tmp)  # fmt: skip
        ok = clean(again) and again is not None and again.returncode == 0
        ok = ok and again is not None and json.loads(again.stdout)["bugs"] == []
        TALLY.case(14, ok, f"hunt into a used --out, {command}: {again.returncode if again else 'hang'}")
        sweep = run(["sweep", "--latency", "150ms", "--runs", "1", "--out", str(tmp / "sweep"), "--", *command], tmp)
        TALLY.case(14, clean(sweep) and sweep is not None and sweep.returncode == 0 and b"RT101" not in sweep.stdout,
                   f"sweep into a used --out, {command}")  # fmt: skip
    numbered = sorted(p.name for p in out.iterdir())
    TALLY.case(14, numbered == [str(n) for n in range(1, len(quiet) + 2)], f"one directory per hunt: {numbered}")
    TALLY.case(14, (out / "1" / "bug-3.toml").exists(), "a re-run keeps its bug's number, beside the original")


# -- 15. processes -----------------------------------------------------------------------------------------------------


def _leaver(how: str, pidfile: Path, then: str) -> list[str]:
    escape = {"setsid": "os.setsid()", "setpgid": "os.setpgid(0, 0)", "same group": "pass"}[how]
    code = (f"import os, sys, time\nif os.fork() == 0:\n    {escape}\n"
            f"    open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n    time.sleep(120)\n    os._exit(0)\n"
            f"while not os.path.exists({str(pidfile)!r}): time.sleep(0.01)\n{then}\n")  # fmt: skip
    return [PY, "-c", code]


def class_15(quick: bool, tmp: Path) -> None:
    """A command leaves a child (in its group, in a new group, in a new session) holding its stdout and stderr,
    then exits 0, exits 1, or hangs past --timeout: the run ends in time, an exit 0 is no timeout, the group's
    child dies with the run, an escaped one is named and killed with --kill-strays (and only named without)."""
    clean_schedule = _script(tmp, "clean.toml", '{"faults": [], "seed": 0}')
    hows = ["same group", "setsid", "setpgid"]
    thens = {"exit 0": "sys.exit(0)", "exit 1": "sys.exit(1)", "hang": "time.sleep(120)"}
    kills = [True, False]
    cases = list(itertools.product(hows, thens, kills))
    if quick:
        cases = cases[::4]
    for n, (how, then, kill) in enumerate(cases):
        pidfile = tmp / f"pid{n}"
        flag = "--kill-strays" if kill else "--no-kill-strays"
        argv = ["hunt", "--schedule", str(clean_schedule), "--runs", "1", "--timeout", "3s", "--out", str(tmp / "h"),
                "-f", "json", flag, "--", *_leaver(how, pidfile, thens[then])]  # fmt: skip
        start = time.monotonic()
        proc = run(argv, tmp, timeout=30)
        took = time.monotonic() - start
        what = f"{how}, {then}, kill-strays {kill}"
        if not clean(proc) or proc is None or not pidfile.exists():
            TALLY.case(15, False, f"{what}: no answer")
            continue
        pid = int(pidfile.read_text())
        doc = json.loads(proc.stdout)
        bound = 3 + 8 if then == "hang" else 8
        TALLY.case(15, took < bound, f"{what}: took {took:.1f}s")
        expected = 0 if then == "exit 0" else 1
        TALLY.case(15, proc.returncode == expected, f"{what}: exit {proc.returncode}, wanted {expected}")
        escaped = how != "same group"
        named = [entry["pid"] for entry in doc["left_running"]]
        TALLY.case(15, named == ([pid] if escaped else []), f"{what}: named {named}")
        TALLY.case(15, _gone(pid) == (kill or not escaped), f"{what}: pid {pid} left running")
        _kill(pid)


# -- 16. stops ---------------------------------------------------------------------------------------------------------


def _signalled(argv: list[str], pidfile: Path, sigs: list[signal.Signals], tmp: Path) -> tuple[int, float, str, int]:
    proc = subprocess.Popen([*RTRACE, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp, env=_env(),
                            start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 30
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    sent = time.monotonic()
    for sig in sigs:
        proc.send_signal(sig)
        time.sleep(0.05)
    try:
        out, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        TALLY.hangs += 1
        proc.kill()
        out, err = proc.communicate()
    child = int(pidfile.read_text().strip() or 0) if pidfile.exists() else 0
    return proc.returncode, time.monotonic() - sent, (out + err).decode("utf-8", "replace"), child


def class_16(quick: bool, tmp: Path) -> None:
    """SIGINT, SIGTERM, SIGHUP (once, and twice) to the hunt's or the sweep's process alone, during the clean run
    and during the search: ends within 2 s (the exit 128 + the signal), a partial report saying "interrupted" the
    first time, and no child left."""
    sigs = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
    cases = [(c, s, twice) for c in ("hunt", "sweep") for s in sigs for twice in (False, True)]
    if quick:
        cases = cases[::3]
    for n, (command, sig, twice) in enumerate(cases):
        pidfile = tmp / f"pid{n}"
        slow = ["sh", "-c", f"echo $$ > {pidfile}; exec sleep 60"]
        argv = (["hunt", "--budget", "5m", "--out", str(tmp / "h")] if command == "hunt" else
                ["sweep", "--runs", "3", "--out", str(tmp / "s")])  # fmt: skip
        code, took, text, child = _signalled([*argv, "--", *slow], pidfile, [sig, sig] if twice else [sig], tmp)
        what = f"{command} {sig.name}{' twice' if twice else ''}"
        # twice: at once, by 128 + the signal or by the signal itself (a shell shows both as 128 + it)
        TALLY.case(16, code == 128 + sig.value or (twice and code == -sig.value), f"{what}: exit {code}")
        TALLY.case(16, took < 2.5, f"{what}: took {took:.1f}s")
        TALLY.case(16, "Traceback" not in text and "internal error" not in text, f"{what}: traceback")
        if not twice:
            TALLY.case(16, "interrupted" in text, f"{what}: no partial report")
        TALLY.case(16, bool(child) and _gone(child), f"{what}: child {child} left")
        _kill(child)


# -- 17. values ----------------------------------------------------------------------------------------------------


def _bad_faults() -> Iterator[tuple[str, str]]:
    base = {"kind": "drop", "moment": "event", "target": "response.create", "value": 1006, "k": 1}
    wrong: dict[str, list[object]] = {
        "kind": ["sneeze", "", 3, None, ["drop"]],
        "moment": ["whenever", "", 0, None],
        "target": ["a\n[[turn]]", "x y", "\x1b[31m", 5, None, "é" * 3, "t" * 300],
        "value": ["soon", -1, 999, 5000, 1.5, None, True],
        "k": ["x", -3, 0, 1.5, True, None, 10**7, 2**64],
    }
    for field, values in wrong.items():
        for v in values:
            yield json.dumps({"faults": [{**base, field: v}], "seed": 0}), f"{field}={v!r}"
    latency = {"kind": "latency", "moment": "all", "target": "*", "value": 0.05, "k": 1}
    for v in ("NaN", "Infinity", "-Infinity", "-5", "1e308", "86401", '"50ms"', "null", "true"):
        yield '{"faults": [' + json.dumps(latency).replace("0.05", v) + "]}", f"latency={v}"
    for kind in ("delay", "expire", "jitter", "barge_in", "burst", "pace"):
        for v in (-1, 1e308, "x"):
            yield json.dumps({"faults": [{"kind": kind, "moment": "event", "target": "x", "value": v}]}), f"{kind}={v}"
    for seed in (2**64, 2**63, -1, "x", 1.5, None, True):
        yield json.dumps({"faults": [], "seed": seed}), f"seed={seed!r}"
    for top in ("[]", "1", '"x"', "null", '{"faults": {}}', '{"faults": [1]}', '{"faults": [[]]}', '{"bogus": 1}',
                '{"faults": [{"kind": "drop", "moment": "event", "bogus": 1}]}'):  # fmt: skip
        yield top, f"top {top}"


def class_17(quick: bool, tmp: Path) -> None:
    """Each bad value in a bug script's schedule (and --seed out of range): exit 2, `file:line:col` naming the
    value, no run started (the command would leave a file), no traceback."""
    cases = list(_bad_faults())
    if quick:
        cases = cases[::6]
    marker = tmp / "ran"
    for n, (value, what) in enumerate(cases):
        path = _script(tmp, f"bug-{n}.toml", value)
        proc = run(["hunt", "--schedule", str(path), "--runs", "1", "--out", str(tmp / "h"), "--", "touch",
                    str(marker)], tmp)  # fmt: skip
        ok = clean(proc) and proc is not None and proc.returncode == 2
        ok = ok and proc is not None and f"bug-{n}.toml:1:".encode() in proc.stderr and not marker.exists()
        TALLY.case(17, ok, f"{what}: {proc.returncode if proc else 'hang'} {proc.stderr[-200:] if proc else b''!r}")
    for seed in ("18446744073709551616", "9223372036854775808", "-1"):
        marker = tmp / f"ran-{seed}"
        proc = run(["hunt", "--runs", "1", "--seed", seed, "--out", str(tmp / "h"), "--", "touch", str(marker)], tmp)
        TALLY.case(17, clean(proc) and proc is not None and proc.returncode == 2 and not marker.exists(),
                   f"--seed {seed}")  # fmt: skip
        served = run(["serve", "--seed", seed, "--port", "0"], tmp, timeout=10)
        TALLY.case(17, clean(served) and served is not None and served.returncode == 2, f"serve --seed {seed}")


# -- 18. outputs -------------------------------------------------------------------------------------------------------


def class_18(quick: bool, tmp: Path) -> None:
    """--out naming a file, a path under a file, /proc, /dev/null, a read-only directory; -o into a missing
    directory, a directory, /proc, /dev/full's folder...: exit 2 naming the flag, before the command ever runs."""
    (tmp / "file").write_text("x")
    ro = tmp / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    outs = [tmp / "file", tmp / "file" / "d", Path("/proc/rtrace"), Path("/dev/null"), Path("/proc/self/x")]
    if os.geteuid() != 0:
        outs.append(ro / "h")
    reports = [tmp / "no" / "such" / "r.json", tmp, Path("/proc/r.json"), Path("/proc/self/r.json"),
               tmp / "file" / "r.json"]  # fmt: skip
    marker = tmp / "ran"
    cases = [("--out", str(o), ["-o", str(tmp / "ok.json")]) for o in outs]
    cases += [("-o", str(r), ["--out", str(tmp / "h")]) for r in reports]
    for cmd in ("hunt", "sweep"):
        for flag, value, rest in cases if not quick else cases[::3]:
            if cmd == "sweep" and flag == "-o":
                continue
            argv = [cmd, "--runs", "1", flag, value, *(rest if cmd == "hunt" else []), "--", "touch", str(marker)]
            proc = run(argv, tmp)
            ok = clean(proc) and proc is not None and proc.returncode == 2 and not marker.exists()
            ok = ok and proc is not None and f"{flag} {value}".encode() in proc.stderr
            TALLY.case(18, ok, f"{cmd} {flag} {value}: {proc.returncode if proc else 'hang'}")
    ro.chmod(0o700)


# -- 19. floods --------------------------------------------------------------------------------------------------------


def class_19(quick: bool, tmp: Path) -> None:
    """Clients that flood pings and read nothing, through serve and through record, at several bounds: each is
    closed within seconds, the trace says so, the bytes held stay under twice the bound, and the server stops
    within a second after."""
    from rtrace.net.link import common
    from rtrace.net.link.proxy import RecordOptions, run_proxy
    from rtrace.net.link.server import ServerOptions, run_server
    from tests.test_net_link_server import ping_flood

    bounds = [256 << 10, 1 << 20, 4 << 20] if not quick else [1 << 20]
    for bound, via, clients in itertools.product(bounds, ("serve", "record"), (1, 3)):
        common.MAX_BACKLOG = bound
        trace = tmp / f"{via}-{bound}-{clients}.jsonl"

        async def go(via: str = via, trace: Path = trace, clients: int = clients) -> tuple[list[float], float]:
            if via == "serve":
                async with run_server(ServerOptions(record=trace)) as srv:
                    took = await asyncio.gather(*(ping_flood(srv.port, seconds=15) for _ in range(clients)))
                    start = time.monotonic()
                return list(took), time.monotonic() - start
            async with run_server(ServerOptions()) as srv:
                async with run_proxy(RecordOptions(upstream=srv.url, output=trace)) as proxy:
                    took = await asyncio.gather(*(ping_flood(proxy.port, seconds=15) for _ in range(clients)))
                    start = time.monotonic()
                return list(took), time.monotonic() - start

        took, stopping = asyncio.run(go())
        what = f"{via}, bound {bound}, {clients} flooding"
        TALLY.case(19, max(took) < 10, f"{what}: flood lasted {max(took):.1f}s")
        TALLY.case(19, stopping < 1.5, f"{what}: stop took {stopping:.1f}s")
        text = trace.read_text()
        TALLY.case(19, text.count("closed 1008: the client read none") == clients, f"{what}: not in the trace")
    common.MAX_BACKLOG = 16 << 20


# -- 20. upstreams -----------------------------------------------------------------------------------------------------


def class_20(quick: bool, tmp: Path) -> None:
    """Upstreams that take TCP and never answer, that send a frame over the limit (several sizes), that close at
    once: the client gets a 502 in time, or the true close code, and the trace says what the upstream did."""
    from websockets.asyncio.client import connect
    from websockets.asyncio.server import serve
    from websockets.exceptions import ConnectionClosed, InvalidStatus

    from rtrace.net.link import proxy as proxy_module
    from rtrace.net.link.proxy import RecordOptions, run_proxy

    timeouts = [0.5, 1.0, 2.0] if not quick else [1.0]
    for n, limit in enumerate(timeouts):
        trace = tmp / f"silent{n}.jsonl"

        async def silent(limit: float = limit, trace: Path = trace) -> tuple[int, float]:
            server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            try:
                async with run_proxy(RecordOptions(upstream=f"ws://127.0.0.1:{port}/v1", output=trace,
                                                   open_timeout=limit)) as proxy:  # fmt: skip
                    start = time.monotonic()
                    try:
                        await connect(f"{proxy.url}/realtime", open_timeout=30)
                    except InvalidStatus as e:
                        return e.response.status_code, time.monotonic() - start
                    return 0, time.monotonic() - start
            finally:
                server.close()

        status, took = asyncio.run(silent())
        TALLY.case(20, status == 502 and took < limit + 2, f"silent upstream, {limit}s: {status} in {took:.1f}s")
        TALLY.case(20, "upstream unreachable" in trace.read_text(), f"silent upstream, {limit}s: not in the trace")
    sizes = [1 << 20, 3 << 20] if not quick else [1 << 20]
    proxy_module.MAX_FRAME_BYTES = 512 << 10
    try:
        for n, size in enumerate(sizes):
            trace = tmp / f"big{n}.jsonl"

            async def big(size: int = size, trace: Path = trace) -> int | None:
                async def handler(ws: object) -> None:
                    await ws.send(json.dumps({"type": "session.created", "pad": "x" * size}))  # type: ignore[attr-defined]
                    try:
                        await ws.wait_closed()  # type: ignore[attr-defined]
                    except ConnectionClosed:
                        pass

                async with serve(handler, "127.0.0.1", 0, max_size=None) as up:
                    port = up.sockets[0].getsockname()[1]
                    async with run_proxy(RecordOptions(upstream=f"ws://127.0.0.1:{port}/v1", output=trace)) as p:
                        async with connect(f"{p.url}/realtime") as ws:
                            try:
                                await asyncio.wait_for(ws.recv(), 10)
                            except (ConnectionClosed, asyncio.TimeoutError):
                                pass
                            rcvd = ws.protocol.close_rcvd
                            return int(rcvd.code) if rcvd is not None else None

            code = asyncio.run(big())
            text = trace.read_text()
            TALLY.case(20, code == 1009, f"oversized upstream frame {size}: client got {code}")
            TALLY.case(20, "the upstream sent a frame over the" in text and '"by":"recorder"' in text,
                       f"oversized upstream frame {size}: the trace does not say so")  # fmt: skip
    finally:
        proxy_module.MAX_FRAME_BYTES = 64 * 1024 * 1024


RUNNERS: dict[int, Callable[[bool, Path], None]] = {
    14: class_14, 15: class_15, 16: class_16, 17: class_17, 18: class_18, 19: class_19, 20: class_20,
}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return run_classes(RUNNERS, CLASSES, OUT, argv, __doc__ or "")


if __name__ == "__main__":
    sys.exit(main())
