"""The fake endpoint's options, declared once (`ENDPOINT_OPTIONS`: field, kind, help, default; the fault flags
from `rtrace.net.faults.FAULTS`): `rtrace serve` and `rtrace sweep` make their options from it, the pytest marker
takes them by field, `rtrace.net.server.options_from_cli` reads them. Imports no asyncio or websockets: the
command line builds its commands from it at start-up."""

from __future__ import annotations

import dataclasses
from typing import Any

from .faults import FAULTS


@dataclasses.dataclass(frozen=True)
class EndpointOption:
    """One option of the fake endpoint, declared once: `--NAME` of `rtrace serve` (and of `rtrace sweep` when
    `sweep`), the keyword of `options_from_cli` and of the pytest marker (`field`), its kind (as a fault flag's,
    `rtrace.net.faults.Kind`, or `text`, `int`, `float`, `path`, `flag`, `texts`, `durations`), default and help."""

    field: str
    kind: str
    help: str
    default: Any = None
    sweep: bool = True
    #: The option as typed, when not `--FIELD-WITH-DASHES`.
    flag: str | None = None

    @property
    def option(self) -> str:
        return self.flag or "--" + self.field.replace("_", "-")


#: Every option of the fake endpoint, in the order the help lists them (the fault flags are `FAULTS`).
ENDPOINT_OPTIONS: tuple[EndpointOption, ...] = (
    EndpointOption("latency", "durations", "Delay of server events: 50ms, or TYPE=120ms for one server event type.",
                   sweep=False),
    EndpointOption("jitter", "durations",
                   "Random +/- variation of each delay: 5ms, or TYPE=5ms for one server event type (order is kept).",
                   sweep=False),
    EndpointOption("seed", "int", "Seed for the jitter and the tool arguments."),
    EndpointOption("record", "path", "Write every event received and sent to this trace.", sweep=False),
    EndpointOption("from_trace", "path", "Take the responses, in order and paced, from this trace.", sweep=False,
                   flag="--from"),
    EndpointOption("host", "text", "Address to bind (not loopback: a warning is printed).", "127.0.0.1", sweep=False),
    EndpointOption("port", "int", "Port (0: a free one).", 0, sweep=False),
    *(EndpointOption(f.field, f.kind, f.help) for f in FAULTS),
    EndpointOption("close_code", "int", "Close code of the faults: 1006 no close frame (drops), 1000, 1001, 1011, ..."),
    EndpointOption("duplicate_id", "text", "append_duplicate, ignore or reject.", "append_duplicate", sweep=False),
    EndpointOption("story_chunk_delay", "duration", "Pause before each delta of a story (60ms).", sweep=False),
    EndpointOption("preamble", "text", "A message before each call, in one response: auto (as the model: "
                   "gpt-realtime-2.1 does, gpt-realtime not), on, off.", "auto"),
    EndpointOption("first_output_delay", "duration",
                   "Pause from response.created to the first output item (the real server's ~300ms; 0)."),
    EndpointOption("fault_times", "int", "Times each fault fires per server (0: every time).", 1),
    EndpointOption("tool", "text", "Call this tool on each user turn: NAME, or NAME='{\"k\": 1}' for its arguments."),
    EndpointOption("audio_tone", "float", "Output audio: a tone of this many Hz (0: silence)."),
    EndpointOption("audio_pace", "float",
                   "Output audio pace: 0 all at once (default), 1 real time, 0.5 twice as fast."),
    EndpointOption("transcript", "texts", "What the user says in each audio turn (server VAD), in order."),
    EndpointOption("vad_threshold", "float", "Server VAD: RMS of a speech frame, fraction of full scale (0.02)."),
    EndpointOption("script", "path", "A scenario script (TOML): turns that answer, call, fail, close, delay."),
    # The listening side's TLS (`rtrace.net.tls`; `rtrace record` takes the same three).
    EndpointOption("tls", "flag", "Listen on wss:// with a certificate made and kept (printed).", False, sweep=False),
    EndpointOption("cert", "path", "With --tls: your certificate chain (PEM) instead of a made one.", sweep=False),
    EndpointOption("key", "path", "With --cert: its private key (PEM).", sweep=False),
)  # fmt: skip
OPTION_BY_FIELD: dict[str, EndpointOption] = {o.field: o for o in ENDPOINT_OPTIONS}
#: The kinds that take a list (a value given once is a list of one) and those that take durations.
LIST_KINDS = frozenset({"specs", "numbers", "texts", "durations"})
DURATION_KINDS = frozenset({"duration", "durations"})
