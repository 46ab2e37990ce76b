"""The documentation site (mkdocs.yml, docs/): it builds with `mkdocs build --strict` (a broken link, a missing
anchor or a page outside the nav fails), and its generated references are complete: a page per rule of
`rtrace.rules.RULES` from its docstring, and every command and option of `rtrace.cli.app` in the command
reference, read from the click command tree (what `--help` shows)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from rtrace.rules import RULES

ROOT = Path(__file__).resolve().parent.parent


@cache
def hooks() -> ModuleType:
    """docs/hooks.py, the MkDocs hook that generates the references (not a package module: loaded by path)."""
    spec = importlib.util.spec_from_file_location("rtrace_docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def test_the_site_builds_strict_with_every_page(site: Path) -> None:
    for page in (ROOT / "docs").rglob("*.md"):
        name = page.relative_to(ROOT / "docs").with_suffix("")
        built = site / ("index.html" if name == Path("index") else name / "index.html")
        assert built.exists(), page
    assert (site / "cli" / "index.html").exists() and (site / "rules" / "index.html").exists()


def test_the_rule_reference_lists_every_rule_with_its_docstring(site: Path) -> None:
    pages = hooks().rule_pages()
    index = pages["rules/index.md"]
    assert set(pages) == {"rules/index.md", *(f"rules/{r.slug}.md" for r in RULES)}
    for rule in RULES:
        assert f"| [{rule.id}]({rule.slug}.md) | `{rule.slug}` | {rule.severity} |" in index, rule.id
        page = pages[f"rules/{rule.slug}.md"]
        assert page.startswith(f"# {rule.id} {rule.slug}\n") and rule.doc().strip() in page
        html = (site / "rules" / rule.slug / "index.html").read_text(encoding="utf-8")
        assert f"{rule.id} {rule.slug}" in html
        assert rule.slug in (site / "rules" / "index.html").read_text(encoding="utf-8")


def test_the_fault_reference_has_every_action_its_flags_and_its_words() -> None:
    """The generated `faults.md` says every action of `rtrace.net.faults.actions.ACTIONS` (a new fault is in the docs
    with no edit of them); the command reference has each of its flags."""
    from rtrace.net.faults.actions import ACTIONS

    page, cli = hooks().fault_reference(), hooks().cli_reference()
    for action in ACTIONS:
        row = next((line for line in page.splitlines() if line.startswith(f"| `{action.kind}` |")), None)
        assert row is not None, action.kind
        assert all(f"`--{f.name}` (marker `{f.field}`)" in row and f"--{f.name}" in cli for f in action.flags)
        assert action.key is None or f"`{action.key}`" in row


def _commands() -> tuple[Any, list[tuple[str, Any]]]:
    import typer.main

    from rtrace.cli import app

    group = typer.main.get_command(app)
    ctx = group.context_class(group, info_name="rtrace")
    return group, [(name, group.commands[name]) for name in group.list_commands(ctx)]


def test_the_command_reference_has_every_command_and_option_with_its_help() -> None:
    reference = hooks().cli_reference()
    group, commands = _commands()
    assert commands, "no command found"
    for name, command in [("", group), *commands]:
        if name:
            assert f"## rtrace {name}\n" in reference, name
            section = reference.split(f"## rtrace {name}\n")[1].split("\n## ")[0]
        else:
            section = reference.split("\n## ")[0]
        for param in command.params:
            if getattr(param, "hidden", False):
                continue
            for opt in [*param.opts, *param.secondary_opts] if param.param_type_name == "option" else ():
                assert f"`{opt}`" in section, (name, opt)
            words = " ".join((getattr(param, "help", None) or "").split())[:40]
            assert words.replace("|", "\\|").replace("\\[", "[") in " ".join(section.split()), (name, param.name)
        if name and command.epilog:
            assert hooks()._epilog(command.epilog).splitlines()[0] in section, name
