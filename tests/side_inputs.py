"""Hostile side inputs: every reader of user input that is not a trace (scenario scripts, settings files,
baselines, `--tool` arguments, LiveKit logs) attacked class by class. The cases are shared by the suite
(tests/test_hardening.py, a sample) and `make harden` (bench/harden.py, all of them).

A case is the files it writes, the command line, and what holding means: the exit code and a phrase the message
must hold. Each runs in a directory of its own (settings are found from the working directory).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

TRACE = Path(__file__).resolve().parent.parent / "sample_traces" / "real" / "tool-output-race.livekit-1.8.8.jsonl"
LOGS = Path(__file__).resolve().parent / "golden" / "livekit-logs"
BASELINE = b'{"schema": "rtrace.baseline/1", "findings": []}\n'


@dataclasses.dataclass
class Case:
    name: str
    files: dict[str, bytes | str]  # name -> content; a str starting with "->" is a symlink to that target
    args: list[str]  # "{trace}" is the sample trace
    exit: tuple[int, ...] = (2,)
    says: tuple[str, ...] = ()

    def write(self, where: Path) -> list[str]:
        """Make the case's files in `where` (a fresh directory); the command line to run there."""
        for name, content in self.files.items():
            path = where / name
            if isinstance(content, str) and content.startswith("->"):
                target = content[2:]
                if target == "fifo":
                    fifo = where / f".{name}.fifo"
                    os.mkfifo(fifo)
                    target = str(fifo)
                path.symlink_to(target)
            elif content == "fifo":
                os.mkfifo(path)
            else:
                path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return [str(TRACE) if a == "{trace}" else a for a in self.args]

    def held(self, returncode: int, said: str) -> bool:
        words = " ".join(said.split())
        return (
            returncode in self.exit
            and "Traceback" not in said
            and "internal error" not in said
            and all(phrase in words for phrase in self.says)
        )


# -- 9. nesting depth -----------------------------------------------------------------------------------------------


def _toml_values(depth: int) -> Iterator[tuple[str, str]]:
    """TOML values nested `depth` deep, every way TOML nests."""
    yield "arrays", "[" * depth + "]" * depth
    yield "inline tables", "{ a = " * depth + "1" + " }" * depth
    yield "mixed", "[{ a = " * ((depth + 1) // 2) + "1" + "}]" * ((depth + 1) // 2)
    yield "arrays with strings", '["]",' * depth + '"x"' + "]" * depth


def _json_values(depth: int) -> Iterator[tuple[str, str]]:
    yield "arrays", "[" * depth + "]" * depth
    yield "objects", '{"a":' * depth + "1" + "}" * depth
    yield "mixed", '[{"a":' * ((depth + 1) // 2) + "1" + "}]" * ((depth + 1) // 2)
    yield "strings with brackets", '[" [ { ",' * depth + '"x"' + "]" * depth


DEPTHS = (101, 200, 1000, 5000, 100_000)


def depth_cases(depths: tuple[int, ...] = DEPTHS) -> Iterator[Case]:
    """Every side input nested past the bound, each way its syntax nests: a usage error naming the place."""
    deep = ("nested deeper than",)
    for depth in depths:
        for shape, value in _toml_values(depth):
            tag = f"{shape} {depth} deep"
            yield Case(f"rtrace.toml select, {tag}", {"rtrace.toml": f"select = {value}\n"},
                       ["analyze", "{trace}"], says=deep)  # fmt: skip
            yield Case(f".rtrace.toml, {tag}", {".rtrace.toml": f"strict = true\nx = {value}\n"},
                       ["analyze", "{trace}"], says=deep)  # fmt: skip
            yield Case(f"pyproject [tool.rtrace], {tag}", {"pyproject.toml": f"[tool.rtrace]\nignore = {value}\n"},
                       ["analyze", "{trace}"], says=deep)  # fmt: skip
            other = f"[tool.rtrace]\nstrict = false\n\n[tool.other]\nx = {value}\n"
            yield Case(f"pyproject, another tool's table, {tag}", {"pyproject.toml": other},
                       ["analyze", "{trace}"], says=deep)  # fmt: skip
            yield Case(f"pyproject without our table, {tag}", {"pyproject.toml": f"[tool.other]\nx = {value}\n"},
                       ["analyze", "{trace}"], exit=(1,))  # fmt: skip  # not ours: skipped, the trace analyzed
            yield Case(f"--config, {tag}", {"cfg.toml": f"select = {value}\n"},
                       ["analyze", "{trace}", "--config", "cfg.toml"], says=deep)  # fmt: skip
            script = f'[[turn]]\nwhen = {{ response = 1 }}\ntext = "x"\nx = {value}\n'
            yield Case(f"--script, {tag}", {"s.toml": script}, ["serve", "--script", "s.toml", "--port", "0"],
                       says=deep)  # fmt: skip
            call = f'[[turn]]\nwhen = {{ response = 1 }}\ncall = {{ name = "t", arguments = {value} }}\n'
            yield Case(f"--script call arguments as a table, {tag}", {"s.toml": call},
                       ["serve", "--script", "s.toml", "--port", "0"], says=("nest",))  # fmt: skip
        dotted = ".".join(["a"] * depth)
        yield Case(f"rtrace.toml dotted key {depth} deep", {"rtrace.toml": f"{dotted} = 1\n"},
                   ["analyze", "{trace}"], says=deep)  # fmt: skip
        yield Case(f"--script dotted key {depth} deep", {"s.toml": f"[[turn]]\n{dotted} = 1\n"},
                   ["serve", "--script", "s.toml", "--port", "0"], says=deep)  # fmt: skip
        yield Case(f"--script table header {depth} deep", {"s.toml": f"[{dotted}]\nx = 1\n"},
                   ["serve", "--script", "s.toml", "--port", "0"], says=deep)  # fmt: skip
        for shape, value in _json_values(depth):
            tag = f"{shape} {depth} deep"
            yield Case(f"--baseline, {tag}", {"b.json": value}, ["analyze", "{trace}", "--baseline", "b.json"],
                       says=deep)  # fmt: skip
            yield Case(f"settings' baseline, {tag}", {"b.json": value, "rtrace.toml": 'baseline = "b.json"\n'},
                       ["analyze", "{trace}"], says=deep)  # fmt: skip
            if len(value) < 100_000:  # one argument of a command line holds at most 128 KiB
                yield Case(f"--tool arguments, {tag}", {}, ["serve", "--tool", f"lookup={value}", "--port", "0"],
                           says=deep)  # fmt: skip
            quoted = value.replace("\\", "\\\\").replace('"', '\\"')
            call = f'[[turn]]\nwhen = {{ response = 1 }}\ncall = {{ name = "t", arguments = "{quoted}" }}\n'
            says = deep if len(call) <= 1 << 20 else ("byte limit",)  # a script is read to 1 MiB
            yield Case(f"--script call arguments as JSON, {tag}", {"s.toml": call},
                       ["serve", "--script", "s.toml", "--port", "0"], says=says)  # fmt: skip
            schedule = f"# rtrace-schedule: {value}\n"
            says = deep if len(schedule) <= 1 << 20 else ("byte limit",)  # read to the script's 1 MiB
            yield Case(f"hunt --schedule, {tag}", {"h.toml": schedule},
                       ["hunt", "--schedule", "h.toml", "--runs", "1", "--", "true"], says=says)  # fmt: skip


# -- 10. regular expressions from a script -------------------------------------------------------------------------

#: Patterns refused when the script is read, with what the message says.
REFUSED_PATTERNS: list[tuple[str, str]] = [
    *((f"a{{{n}}}", "repetition count") for n in (1001, 10**6, 10**9, 10**20, 2**63)),
    *((f"a{{1,{n}}}", "repetition count") for n in (1001, 10**9, 10**30)),
    *((f"(?:x{{{n},}})", "repetition count") for n in (5000, 10**12)),
    *(("(" * n + "a" + ")" * n, "nested deeper") for n in (21, 50, 100, 400)),
    *(("(?:" * n + "a" + ")" * n, "nested deeper") for n in (21, 200)),
    ("(a{1000}){1000}", "unrolls"),
    ("((a{100}){100}){100}", "unrolls"),
    ("(?:(?:a{500}){500}){500}", "unrolls"),
    ("[ab]{999}" * 200, "characters"),
    ("x" * 1001, "characters"),
    ("(", "not a regular expression"),
    ("a)", "not a regular expression"),
    ("[z-a]", "not a regular expression"),
    ("\\", "not a regular expression"),
    ("a**", "not a regular expression"),
]
#: Patterns read, that backtrack catastrophically on a text the client may send: a search is bounded in time.
CATASTROPHIC: list[tuple[str, str]] = [
    ("(a+)+$", "a" * 40 + "b"),
    ("(a|aa)*c", "a" * 40),
    ("(a|a?)+$", "a" * 40 + "b"),
    ("(x+x+)+y", "x" * 40),
    ("(\\w+\\s?)+$", "word " * 20 + "!"),
    ("^(([a-z])+.)+[A-Z]([a-z])+$", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"),
    ("(.*a){12}", "a" * 40),
    ("(?:a*)*b", "a" * 5000),
    ("(a*)*$", "a" * 40 + "!"),
    ("((ab)*|a)*c", "ab" * 30),
]


def regex_cases() -> Iterator[Case]:
    for pattern, says in REFUSED_PATTERNS:
        quoted = pattern.replace("\\", "\\\\").replace('"', '\\"')
        script = f'[[turn]]\nwhen = {{ user_regex = "{quoted}" }}\ntext = "x"\n'
        phrases = ("user_regex", says) if says else ("user_regex",)
        yield Case(f"user_regex {pattern[:40]!r} ({len(pattern)} chars)", {"s.toml": script},
                   ["serve", "--script", "s.toml", "--port", "0"], says=phrases)  # fmt: skip


# -- 11. special and endless files as side inputs ------------------------------------------------------------------

SPECIALS = {
    "a FIFO": "fifo",
    "/dev/zero": "->/dev/zero",
    "/dev/urandom": "->/dev/urandom",
    "/dev/null": "->/dev/null",
    "a symlink to a FIFO": "->fifo",
    "a directory": "->/tmp",
}


def special_cases() -> Iterator[Case]:
    """Each side input as a FIFO (nobody writes), an endless device, a symlink to one, a directory."""
    refused = ("not a regular file",)
    for kind, content in SPECIALS.items():
        says = ("is a directory",) if kind == "a directory" else refused
        yield Case(f"--baseline {kind}", {"b.json": content}, ["analyze", "{trace}", "--baseline", "b.json"],
                   says=says)  # fmt: skip
        yield Case(f"settings' baseline {kind}", {"b.json": content, "rtrace.toml": 'baseline = "b.json"\n'},
                   ["analyze", "{trace}"], says=says)  # fmt: skip
        yield Case(f"--config {kind}", {"c.toml": content}, ["analyze", "{trace}", "--config", "c.toml"],
                   says=says)  # fmt: skip
        yield Case(f"--script {kind}", {"s.toml": content}, ["serve", "--script", "s.toml", "--port", "0"],
                   says=says)  # fmt: skip
        yield Case(f"hunt --schedule {kind}", {"h.toml": content},
                   ["hunt", "--schedule", "h.toml", "--runs", "1", "--", "true"], says=says)  # fmt: skip
        yield Case(f"--baseline {kind}, JSON out", {"b.json": content},
                   ["analyze", "{trace}", "--baseline", "b.json", "-f", "json"], says=says)  # fmt: skip
        # found by the search, not named: a special settings file is passed over (never opened)
        found = {"rtrace.toml": content} if kind != "a directory" else {}
        yield Case(f"rtrace.toml {kind}, found", found, ["analyze", "{trace}"], exit=(1,))
        yield Case(f"pyproject.toml {kind}, found", {"pyproject.toml": content}, ["analyze", "{trace}"], exit=(1,))
    # allowed by name: the size cap ends an endless one, the empty one is not a baseline
    allowed = ["--allow-special-files"]
    for kind, content, says in (
        ("/dev/zero", "->/dev/zero", "byte limit"),
        ("/dev/urandom", "->/dev/urandom", "byte limit"),
        ("/dev/null", "->/dev/null", "not JSON"),
    ):
        yield Case(f"--baseline {kind}, special files allowed", {"b.json": content},
                   ["analyze", "{trace}", "--baseline", "b.json", *allowed], says=(says,))  # fmt: skip
    big = b'{"schema": "rtrace.baseline/1", "findings": [' + b" " * (65 << 20) + b"]}"
    yield Case("--baseline of 65 MB", {"b.json": big}, ["analyze", "{trace}", "--baseline", "b.json"],
               says=("byte limit",))  # fmt: skip
    yield Case("--script of 2 MB", {"s.toml": "# x\n" * (1 << 19)}, ["serve", "--script", "s.toml", "--port", "0"],
               says=("byte limit",))  # fmt: skip
    yield Case("hunt --schedule of 2 MB", {"h.toml": "# x\n" * (1 << 19)},
               ["hunt", "--schedule", "h.toml", "--runs", "1", "--", "true"], says=("byte limit",))  # fmt: skip
    yield Case("rtrace.toml of 5 MB", {"rtrace.toml": "# x\n" * (5 << 18)}, ["analyze", "{trace}"],
               says=("byte limit",))  # fmt: skip


# -- 12. LiveKit logs past a preamble, in UTF-16 ----------------------------------------------------------------------


def _preambles() -> Iterator[tuple[str, bytes]]:
    yield "none", b""
    yield "an 80 KB banner line", b"=" * 80_000 + b"\n"
    yield "a 900 KB banner line", b"#" * 900_000 + b"\n"
    yield "a 1,500-frame stack trace", b"Traceback (most recent call last):\n" + b"".join(
        b'  File "/app/m%d.py", line %d, in f\n    g()\n' % (k, k) for k in range(1500)
    ) + b"ValueError: boom\n"
    yield "20,000 lines of another program", b"".join(b"starting worker %d ... ok\n" % k for k in range(20_000))
    yield "coloured lines of another logger", b"".join(
        b"\x1b[32m2025-01-01 10:00:%02d,000 - INFO myapp - hello %d\x1b[0m\n" % (k % 60, k) for k in range(3000)
    )


ENCODINGS = ("utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be")


def log_variants() -> Iterator[tuple[str, str, bytes]]:
    """(log name, what was done to it, the bytes) for every golden log, preamble and encoding."""
    for log, (preamble_name, preamble), encoding in itertools.product(
        sorted(LOGS.glob("*.log")), list(_preambles()), ENCODINGS
    ):
        text = (preamble + log.read_bytes()).decode("utf-8")
        yield log.name, f"{preamble_name}, {encoding}", text.encode(encoding)


__all__ = ["CATASTROPHIC", "Case", "depth_cases", "log_variants", "regex_cases", "special_cases"]
