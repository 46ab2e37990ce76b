"""The Makefile's `preflight` (the first step of `make test`): what the machine must give besides the package
registries is checked before anything is installed, and each missing piece is named with how to get it, instead
of a failure deep in a recipe (apt-get without root, npm ci without npm, a Node too old for the clients). Run with
a PATH of stand-ins, so each check sees the machine the test makes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")


def machine(tmp_path: Path, *, uid: int, node: str | None, apt: bool = False, chromium: bool = False) -> Path:
    """A bin folder standing for a machine: `id -u` says `uid`; `node` (with npm) of that version, or none."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()

    def tool(name: str, body: str) -> None:
        (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / name).chmod(0o755)

    tool("id", f"echo {uid}")
    if node is not None:
        major = node.lstrip("v").split(".")[0]
        tool("node", f'case "$1" in --version) echo {node};; -e) test {major} -ge 20;; esac')
        tool("npm", "exit 0")
    if apt:
        tool("apt-get", "exit 0")
    if chromium:
        tool("chromium", "exit 0")
    return bin_


def preflight(bin_: Path) -> subprocess.CompletedProcess[str]:
    assert MAKE is not None
    env = {**os.environ, "PATH": str(bin_)}
    return subprocess.run(
        [MAKE, "-s", "preflight", f"PYTHON={sys.executable}"], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_a_machine_without_root_or_npm_is_told_what_each_part_needs_before_anything_is_installed(
    tmp_path: Path,
) -> None:
    done = preflight(machine(tmp_path, uid=1000, node=None))
    assert done.returncode != 0
    assert "npm and Node 20 or later are needed for the Node client tests" in done.stderr
    assert "this node is" not in done.stderr  # one message for what is missing, not one per check it fails
    assert (
        "Chromium is needed for the HTML report tests" in done.stderr and "sudo apt-get install chromium" in done.stderr
    )
    assert "make test installs" in done.stdout and "2.2 GB" in done.stdout  # what it would install, said first


def test_a_node_older_than_20_is_named_with_its_version(tmp_path: Path) -> None:
    done = preflight(machine(tmp_path, uid=1000, node="v18.19.0", chromium=True))
    assert done.returncode != 0
    assert "Node 20 or later is needed for the Node client tests; this node is v18.19.0" in done.stderr
    assert "Chromium" not in done.stderr  # one is on PATH: nothing to install


def test_ci_as_root_with_npm_passes_every_check(tmp_path: Path) -> None:
    """CI's machine: root (make installs chromium itself with apt-get) and Node 20: the run goes on, complete."""
    done = preflight(machine(tmp_path, uid=0, node="v20.11.1", apt=True))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_the_quick_start_states_what_make_test_says_it_installs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    banner = preflight_banner()
    for figure in ("2.2 GB", "12 minutes", "chromium", "Node 20"):
        assert figure in readme.split("make test", 1)[1][:1500], figure
        assert figure in banner or figure == "Node 20", figure


def preflight_banner() -> str:
    """The lines `make preflight` prints before its checks."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    body = text.split("\npreflight:\n")[1].split("\n\n")[0]
    return " ".join(line.split('@echo "', 1)[1].rstrip('"') for line in body.splitlines() if '@echo "' in line)
