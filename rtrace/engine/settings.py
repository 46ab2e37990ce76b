"""Project settings: `[tool.rtrace]` in `pyproject.toml`, or an `rtrace.toml` of its own, found as ruff finds its.

Looked for from the working directory upward: in each directory, `rtrace.toml` (or `.rtrace.toml`), then a
`pyproject.toml` that has a `[tool.rtrace]` table; the first found is used and the search stops (settings are not
merged across directories). `--config FILE` names the file instead, `--isolated` uses none. An option given on the
command line wins over the file.

    [tool.rtrace]                 # in rtrace.toml: the same keys at the top level
    select = ["RT101", "unanswered-function-call"]
    ignore = ["RT107"]
    fail-on = "warning"           # error (default), warning, info, never
    ack-timeout = "5s"            # durations take a unit: 500ms, 1.5s, 2m (`core.durations`)
    burst-window = "10ms"
    reply-timeout = "10s"
    strict = false
    baseline = "rtrace-baseline.json"   # relative to the settings file

Every problem names the file and the key (`pyproject.toml: [tool.rtrace] fail-on: ...`); an unknown key is an
error with the closest known one, so a typo never turns a setting off silently.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..core.durations import DurationError, parse_duration
from ..core.inputs import MAX_NESTING, TooDeep, UnreadableInput, check_nesting, read_side_input, value_nesting_over
from ..core.severity import FAIL_ON_LEVELS
from ..rules import UnknownRule, find_rule
from ..rules.base import THRESHOLDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

FILES = ("rtrace.toml", ".rtrace.toml")
#: The most bytes a settings file (or a pyproject.toml looked into) is read to.
SETTINGS_BYTES = 4 << 20
FAIL_ON = FAIL_ON_LEVELS
#: key -> (Settings field, kind); the rules' thresholds are `rules.base.THRESHOLDS` (`ack-timeout`, ...).
KEYS: dict[str, tuple[str, str]] = {
    "select": ("select", "rules"),
    "ignore": ("ignore", "rules"),
    "fail-on": ("fail_on", "fail-on"),
    **{f.name.replace("_", "-"): (f.name, "duration") for f in THRESHOLDS},
    "strict": ("strict", "bool"),
    "baseline": ("baseline", "path"),
}


class SettingsError(ValueError):
    """A settings file that cannot be read or holds a wrong value (the message names the file and the key)."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a settings file says; None where it says nothing."""

    path: Path | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    fail_on: str | None = None
    ack_timeout: float | None = None
    burst_window: float | None = None
    reply_timeout: float | None = None
    strict: bool | None = None
    baseline: Path | None = None


def candidates(start: Path) -> Iterator[Path]:
    """The directories looked in, from `start` up to the root."""
    start = start.resolve()
    yield start
    yield from start.parents


def find(start: Path) -> Path | None:
    """The settings file that applies in `start`, or None."""
    for folder in candidates(start):
        for name in FILES:
            if (folder / name).is_file():
                return folder / name
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            try:
                text = _text(pyproject)
            except (OSError, UnicodeDecodeError, UnreadableInput):
                continue  # not a file rtrace's settings can be in
            try:
                table = _parse(text, pyproject).get("tool", {})
            except TooDeep:  # too deep to read: ours to refuse (`load` says where) if it names our table
                if re.search(r"^\s*\[\s*tool\s*\.\s*rtrace\s*[.\]]", text, re.MULTILINE):
                    return pyproject
                continue
            except tomllib.TOMLDecodeError as e:
                if "rtrace" not in text:
                    continue  # another tool's broken file, which cannot hold rtrace's settings: not ours to refuse
                why = _toml_error(pyproject, e, text)
                raise SettingsError(f"{why}; its [tool.rtrace] settings cannot be read") from None
            if isinstance(table, dict) and "rtrace" in table:
                return pyproject
    return None


def _toml_error(path: Path, error: Exception, source: str) -> str:
    """`path:line:col: not valid TOML: why`, the place taken from the parser's message (`source` is the file's
    text: "at end of document" is its last line)."""
    text = str(error)
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)", text)
    if m is not None:
        return f"{path}:{m[1]}:{m[2]}: not valid TOML: {text[: m.start()] + text[m.end() :]}"
    m = re.search(r"\s*\(at end of document\)", text)
    if m is not None:
        lines = source.rstrip("\n").split("\n")
        return f"{path}:{len(lines)}:{len(lines[-1]) + 1}: not valid TOML: {text[: m.start()]} (at the end of the file)"
    return f"{path}: not valid TOML: {text}"


def load(path: Path) -> Settings:
    """The settings in `path` (`rtrace.toml`: top level; `pyproject.toml`: `[tool.rtrace]`)."""
    try:
        source = _text(path)
    except UnreadableInput as e:
        raise SettingsError(str(e)) from None
    except OSError as e:
        raise SettingsError(f"{path}: cannot read it: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise SettingsError(f"{path}: not UTF-8 text") from None
    try:
        data = _parse(source, path)
    except TooDeep as e:
        raise SettingsError(str(e)) from None
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(_toml_error(path, e, source)) from None
    where = f"{path}:"
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("rtrace", {})
        where = f"{path}: [tool.rtrace]"
        if not isinstance(data, dict):
            raise SettingsError(f"{where} must be a table")
    values: dict[str, Any] = {"path": path}
    for key, value in data.items():
        if key not in KEYS:
            near = difflib.get_close_matches(key, list(KEYS), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else f" (known: {', '.join(KEYS)})"
            raise SettingsError(f"{where} unknown key {key!r}{hint}")
        field, kind = KEYS[key]
        values[field] = _value(where, key, kind, value, path.parent)
    return Settings(**values)


def _text(path: Path) -> str:
    return read_side_input(path, "the settings file", SETTINGS_BYTES).decode("utf-8")


def _parse(text: str, path: Path) -> dict[str, Any]:
    """TOML text of a side input, its nesting bounded (`core.inputs`) before tomllib, which recurses."""
    check_nesting(text, str(path), "toml")
    data = tomllib.loads(text)
    if value_nesting_over(data):
        raise TooDeep(f"{path}:1: tables nested deeper than {MAX_NESTING} levels (dotted keys); refused")
    return data


def _value(where: str, key: str, kind: str, value: object, folder: Path) -> object:
    if kind == "rules":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SettingsError(f"{where} {key} must be a list of rule ids or slugs")
        names = tuple(v.strip() for item in value for v in item.split(",") if v.strip())
        for name in names:
            try:
                find_rule(name)
            except UnknownRule as e:
                raise SettingsError(f"{where} {key}: {e}") from None
        return names
    if kind == "fail-on":
        if value not in FAIL_ON:
            raise SettingsError(f"{where} {key} must be one of {', '.join(FAIL_ON)}, not {value!r}")
        return value
    if kind == "duration":
        if not isinstance(value, str):
            raise SettingsError(f"{where} {key} must be a duration string with a unit, e.g. \"5s\" or \"500ms\"")
        try:
            return parse_duration(value, key)
        except DurationError as e:
            raise SettingsError(f"{where} {e}") from None
    if kind == "bool":
        if not isinstance(value, bool):
            raise SettingsError(f"{where} {key} must be true or false")
        return value
    if kind == "path":
        if not isinstance(value, str) or not value.strip():
            raise SettingsError(f"{where} {key} must be a file name")
        return folder / value
    raise AssertionError(kind)


def resolve(config: Path | None, isolated: bool, cwd: Path | None = None) -> Settings:
    """The settings of this run: none with `isolated`, `config` when given, else the one found from `cwd`."""
    if isolated:
        return Settings()
    if config is not None:
        if not config.exists():
            raise SettingsError(f"{config}: no such settings file")
        return load(config)
    found = find(cwd or Path.cwd())
    return load(found) if found is not None else Settings()
