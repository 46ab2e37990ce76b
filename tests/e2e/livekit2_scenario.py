"""Drive livekit-agents 2.0.0b1's `LiveSession` (OpenAI realtime model, text only, no room) against an endpoint.

2.0.0b1 ships no plugin package: the model is `livekit.agents.llm._realtime.openai.RealtimeModel`, and
`AgentSession` is a deprecated alias of `LiveSession`. Scenarios as in tests/e2e/livekit_scenario.py: `race` (turn A
calls a tool; turn B asks for a story while it runs; turn C goes out with the tool output's create) or `reconnect`
(turn A; the server drops the socket, by a fault of the endpoint). Prints one JSON summary line, asserts nothing.
Exits by itself within --timeout (0 done, 3 timed out, 4 client failed).

    v2/bin/python livekit2_scenario.py --url ws://127.0.0.1:PORT/v1 --scenario race [--debug-log FILE]

--debug-log sets LK_OPENAI_DEBUG=1 (read when livekit is imported) and livekit's production JSON logging
(`livekit.agents.cli.log.setup_logging(DEBUG, devmode=False, console=False)`) into FILE; --dev-log the same with the
dev (coloured) formatter. --client-trace writes the client's own view (its openai_client_event_queued /
openai_server_event_received hooks) in rtrace's native format.
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
TURN_A = "What's the weather in Paris?"
TURN_B = "While you look, tell me a slow story."
TURN_C = "And what should I wear?"
QUIET_SECONDS = 0.5


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--url", required=True, help="websocket base url of the endpoint, e.g. ws://127.0.0.1:PORT/v1")
    p.add_argument("--scenario", choices=["race", "reconnect"], required=True)
    p.add_argument("--timeout", type=float, default=20.0, help="give up after this many seconds")
    p.add_argument("--client-trace", default=None, help="also write the client's own view as a native trace")
    p.add_argument("--debug-log", default=None, help="LK_OPENAI_DEBUG=1 + livekit's JSON log handler into this file")
    p.add_argument("--dev-log", default=None, help="LK_OPENAI_DEBUG=1 + livekit's dev log handler into this file")
    return p.parse_args(argv)


class ClientTrace:
    """The events as the client queued and received them, one native trace line each.

    A new connection is recognised by the `session.update` each (re)connect starts with (the client announces a
    reconnect only after it has sent the replay).
    """

    def __init__(self, path: str | None) -> None:
        self._file = open(path, "w", encoding="utf-8") if path else None
        self._t0: float | None = None
        self.conn = 0
        self._seen_other = True

    def write(self, direction: str, event: dict[str, Any]) -> None:
        if direction == "client":
            is_update = event.get("type") == "session.update"
            if is_update and self._seen_other:
                if self.conn:
                    self._line("meta", {"type": "connection.closed"})
                self.conn += 1
                self._line("meta", {"type": "connection.opened"})
                self._seen_other = False
            elif not is_update:
                self._seen_other = True
        self._line(direction, event)

    def _line(self, direction: str, event: dict[str, Any]) -> None:
        if self._file is None:
            return
        now = time.monotonic()
        self._t0 = now if self._t0 is None else self._t0
        rec = {"t": round(now - self._t0, 6), "dir": direction, "conn": max(self.conn, 1), "event": event}
        self._file.write(json.dumps(rec) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            if self.conn:
                self._line("meta", {"type": "connection.closed"})
            self._file.close()
            self._file = None


class Progress:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.marks: dict[str, float] = {}
        self.tool_calls: list[str] = []
        self.reconnects = 0
        self.open_responses = 0
        self.server_errors: list[str] = []
        self.client_events: dict[str, int] = {}
        self.last_server_event = time.monotonic()
        self.tool_done = asyncio.Event()

    def mark(self, name: str) -> None:
        self.marks.setdefault(name, round(time.monotonic() - self.t0, 4))


async def wait_quiet(progress: Progress) -> None:
    while progress.open_responses > 0 or time.monotonic() - progress.last_server_event < QUIET_SECONDS:
        await asyncio.sleep(0.05)


async def run(args: argparse.Namespace, progress: Progress, trace: ClientTrace) -> None:
    from livekit.agents import Agent, LiveSession, function_tool
    from livekit.agents.llm._realtime.openai import RealtimeModel

    on_tool_start: list[Callable[[], None]] = []
    rt_session_fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    class WeatherAgent(Agent):
        def __init__(self) -> None:
            super().__init__(instructions="You are a test agent.")

        async def on_enter(self) -> None:
            # 2.0: an agent's session objects are only reachable inside its hooks and tools (a contextvar binding)
            if not rt_session_fut.done():
                rt_session_fut.set_result(self.realtime_llm_session)

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
            return f"sunny, 21C in {city}"

    model = RealtimeModel(base_url=args.url, api_key="x", modalities=["text"])
    session: LiveSession = LiveSession(llm=model)
    agent = WeatherAgent()
    await session.start(agent, record=False)
    rt_session = await rt_session_fut

    def on_client_event(event: dict[str, Any]) -> None:
        trace.write("client", event)
        kind = str(event.get("type"))
        progress.client_events[kind] = progress.client_events.get(kind, 0) + 1
        item = event.get("item") or {}
        if kind == "conversation.item.create" and item.get("type") == "function_call_output":
            progress.mark("output_create_queued")
            if args.scenario == "race" and "turn_c" not in progress.marks:
                progress.mark("turn_c")  # turn C with the tool output's create: its push races the output's ack
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
            if "turn_b" not in progress.marks:  # while the tool runs: a long reply, queued ahead of the tool's
                progress.mark("turn_b")
                session.generate_reply(user_input=TURN_B)

        on_tool_start.append(start_turn_b)

    progress.mark("turn_a")
    session.generate_reply(user_input=TURN_A)
    await progress.tool_done.wait()
    if args.scenario == "race":
        while "turn_c" not in progress.marks:
            await asyncio.sleep(0.02)
    await asyncio.sleep(QUIET_SECONDS)
    await wait_quiet(progress)
    progress.mark("settled")
    try:
        await asyncio.wait_for(session.aclose(), timeout=5.0)
        await asyncio.wait_for(model.aclose(), timeout=2.0)
    except asyncio.TimeoutError:
        progress.mark("close_timed_out")


async def amain(args: argparse.Namespace) -> int:
    progress = Progress()
    trace = ClientTrace(args.client_trace)
    status = "done"
    try:
        await asyncio.wait_for(run(args, progress, trace), timeout=args.timeout)
    except asyncio.TimeoutError:
        status = "timeout"
    finally:
        trace.close()
    from livekit.agents import __version__

    summary = {
        "status": status,
        "scenario": args.scenario,
        "livekit_agents": str(__version__),
        "marks": progress.marks,
        "tool_calls": progress.tool_calls,
        "reconnects": progress.reconnects,
        "server_errors": progress.server_errors,
        "client_events": progress.client_events,
    }
    print(json.dumps(summary), flush=True)
    return 0 if status == "done" else 3


def setup_logs(args: argparse.Namespace) -> None:
    if not (args.debug_log or args.dev_log):
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
        return
    os.environ.setdefault("LK_OPENAI_DEBUG", "1")  # before livekit is imported
    from livekit.agents.cli.log import setup_logging

    root = logging.getLogger()
    for path, devmode in ((args.debug_log, False), (args.dev_log, True)):
        if path:
            before = list(root.handlers)
            setup_logging("DEBUG", devmode=devmode, console=False)
            (handler,) = [h for h in root.handlers if h not in before]
            handler.setStream(open(path, "w", encoding="utf-8"))  # type: ignore[attr-defined]


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    setup_logs(args)
    faulthandler.dump_traceback_later(args.timeout + 10.0, exit=True)
    try:
        code = asyncio.run(amain(args))
    except Exception as exc:
        logging.exception("scenario failed: %s", exc)
        print(json.dumps({"status": "failed", "scenario": args.scenario, "error": repr(exc)}), flush=True)
        code = 4
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # livekit may leave worker threads behind; never wait on them


if __name__ == "__main__":
    main(sys.argv[1:])
