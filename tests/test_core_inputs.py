"""`core.inputs`: opening user input (special files refused by name, never a block on a FIFO)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rtrace.core.inputs import UnreadableInput, open_input


def test_open_input_refuses_special_files_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(UnreadableInput, match="is a FIFO, not a regular file"):
        open_input(fifo)
    with pytest.raises(UnreadableInput, match="is a character device"):
        open_input("/dev/zero")
    with open_input("/dev/zero", allow_special=True) as f:
        assert f.read(4) == b"\0\0\0\0"
    with pytest.raises(UnreadableInput, match="is a directory"):
        open_input(tmp_path)
