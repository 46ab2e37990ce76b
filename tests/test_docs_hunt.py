"""docs/hunt.md, run: its example hunt on the repository's test client states what the hunt prints, and every
`rtrace hunt` command line in it (the CI recipe's included) is one the command line takes."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rtrace.cli import main
from rtrace.net.link.server import ServerOptions

from .test_readme import blocks

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "hunt.md").read_text(encoding="utf-8")
EXAMPLE = DOC.split("## Example")[1].split("\n## ")[0]


def test_the_example_hunt_prints_what_the_doc_shows(tmp_path: Path) -> None:
    (command,) = blocks(EXAMPLE, "sh")
    argv = shlex.split(command.strip())
    assert argv[:2] == ["rtrace", "hunt"]
    where = argv.index("--")
    argv[where + 1] = sys.executable  # `python`, the one with rtrace's packages
    argv[where:where] = ["--out", str(tmp_path / "rtrace-hunt")]
    done = subprocess.run([sys.executable, "-m", "rtrace.cli", *argv[1:]], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout.replace(str(tmp_path / "rtrace-hunt"), "rtrace-hunt").replace(sys.executable, "python")
    (shown,) = blocks(EXAMPLE, "text")

    def timing_free(text: str) -> str:  # on a loaded machine a shrink may stop at another latency, hit 2/3
        return re.sub(r"reproduced \d+/", "reproduced N/", re.sub(r"\d+(\.\d+)?ms", "Nms", text))

    for line in shown.splitlines():
        if line.startswith("rtrace hunt:") or not line.strip():
            continue  # its run count and time vary
        stated = line.split("...")[0].split("shrinking took")[0].rstrip()
        assert timing_free(stated) in timing_free(out), (stated, out)


@pytest.mark.parametrize("line", [line for line in DOC.splitlines() if "rtrace hunt --" in line])
def test_every_hunt_command_in_the_doc_is_one_the_cli_takes(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = line[line.index("rtrace hunt --") :].split("`")[0].strip()
    argv = shlex.split(text.replace("${{ github.run_number }}", "7"))
    taken: list[object] = []
    monkeypatch.setattr("rtrace.net.hunt.hunt.load_schedule", lambda path: taken.append(path))
    monkeypatch.setattr(
        "rtrace.net.link.server.options_from_cli", lambda **given: taken.append(given) or ServerOptions()
    )
    monkeypatch.setattr("rtrace.net.hunt.hunt.hunt", lambda *a, **k: pytest.skip("the command line was taken"))
    if "COMMAND" in argv:
        argv[argv.index("COMMAND")] = "true"
    with pytest.raises(pytest.skip.Exception):
        main(argv[1:])


def test_the_fallbacks_the_doc_states_are_the_hunts() -> None:
    from rtrace.net.hunt.hunt import FALLBACKS, RELIABLE

    words = {1: "one", 2: "two", 3: "three", 4: "four"}
    assert f"up to {words[FALLBACKS]} more of\n   the schedules the search saw it under" in DOC
    assert RELIABLE == 0.5 and "reproduces in half of its re-runs" in DOC
