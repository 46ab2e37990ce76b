"""MkDocs hook (mkdocs.yml `hooks:`): the pages generated from the code, so the site says what the code does.

- `cli.md`, the command reference, from the click command tree of `rtrace.cli.app` (typer's app): every command
  with its help, usage, arguments, options (names, value, default) and the examples of its `--help`.
- `faults.md`, every fault action, from `rtrace.net.faults.actions.ACTIONS`: its flags, script key, words, moments,
link.
- `rules/index.md` and a page per rule (`rules/<slug>.md`), from `rtrace.rules.RULES`: the table, then each rule's
  docstring, which is its user documentation (what `rtrace rules SLUG` prints).

Nothing is written into docs/: the pages exist in the build only (`on_files`). `tests/test_docs_site.py` builds
the site and checks that both references are complete.
"""

from __future__ import annotations

import enum
import textwrap
from typing import Any

RULES_INTRO = """\
Every rule has a stable id (`RT101`) and slug (`deleted-function-call-output`): both are public interface and never
change, and either selects the rule (`--select`, `--ignore`, `[tool.rtrace]`). Each page below is the rule's
docstring, the text `rtrace rules SLUG` prints: what it means, why it matters, a minimal example, the usual cause
and the fix. How a client change is judged against the server's conversation is in
[Analyzing traces](../analyze.md#how-the-servers-conversation-is-judged).
"""


def rule_pages() -> dict[str, str]:
    """`rules/index.md` and `rules/<slug>.md` of every rule in `rtrace.rules.RULES`, by path."""
    from rtrace.rules import RULES

    rows = [
        f"| [{rule.id}]({rule.slug}.md) | `{rule.slug}` | {rule.severity} | {_cell(rule.title)} |" for rule in RULES
    ]
    pages = {
        "rules/index.md": "# Rules\n\n"
        + RULES_INTRO
        + "\n| id | slug | severity | what it reports |\n|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n"
    }
    for rule in RULES:
        pages[f"rules/{rule.slug}.md"] = (
            f"# {rule.id} {rule.slug}\n\n"
            f"Severity: **{rule.severity}**. {_cell(rule.title)[0].upper() + _cell(rule.title)[1:]}.\n\n"
            f"{rule.doc().strip()}\n\n"
            f"`rtrace analyze --select {rule.id}` runs it alone; `--ignore {rule.slug}` leaves it out.\n"
        )
    return pages


def cli_reference() -> str:
    """`cli.md`: the command tree of `rtrace.cli.app`, as click sees it."""
    import typer.main

    from rtrace.cli import app

    group = typer.main.get_command(app)  # a click group (typer's own copy of click, or click itself)
    root = group.context_class(group, info_name="rtrace")
    parts = [
        "# Command reference\n",
        "Generated from the commands themselves (their `--help`): every command, its arguments and options. Durations "
        "take a unit (`250us`, `50ms`, `1.5s`, `2m`); exit codes are 0 clean, 1 findings, 2 usage, 3 unreadable "
        "input, 4 replay or sweep failed.\n",
        "```\nrtrace [OPTIONS] COMMAND [ARGS]...\n```\n",
        _params(group, root),
    ]
    names = group.list_commands(root)
    parts.append(
        "| command | what it does |\n|---|---|\n"
        + "\n".join(
            f"| [`{name}`](#rtrace-{name}) | {_cell(_first_line(group.commands[name].help))} |"
            for name in names
            if not group.commands[name].hidden
        )
        + "\n"
    )
    for name in names:
        command = group.commands[name]
        if command.hidden:
            continue
        ctx = command.context_class(command, info_name=name, parent=root)
        usage = " ".join(["rtrace", name, *command.collect_usage_pieces(ctx)])
        parts.append(f"## rtrace {name}\n")
        parts.append(_text(command.help or "") + "\n")
        parts.append(f"```\n{usage}\n```\n")
        parts.append(_params(command, ctx))
        if command.epilog:
            parts.append(f"```\n{_epilog(command.epilog)}\n```\n")
    return "\n".join(parts)


def _params(command: Any, ctx: Any) -> str:
    arguments, options = [], []
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        help_ = _cell(_text(getattr(param, "help", None) or ""))
        if param.param_type_name == "argument":
            arguments.append(f"| `{param.make_metavar(ctx)}` | {help_} |")
            continue
        names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
        value = "" if param.is_flag else f"`{param.make_metavar(ctx)}`"
        options.append(f"| {names} | {value} | {_default(param)} | {help_} |")
    out = []
    if arguments:
        out.append("| argument | |\n|---|---|\n" + "\n".join(arguments) + "\n")
    if options:
        out.append("| option | value | default | |\n|---|---|---|---|\n" + "\n".join(options) + "\n")
    return "\n".join(out)


def _default(param: Any) -> str:
    default = param.default
    if callable(default) or default is None or default == () or default == []:
        return ""
    if isinstance(default, enum.Enum):
        default = default.value
    if param.is_flag:
        if param.secondary_opts:
            return f"`{param.opts[0] if default else param.secondary_opts[0]}`"
        return ""
    if isinstance(default, (list, tuple)):
        default = ",".join(str(v.value if isinstance(v, enum.Enum) else v) for v in default)
    return f"`{default}`"


def _text(text: str) -> str:
    """Click help text as Markdown prose: its `\\b` (no rewrap) marks dropped, rich's escapes undone."""
    return textwrap.dedent(text.replace("\b", "")).replace("\\[", "[").strip()


def _epilog(text: str) -> str:
    return textwrap.dedent(_text(text).strip("\n")).strip()


def _first_line(text: str | None) -> str:
    return _text(text or "").split("\n\n")[0].replace("\n", " ")


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def fault_reference() -> str:
    """`faults.md`: every fault action of `rtrace.net.faults.actions.ACTIONS`, as `serve`, a script and `rtrace hunt`
    know it: its flags, its script key, what it does in words, what the hunt draws, whether a link makes it."""
    from rtrace.net.faults.actions import BY_COST, Action

    def words(action: Action) -> str:
        from rtrace.net.faults.schedule import Fault

        moment = action.moments[0]
        target = {"event": "TYPE", "sent": "TYPE", "all": "*"}.get(moment, "")
        return Fault(action.kind, moment, target, action.canonical, 2).describe()  # type: ignore[arg-type]

    rows = []
    for action in BY_COST:
        flags = ", ".join(f"`--{f.name}` (marker `{f.field}`)" for f in action.flags) or (
            f"`--{action.kind}`" if action.key is None else "-")  # fmt: skip
        key = f"`{action.key}`" if action.key else "-"
        rows.append(f"| `{action.kind}` | {_cell(words(action))} | {flags} | {key} | {', '.join(action.moments)} | "
                    f"{'yes' if action.link else 'no'} |")  # fmt: skip
    return "\n".join([
        "# Faults\n",
        "Generated from the declaration of each fault action (`rtrace/net/faults/actions.py`): the kinds `rtrace hunt` "
        "searches, cheapest first, with an example of each in words (at the 2nd point it acts at), the `serve` flags "
        "and the script key that make it, where it acts, and whether a link to a real server (`--upstream`, "
        "`record`) can make it.\n",
        "| kind | an example | `serve` flag | script key | acts at | a link makes it |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ])  # fmt: skip


# -- MkDocs ----------------------------------------------------------------------------------------------------------


def generated_pages() -> dict[str, str]:
    return {"cli.md": cli_reference(), "faults.md": fault_reference(), **rule_pages()}


def on_config(config: Any) -> Any:
    """The nav's `rules/index.md` entry becomes a section: the index, then a page per rule."""
    from rtrace.rules import RULES

    def expand(entries: list[Any]) -> list[Any]:
        out = []
        for entry in entries:
            if isinstance(entry, dict):
                ((title, target),) = entry.items()
                if target == "rules/index.md":
                    rules = [{f"{r.id} {r.slug}": f"rules/{r.slug}.md"} for r in RULES]
                    entry = {title: ["rules/index.md", *rules]}
                elif isinstance(target, list):
                    entry = {title: expand(target)}
            out.append(entry)
        return out

    config["nav"] = expand(config["nav"])
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, text in generated_pages().items():
        files.append(File.generated(config, path, content=text))
    return files
