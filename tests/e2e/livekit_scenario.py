"""Drive the real livekit-agents `AgentSession` (OpenAI realtime plugin, text only, no room) against an endpoint.

Runs in a `.venv-e2e-<version>` (no rtrace there): scenario `race` (turn A calls a tool; turn B asks for a story while
it runs; turn C goes out with the tool output's create: the queued-speech push), `interrupted` (turn A calls a tool
whose generation the server holds open (a script delays its `response.done`); the turn is interrupted once the tool
has returned, so its output is pushed by the interrupted-generation path; turn C goes out with that create) or
`reconnect` (turn A; the server drops the socket). Prints one JSON summary line, asserts nothing. Exits by itself
within --timeout (0 done, 3 timed out, 4 client failed). A turn A that livekit ends without calling its tool (its
reply failed or discarded, say on a reconnect) ends the scenario too, as an app reading its SpeechHandle would:
done, with the handle's error as `turn_a_error`.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

TOOL_SECONDS = 0.3
#: `interrupted`: the turn is interrupted this long after its tool returned (its output recorded by then).
INTERRUPT_AFTER_TOOL = 0.05
TURN_A = "What's the weather in Paris?"
TURN_B = "While you look, tell me a slow story."
TURN_C = "And what should I wear?"
QUIET_SECONDS = 0.5


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="websocket base url of the endpoint, e.g. ws://127.0.0.1:PORT/v1")
    parser.add_argument("--scenario", choices=["race", "interrupted", "reconnect"], required=True)
    parser.add_argument("--timeout", type=float, default=20.0, help="give up after this many seconds")
    parser.add_argument("--client-trace", default=None, help="also write the client's own view as a native trace")
    parser.add_argument(
        "--log",
        action="append",
        default=[],
        metavar="FORMAT:PATH",
        help="also log as livekit's own setup does (json: `start`, dev: `dev`), at DEBUG, to PATH; with "
        "LK_OPENAI_DEBUG=1 in the environment the log holds the realtime events",
    )
    return parser.parse_args(argv)


def _livekit_logging(specs: list[str]) -> list[logging.Handler]:
    """livekit's `setup_logging` (agents/cli/log.py), as `python agent.py start` (json) and `dev` (coloured) call
    it, at DEBUG (production needs LIVEKIT_LOG_LEVEL=DEBUG for this); each handler it adds on the root logger
    writes to its file instead of stdout. The driver's own stderr handler stays at WARNING."""
    root = logging.getLogger()
    for handler in root.handlers:
        handler.setLevel(logging.WARNING)
    if not specs:
        return []
    from livekit.agents.cli.log import setup_logging

    added: list[logging.Handler] = []
    for spec in specs:
        kind, _, path = spec.partition(":")
        if kind not in ("json", "dev") or not path:
            raise SystemExit(f"--log {spec!r}: expected json:PATH or dev:PATH")
        before = list(root.handlers)
        setup_logging("DEBUG", devmode=kind == "dev", console=False)
        for handler in root.handlers:
            if handler not in before and isinstance(handler, logging.StreamHandler):
                handler.setStream(open(path, "w", encoding="utf-8"))  # closed before exit
                added.append(handler)
    return added


class ClientTrace:
    """The events as the client queued and received them (its event hooks), in rtrace's native format.

    `conn` is counted here: livekit announces a reconnect only after it has queued the replay, so a new
    connection is recognised by its first event instead, the `session.update` every (re)connect starts with.
    """

    def __init__(self, path: str | None) -> None:
        self._file = open(path, "w", encoding="utf-8") if path else None
        self._t0: float | None = None
        self.conn = 0
        self._other_events = True

    def write(self, direction: str, event: dict[str, Any]) -> None:
        if direction == "client":
            if event.get("type") == "session.update" and self._other_events:
                if self.conn:
                    self._line("meta", {"type": "connection.closed"})
                self.conn += 1
                self._other_events = False
                self._line("meta", {"type": "connection.opened"})
            elif event.get("type") != "session.update":
                self._other_events = True
        self._line(direction, event)

    def _line(self, direction: str, event: dict[str, Any]) -> None:
        if self._file is None:
            return
        now = time.monotonic()
        if self._t0 is None:
            self._t0 = now
        line = {"t": round(now - self._t0, 6), "dir": direction, "conn": max(self.conn, 1), "event": event}
        self._file.write(json.dumps(line) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            if self.conn:
                self._line("meta", {"type": "connection.closed"})
            self._file.close()
            self._file = None


class Progress:
    """What the scenario has seen so far; the summary printed at the end."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.marks: dict[str, float] = {}
        self.tool_calls: list[str] = []
        self.reconnects = 0
        self.open_responses = 0
        self.server_errors: list[str] = []
        self.last_server_event = time.monotonic()
        self.tool_done = asyncio.Event()
        #: The error turn A's SpeechHandle ended with, when it ended without calling its tool.
        self.turn_a_error: str | None = None

    def mark(self, name: str) -> None:
        self.marks.setdefault(name, round(time.monotonic() - self.t0, 4))


async def _wait_quiet(progress: Progress) -> None:
    """Until no response is open and the server has said nothing for QUIET_SECONDS."""
    while True:
        idle = time.monotonic() - progress.last_server_event
        if progress.open_responses <= 0 and idle >= QUIET_SECONDS:
            return
        await asyncio.sleep(0.05)


async def _tool_ran(progress: Progress, turn: Any) -> bool:
    """Until the turn's tool has run (True), or the turn ended without calling it (False: livekit failed or
    discarded its reply, e.g. on a reconnect, and says so on the turn's SpeechHandle). An app reads the handle;
    a driver that only waited for the tool would hang on a turn the library had already ended, and a hunt would
    take the driver's hang for the library's."""
    while not progress.tool_done.is_set():
        if turn.done() and not progress.tool_calls:
            progress.mark("turn_a_ended")
            error = turn.exception()
            progress.turn_a_error = f"{type(error).__name__}: {error}" if error is not None else None
            return False
        await asyncio.sleep(0.02)
    return True


async def _run(args: argparse.Namespace, progress: Progress, trace: ClientTrace) -> None:
    from livekit.agents import Agent, AgentSession, function_tool
    from livekit.plugins import openai

    on_tool_start: list[Callable[[], None]] = []

    class WeatherAgent(Agent):
        def __init__(self) -> None:
            super().__init__(instructions="You are a test agent.")

        @function_tool
        async def get_weather(self, city: str) -> str:
            """Get the current weather for a city.

            Args:
                city: the city name
            """
            progress.tool_calls.append(city)
            progress.mark("tool_started")
            for callback in on_tool_start:
                callback()
            await asyncio.sleep(TOOL_SECONDS)
            progress.mark("tool_finished")
            if args.scenario == "interrupted":
                asyncio.get_running_loop().call_later(INTERRUPT_AFTER_TOOL, interrupt_turn_a)
            return f"sunny, 21C in {city}"

    model = openai.realtime.RealtimeModel(base_url=args.url, api_key="x", modalities=["text"])
    session: AgentSession = AgentSession(llm=model)
    agent = WeatherAgent()
    await session.start(agent, record=False)
    rt_session = agent.realtime_llm_session

    def interrupt_turn_a() -> None:
        # the generation that called the tool is still open (its response.done is late): interrupting it now sends
        # the tool's output down the interrupted-generation path
        progress.mark("interrupted")
        session.interrupt()

    def on_client_event(event: dict[str, Any]) -> None:
        trace.write("client", event)
        item = event.get("item") or {}
        if event.get("type") == "conversation.item.create" and item.get("type") == "function_call_output":
            progress.mark("output_create_queued")
            if args.scenario in ("race", "interrupted") and "turn_c" not in progress.marks:
                # turn C at the moment the tool's output create goes out: its push races the output's ack
                progress.mark("turn_c")
                session.generate_reply(user_input=TURN_C)

    def on_server_event(event: dict[str, Any]) -> None:
        trace.write("server", event)
        progress.last_server_event = time.monotonic()
        kind = event.get("type")
        if kind == "response.created":
            progress.open_responses += 1
        elif kind == "response.done":
            progress.open_responses -= 1
        elif kind == "error":
            progress.server_errors.append(str((event.get("error") or {}).get("code")))

    def on_reconnected(_event: Any) -> None:
        progress.reconnects += 1
        progress.mark("reconnected")
        progress.open_responses = 0

    def on_tools_executed(_event: Any) -> None:
        progress.mark("tools_executed")
        progress.tool_done.set()

    rt_session.on("openai_client_event_queued", on_client_event)
    rt_session.on("openai_server_event_received", on_server_event)
    rt_session.on("session_reconnected", on_reconnected)
    session.on("function_tools_executed", on_tools_executed)

    if args.scenario == "race":

        def start_turn_b() -> None:
            # turn B while the tool runs: a long reply streamed in chunks, queued ahead of the tool's reply
            if "turn_b" not in progress.marks:
                progress.mark("turn_b")
                session.generate_reply(user_input=TURN_B)

        on_tool_start.append(start_turn_b)

    progress.mark("turn_a")
    turn_a = session.generate_reply(user_input=TURN_A)
    if await _tool_ran(progress, turn_a) and args.scenario in ("race", "interrupted"):
        while "turn_c" not in progress.marks:
            await asyncio.sleep(0.02)
    # the tool's own reply and turn C's reply come after the output: wait until the conversation settles
    await asyncio.sleep(QUIET_SECONDS)
    await _wait_quiet(progress)
    progress.mark("settled")
    try:
        await asyncio.wait_for(session.aclose(), timeout=5.0)
        await asyncio.wait_for(model.aclose(), timeout=2.0)
    except asyncio.TimeoutError:
        # the conversation is over; a slow close is noted, not a failed run
        progress.mark("close_timed_out")


async def _main(args: argparse.Namespace) -> int:
    progress = Progress()
    trace = ClientTrace(args.client_trace)
    status = "done"
    try:
        await asyncio.wait_for(_run(args, progress, trace), timeout=args.timeout)
    except asyncio.TimeoutError:
        status = "timeout"
    finally:
        trace.close()
    summary = {
        "status": status,
        "scenario": args.scenario,
        "livekit_agents": _version(),
        "marks": progress.marks,
        "tool_calls": progress.tool_calls,
        "reconnects": progress.reconnects,
        "server_errors": progress.server_errors,
        "turn_a_error": progress.turn_a_error,
    }
    print(json.dumps(summary), flush=True)
    return 0 if status == "done" else 3


def _version() -> str:
    from livekit.agents import __version__

    return str(__version__)


def main(argv: list[str]) -> None:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logs = _livekit_logging(args.log)
    # a watchdog independent of the event loop: even a wedged loop or a non-daemon thread cannot hang CI
    faulthandler.dump_traceback_later(args.timeout + 10.0, exit=True)
    try:
        code = asyncio.run(_main(args))
    except Exception as exc:  # a client that cannot even start is a failed run, reported as such
        logging.exception("scenario failed: %s", exc)
        code = 4
    for handler in logs:
        handler.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # livekit may leave worker threads behind; never wait on them


if __name__ == "__main__":
    main(sys.argv[1:])
