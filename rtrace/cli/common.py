"""What several commands share: reading the trace arguments, refusing to write over an input, durations, settings.

Helpers only; no command is registered here."""

import functools
import inspect
import os
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, cast

import typer

from ..core.severity import FAIL_ON_LEVELS
from ..rules.base import THRESHOLDS, Config
from .root import UsageError, shown

if TYPE_CHECKING:
    from ..engine.settings import Settings
    from ..report.progress import Progress


#: `--fail-on`'s choices: `rules.base.FAIL_ON_LEVELS` (a command reads `.value`).
FailOn: Any = cast(Any, Enum)("FailOn", {level: level for level in FAIL_ON_LEVELS}, type=str)


Command = Callable[..., None]


def spliced(placeholder: str, parameters: list[inspect.Parameter]) -> Callable[[Command], Command]:
    """Put `parameters` (options made from declarations) where a command's `placeholder` parameter is; the
    command gets their values in it, as a dict by name. What typer reads is the signature, so an option declared
    once (`net.fake.options.ENDPOINT_OPTIONS`, `rules.base.THRESHOLDS`) is an option of every command that splices
    it."""

    def wrap(func: Command) -> Command:
        own = inspect.signature(func)
        params: list[inspect.Parameter] = []
        for p in own.parameters.values():
            if p.name == placeholder:
                params.extend(parameters)
            else:
                params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))

        @functools.wraps(func)
        def run(**given: Any) -> None:
            values = {p.name: given.pop(p.name) for p in parameters}
            func(**given, **{placeholder: values})

        run.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        return run

    return wrap


def threshold_parameters() -> list[inspect.Parameter]:
    """An option per rule threshold (`rules.base.THRESHOLDS`): `--ack-timeout DURATION`, its help, its default."""
    from ..core.durations import format_duration

    out = []
    for field in THRESHOLDS:
        option = "--" + field.name.replace("_", "-")
        annotation = Annotated[float, duration_option(option, field.metadata["help"], format_duration(field.default))]
        keyword = inspect.Parameter.KEYWORD_ONLY
        out.append(inspect.Parameter(field.name, keyword, default=field.default, annotation=annotation))
    return out


def verbatim(text: str) -> str:
    """`text` shown as it is in a command's help: kept from rewrapping, brackets kept from rich markup."""
    return "\b\n" + "\n".join("  " + line.replace("[", "\\[") for line in text.splitlines())


def working(what: str) -> "Progress":
    """A spinner with the time spent on stderr, drawn only on a terminal once the work lasts a second
    (`report.progress`); `with working("redacting x"): ...`."""
    from ..report.progress import Progress

    return Progress(what)


class EscapedLines:
    """A text stream that passes each line written to it through `shown` (for the `print`s of `serve`, `record`)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._partial = ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._stream.write(shown(line) + "\n")
        return len(text)

    def flush(self) -> None:
        self._stream.flush()


def duration_option(option: str, help: str, default: str | None) -> Any:
    """`typer.Option` of a duration, in the one grammar (`rtrace.core.durations`: `50ms`, `1.5s`, `2m`; a bare
    number other than 0 is a usage error naming the option and the fix). The command gets seconds; `--help`
    shows the default as written."""

    def parse(value: Any) -> float:
        from ..core.durations import DurationError, parse_duration

        if isinstance(value, float):  # the default, already seconds
            return value
        try:
            return parse_duration(str(value), option)
        except DurationError as e:
            raise UsageError(str(e)) from None

    return typer.Option(
        option, parser=parse, metavar="DURATION", help=help, show_default=default if default is not None else False
    )


#: `--allow-special-files`, on every command that reads a trace by name.
AllowSpecial = Annotated[
    bool,
    typer.Option(
        "--allow-special-files", help="Also read FIFOs and devices by name (lines still bounded by --max-line-bytes)."
    ),
]


def allow_special(allowed: bool) -> None:
    """Let every reader of this run (other processes included) open FIFOs and devices (`loader.open_input`)."""
    if allowed:
        from ..core.loader import ALLOW_SPECIAL_ENV

        os.environ[ALLOW_SPECIAL_ENV] = "1"


def split_names(values: list[str] | None) -> list[str]:
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


def refuse_overwrite(inputs: list[str], outputs: list[Path | str | None]) -> None:
    """A usage error when an output is one of the inputs (or two outputs are one file): no command writes over
    what it reads."""
    from ..core.writer import same_file

    outs = [str(o) for o in outputs if o is not None and str(o) != "-"]
    for out in outs:
        for given in inputs:
            if given not in ("-", "<stdin>") and "://" not in given and same_file(out, given):
                raise UsageError(f"{out}: is the input {given}; rtrace never writes over its input (choose another)")
    for k, a in enumerate(outs):
        for b in outs[k + 1 :]:
            if same_file(a, b):
                raise UsageError(f"{a} and {b}: one file given for two outputs")


def local_inputs(paths: list[Path]) -> list[str]:
    """The local files among the traces the command line names (directories expanded; `file://` URLs as paths):
    what `refuse_overwrite` compares the outputs with (a remote URL is never a local output)."""
    from ..engine.parallel import url_of

    out: list[str] = []
    for path in paths:
        url = url_of(path)
        if url.startswith("file://"):
            out.append(url[len("file://") :])
        elif "://" not in url:
            out.extend(trace_paths([Path(url)]))
    return out


def trace_paths(paths: list[Path]) -> list[str]:
    """Files as given; directories expand to their `*.jsonl` files, plain or compressed (`loader.is_trace_name`:
    `*.jsonl.gz`, `.bz2`, `.xz`, `.zst`), sorted."""
    from ..core.loader import is_trace_name

    out: list[str] = []
    for path in paths:
        if str(path) != "-" and path.is_dir():
            found = sorted(str(p) for p in path.rglob("*.jsonl*") if is_trace_name(p.name) and p.is_file())
            if not found:
                raise UsageError(f"{path}: no *.jsonl trace (plain or .gz, .bz2, .xz, .zst) in this directory")
            out.extend(found)
        else:
            out.append(str(path))
    return out


def storage_options_of(text: str | None, pairs: list[str] | None) -> dict[str, Any]:
    """fsspec storage options from `--storage-options JSON` and then each `--storage-option KEY=VALUE` (a string;
    `true`/`false` are booleans). Messages never repeat a value: it may be a secret."""
    import orjson

    out: dict[str, Any] = {}
    if text:
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise UsageError("--storage-options is not valid JSON") from None
        if not isinstance(value, dict):
            raise UsageError("--storage-options must be a JSON object")
        out.update(value)
    for k, pair in enumerate(pairs or [], 1):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--storage-option number {k} is not KEY=VALUE")
        out[key.strip()] = {"true": True, "false": False}.get(value.lower(), value)
    return out


def inputs(paths: list[Path], storage_options: dict[str, Any]) -> list[tuple[str, int]]:
    """The traces the command line names, with their sizes: files as given, directories expanded to their
    `*.jsonl` files, fsspec URLs and globs listed by their backend (`parallel.expand_urls`)."""
    from ..engine import parallel

    out: list[tuple[str, int]] = []
    for path in paths:
        url = parallel.url_of(path)
        if "://" in url:
            out.extend(parallel.expand_urls([url], storage_options))
        else:
            out.extend(parallel.expand_urls(trace_paths([Path(url)])))
    return out


def project_settings(config_file: Path | None, isolated: bool) -> "Settings":
    from ..engine.settings import SettingsError, resolve

    if config_file is not None and isolated:
        raise UsageError("--config and --isolated exclude each other")
    try:
        return resolve(config_file, isolated)
    except SettingsError as e:
        raise UsageError(str(e)) from None


class Given:
    """An option's value: the command line's when given there, else the settings file's, else the default."""

    def __init__(self, ctx: typer.Context, settings: "Settings") -> None:
        self._ctx = ctx
        self._settings = settings

    def __call__(self, name: str, value: Any) -> Any:
        source = self._ctx.get_parameter_source(name)
        from_file = getattr(self._settings, name)
        if from_file is None or getattr(source, "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP"):
            return value
        return list(from_file) if isinstance(from_file, tuple) else from_file

    def config(self, **given: float) -> Config:
        """The rules' thresholds: `given` (the command's options, by field) where given on the command line, else
        the file's, else the default (a command without such an option has no source: the file's decides)."""
        return Config(**{f.name: self(f.name, given.get(f.name, f.default)) for f in THRESHOLDS})


def load_baseline(path: Path) -> frozenset[str]:
    from ..report.baseline import BaselineError, load

    try:
        return load(path)
    except BaselineError as e:
        raise UsageError(str(e)) from None


def written(output: Path, write: Callable[[], None]) -> None:
    try:
        write()
    except OSError as e:
        raise UsageError(f"{e.filename or output}: cannot write: {e.strerror or e}") from None
