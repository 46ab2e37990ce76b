"""What `serve`, `record` and `sweep` say to people around net's runners: where to connect and what the server or
the link does, until Ctrl-C (`serve_main`, `record_main`), and a sweep's values as typed (`sweep_main`); `replay`'s
values as typed (`replay_options`) and why a replay is a finding (`replay_divergence`); the warning of a server
anyone may reach and where the TLS certificate is (`warn_unless_loopback`, `announce_tls`). Imports
net lazily (the CLI starts without it); judges nothing, renders no report.
"""

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from ..net.hunt.sweep import RunResult, SweepResult
    from ..net.link.proxy import MakeProxy, RecordingProxy, RecordOptions
    from ..net.link.server import ServerOptions
    from ..net.link.tls import TlsFiles
    from ..net.replay.runner import ReplayOptions, ReplayResult


def serve_main(
    options: "ServerOptions", out: IO[str] = sys.stdout, err: IO[str] = sys.stderr, temporary: bool = False
) -> None:
    """`rtrace serve`: print where to connect and what the server does (`describe`), then serve until Ctrl-C or
    SIGTERM. `temporary`: `options.record` is a trace of rtrace's own, not the user's (not announced)."""
    from ..net.link.lateness import Lateness
    from ..net.link.server import RealtimeServer, describe, serve_forever

    warn_unless_loopback(options.host, "connect (no authentication)", err)

    started: list[RealtimeServer] = []

    def announce(server: RealtimeServer) -> None:
        started.append(server)
        print(f"rtrace serve: listening on {server.url}", file=out)
        print(f"  OPENAI_BASE_URL={server.http_url}", file=out)
        print(f"  websocket URL: {server.realtime_url}", file=out)
        print(f"  RTRACE_URL={server.url}", file=out)
        announce_tls(options.tls, out)
        if options.record is not None and not temporary:
            print(f"  recording to {options.record}", file=out)
        for line in describe(options):
            print(f"  {line}", file=out)
        print("  Ctrl-C to stop.", file=out)
        out.flush()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_forever(options, announce))
    lateness = getattr(started[0], "lateness", None) if started else None
    if isinstance(lateness, Lateness):
        print(lateness.summary(), file=err, flush=True)


def record_main(
    options: "RecordOptions",
    out: IO[str] = sys.stdout,
    err: IO[str] = sys.stderr,
    make: "MakeProxy | None" = None,
    says: Sequence[str] = (),
) -> None:
    """`rtrace record`: print where to point the client (and `says`: the faults of a link), then record until
    Ctrl-C or SIGTERM."""
    from ..net.link.common import safe_url, scrubbed_logging
    from ..net.link.proxy import RecordingProxy, check_upstream, record_forever

    check_upstream(options.upstream)
    make = make or RecordingProxy
    scrubbed_logging(err)
    exposure = "use the upstream through this proxy with their own credentials, and is recorded"
    warn_unless_loopback(options.host, exposure, err)

    def announce(proxy: "RecordingProxy", proxied: dict[str, str]) -> None:
        print(f"rtrace record: listening on {proxy.url}, forwarding to {safe_url(options.upstream)}", file=out)
        print(f"  OPENAI_BASE_URL={proxy.http_url}", file=out)
        print(f"  recording to {options.output}", file=out)
        for line in says:
            print(f"  {line}", file=out)
        for name, value in proxied.items():  # --intercept: what the client's process is given
            print(f"  {name}={value}", file=out)
        announce_tls(options.tls, out)
        print("  Ctrl-C to stop.", file=out)
        out.flush()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(record_forever(options, announce, make))


def warn_unless_loopback(host: str, exposure: str, err: IO[str]) -> None:
    """Tell the user (on `err`) what anyone who can reach `host` can do, unless only this machine can
    (`rtrace.net.link.common.LOOPBACK`)."""
    from ..net.link.common import LOOPBACK

    if host not in LOOPBACK:
        print(
            f"rtrace: warning: listening on {host}, not loopback: anyone who can reach this address can {exposure}.",
            file=err,
        )


def announce_tls(files: "TlsFiles | None", out: IO[str]) -> None:
    """Where the certificate is, and the variable each runtime needs to trust it (the start lines of `serve`,
    `record` and `hunt --tls`)."""
    from ..net.link.tls import trust_env

    if files is None:
        return
    if files.folder is not None:
        how = "made" if files.made else "reused"
        print(f"  TLS: certificate {how} in {files.folder} (kept between runs; trust {files.ca.name})", file=out)
    else:
        print(f"  TLS: certificate {files.cert} (trust it, or the authority that signed it)", file=out)
    for name, value, who in trust_env(files):
        print(f"  {name}={value}    # {who}", file=out)


def sweep_main(
    command: list[str],
    latency: str,
    runs: int,
    out_dir: Path,
    timeout: float | str | None,
    progress: "Callable[[RunResult], None] | None" = None,
    template: "ServerOptions | None" = None,
    announce: "Callable[[ServerOptions], None] | None" = None,
) -> "SweepResult":
    """`rtrace sweep` from command-line values: `latency` as `0,10,50,200ms`, `timeout` a duration (`5m`; None:
    no limit). Raises ValueError on bad input (`CommandNotFound` among them); the CLI renders the result
    (`rtrace.report.sweep`) and exits 1 on an error-severity finding, else 4 when the command failed in every
    run (`SweepResult.failed_every_run`), else 0."""
    from ..core.durations import format_duration, parse_duration
    from ..net.hunt.sweep import check_command, parse_latency_list, sweep
    from ..net.link.common import fresh_run_dir

    latencies = parse_latency_list(latency)
    seconds = parse_duration(timeout, "--timeout") if isinstance(timeout, str) else timeout
    if seconds is not None and seconds <= 0:
        raise ValueError(f"--timeout {format_duration(seconds)}: give a time above 0, e.g. 5m")
    if runs < 1:
        raise ValueError("--runs must be at least 1")
    check_command(command)
    out_dir = fresh_run_dir(out_dir, "--out")  # this sweep's own: no earlier sweep's trace is read as its
    return sweep(command, latencies, runs, out_dir, template, seconds, progress, announce)


def replay_options(
    *,
    target: str = "fake",
    compare: str | None = None,
    latency: list[str] | None = None,
    pace: str = "reactive",
    speed: float = 1.0,
    timeout: float = 5.0,
    own_responses: bool = False,
    output: str | os.PathLike[str] | None = None,
    api_key_env: str | None = None,
    on_key: Callable[[str], None] | None = None,
) -> "tuple[ReplayOptions, str | None]":
    """`ReplayOptions` (and the `--compare` URL) from command-line values: http(s):// URLs taken as ws(s)://, each
    URL checked, the key's destination checked, latencies in the duration grammar with their event types checked.
    Raises ValueError with a message for people."""
    from ..core.durations import parse_latencies
    from ..net.faults.flags import check_specs
    from ..net.link.common import check_ws_url, websocket_url
    from ..net.replay.runner import ReplayOptions, check_key_target
    from ..net.replay.session import PACES

    if pace not in PACES:
        raise ValueError(f"--pace {pace!r}: one of {', '.join(PACES)}")
    if not speed > 0 or speed == float("inf"):
        raise ValueError(f"--speed {speed:g}: a factor above 0 (2: twice as fast)")
    if not timeout > 0:
        raise ValueError("--timeout 0: each wait needs a time above 0, e.g. 5s")
    target = target if target == "fake" else websocket_url(target)
    compare = websocket_url(compare) if compare is not None else None
    if compare is not None and target != "fake":
        raise ValueError("--compare needs --target fake")
    default, by_type = parse_latencies(latency, "--latency") if latency else (None, {})
    check_specs(list(by_type), "server", "--latency", "TYPE=DURATION")
    if target != "fake" and latency:
        raise ValueError("--latency is the latency of the in-process fake (--target fake); a real endpoint has its own")
    for option, url in (("--target", target), ("--compare", compare)):
        if url is not None and url != "fake":
            check_ws_url(url, option)
            check_key_target(url, api_key_env)
    options = ReplayOptions(
        target=target, pace=pace, speed=speed, timeout=timeout, latency=default, latency_by_type=by_type,
        recorded_responses=not own_responses, output=output, api_key_env=api_key_env, on_key=on_key,
    )  # fmt: skip
    return options, compare


def replay_divergence(result: "ReplayResult", kept: bool) -> str | None:
    """Why what came back is not the recording's story (divergences, waits over the timeout), or None: the
    endpoint answered as recorded. `kept`: the replayed trace is kept (`-o`)."""
    waits = sum(c.timeouts for c in result.conns)
    if not waits and not result.divergences:
        return None
    where = f"the replayed trace is {result.replayed}" if kept else "keep the replayed trace with -o FILE"
    return f"{len(result.divergences)} divergence(s) from the recording, {waits} wait(s) over --timeout; {where}"
