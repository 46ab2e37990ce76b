"""The fake endpoint's options, declared once (`ENDPOINT_OPTIONS`: field, kind, help, default, how its value is read
and where it goes; the fault flags from `rtrace.net.faults.flags.FAULTS`): `rtrace serve` and `rtrace sweep` make their
options from it, the pytest marker takes them by field, `rtrace.net.link.server.options_from_cli` reads them by it. Each
option has one name: `--audio-tone` is the field `audio_tone` of the marker, of `EndpointOptions` or
`ServerOptions`. Imports no asyncio or websockets: the command line builds its commands from it at start-up."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any, Literal

from ...core.durations import parse_duration
from ..faults.actions import valid_close_code
from ..faults.flags import FAULTS
from ..faults.values import check_seed

#: The names three fields of `EndpointOptions` had before each option kept one name (its option's): an old one is
#: refused, the message naming the new (`EndpointOptions(...)`, the pytest marker).
RENAMED: dict[str, str] = {"audio_tone_hz": "audio_tone", "vad_rms": "vad_threshold", "transcripts": "transcript"}


def renamed(names: Any) -> str | None:
    """What is said of the old names among `names` (`RENAMED`), or None when there is none."""
    old = [n for n in RENAMED if n in names]
    if not old:
        return None
    said = "; ".join(f"{n} is now {RENAMED[n]}" for n in old)
    return f"{said} (each option keeps the name of its `rtrace serve` option)"


#: `--preamble`: as the model does (None), always, never.
PREAMBLE_MODES: dict[str, bool | None] = {"auto": None, "on": True, "off": False}


@dataclasses.dataclass(frozen=True)
class EndpointOption:
    """One option of the fake endpoint, declared once: `--NAME` of `rtrace serve` (and of `rtrace sweep` when
    `sweep`), the keyword of `options_from_cli` and of the pytest marker (`field`), its kind (as a fault flag's,
    `rtrace.net.faults.flags.Kind`, or `text`, `int`, `float`, `path`, `flag`, `texts`, `durations`), default and help;
    how its given value is read and checked (`read`: ValueError naming the option) and the field of that name it
    goes into (`into`: `EndpointOptions`, `ServerOptions` or both; none: `options_from_cli` reads it with others:
    the latencies, TLS, the tool, the faults, the script)."""

    field: str
    kind: str
    help: str
    default: Any = None
    sweep: bool = True
    #: The option as typed, when not `--FIELD-WITH-DASHES`.
    flag: str | None = None
    into: tuple[Literal["endpoint", "server"], ...] = ()
    read: Callable[[Any], Any] | None = None

    @property
    def option(self) -> str:
        return self.flag or "--" + self.field.replace("_", "-")


def _within(option: str, low: float, high: float, what: str, above: bool = False) -> Callable[[Any], Any]:
    def read(value: Any) -> Any:
        if not (low < value <= high if above else low <= value <= high):
            raise ValueError(f"{option} {value:g}: {what}")
        return value

    return read


def _one_of(option: str, modes: dict[str, Any]) -> Callable[[Any], Any]:
    def read(value: Any) -> Any:
        if value not in modes:
            names = list(modes)
            raise ValueError(f"{option} must be {', '.join(names[:-1])} or {names[-1]}, not {value!r}")
        return modes[value]

    return read


def _duration(option: str) -> Callable[[Any], float]:
    return lambda value: parse_duration(value, option)


def _close_code(code: int) -> int:
    if not valid_close_code(code):
        raise ValueError(f"--close-code {code}: a close may carry 1000-1003, 1007-1014 or 3000-4999; 1005 sends a "
                         "close frame without a code, 1006 ends the connection without one")  # fmt: skip
    return code


def _fault_times(times: int) -> int:
    if times < 0:
        raise ValueError(f"--fault-times {times}: 0 (every time) or more")
    return times


def _trace(path: Any) -> str:
    found = os.fspath(path)
    if not os.path.isfile(found):
        raise ValueError(f"{found}: no such trace file")
    return found


#: Every option of the fake endpoint, in the order the help lists them (the fault flags are `FAULTS`).
ENDPOINT_OPTIONS: tuple[EndpointOption, ...] = (
    EndpointOption("latency", "durations", "Delay of server events: 50ms, or TYPE=120ms for one server event type.",
                   sweep=False),
    EndpointOption("jitter", "durations",
                   "Random +/- variation of each delay: 5ms, or TYPE=5ms for one server event type (order is kept).",
                   sweep=False),
    EndpointOption("seed", "int", "Seed for the jitter and the tool arguments.", into=("endpoint", "server"),
                   read=lambda seed: check_seed(seed, "--seed")),  # a trace header holds it: 63 bits
    EndpointOption("record", "path", "Write every event received and sent to this trace.", sweep=False,
                   into=("server",), read=os.fspath),
    EndpointOption("from_trace", "path", "Take the responses, in order and paced, from this trace.", sweep=False,
                   flag="--from", into=("server",), read=_trace),
    EndpointOption("host", "text", "Address to bind (not loopback: a warning is printed).", "127.0.0.1", sweep=False,
                   into=("server",)),
    EndpointOption("port", "int", "Port (0: a free one).", 0, sweep=False, into=("server",)),
    *(EndpointOption(f.field, f.kind, f.help) for f in FAULTS),
    EndpointOption("close_code", "int", "Close code of the faults: 1006 no close frame (drops), 1000, 1001, 1011, ...",
                   read=_close_code),
    EndpointOption("duplicate_id", "text", "append_duplicate, ignore or reject.", "append_duplicate", sweep=False,
                   into=("endpoint",), read=_one_of("--duplicate-id", {m: m for m in ("append_duplicate", "ignore",
                                                                                   "reject")})),
    EndpointOption("story_chunk_delay", "duration", "Pause before each delta of a story (60ms).", sweep=False,
                   into=("endpoint",), read=_duration("--story-chunk-delay")),
    EndpointOption("preamble", "text", "A message before each call, in one response: auto (as the model: "
                   "gpt-realtime-2.1 does, gpt-realtime not), on, off.", "auto", into=("endpoint",),
                   read=_one_of("--preamble", PREAMBLE_MODES)),
    EndpointOption("first_output_delay", "duration",
                   "Pause from response.created to the first output item (the real server's ~300ms; 0).",
                   into=("endpoint",), read=_duration("--first-output-delay")),
    EndpointOption("fault_times", "int", "Times each fault fires per server (0: every time).", 1, read=_fault_times),
    EndpointOption("tool", "text", "Call this tool on each user turn: NAME, or NAME='{\"k\": 1}' for its arguments."),
    EndpointOption("audio_tone", "float", "Output audio: a tone of this many Hz (0: silence).", into=("endpoint",),
                   read=_within("--audio-tone", 0, 20000, "give 0 (silence) or a frequency up to 20000 Hz")),
    EndpointOption("audio_pace", "float",
                   "Output audio pace: 0 all at once (default), 1 real time, 0.5 twice as fast.", into=("endpoint",),
                   read=_within("--audio-pace", 0, 100, "0 (all at once), 1 (real time), or a factor up to 100")),
    EndpointOption("transcript", "texts", "What the user says in each audio turn (server VAD), in order.",
                   into=("endpoint",), read=list),
    EndpointOption("vad_threshold", "float", "Server VAD: RMS of a speech frame, fraction of full scale (0.02).",
                   into=("endpoint",),
                   read=_within("--vad-threshold", 0, 1, "a fraction of full scale above 0, at most 1", above=True)),
    EndpointOption("script", "path", "A scenario script (TOML): turns that answer, call, fail, close, delay."),
    # The listening side's TLS (`rtrace.net.link.tls`; `rtrace record` takes the same three).
    EndpointOption("tls", "flag", "Listen on wss:// with a certificate made and kept (printed).", False, sweep=False),
    EndpointOption("cert", "path", "With --tls: your certificate chain (PEM) instead of a made one.", sweep=False),
    EndpointOption("key", "path", "With --cert: its private key (PEM).", sweep=False),
)  # fmt: skip
OPTION_BY_FIELD: dict[str, EndpointOption] = {o.field: o for o in ENDPOINT_OPTIONS}
#: The kinds that take a list (a value given once is a list of one) and those that take durations.
LIST_KINDS = frozenset({"specs", "numbers", "texts", "durations"})
DURATION_KINDS = frozenset({"duration", "durations"})
