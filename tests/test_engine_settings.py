"""Settings files: where they are found, what they may say, and how a wrong one is reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtrace.engine.settings import Settings, SettingsError, find, load, resolve


def test_found_upward_nearest_first_rtrace_toml_before_pyproject(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find(deep) is None or not str(find(deep)).startswith(str(tmp_path))
    (tmp_path / "pyproject.toml").write_text("[tool.rtrace]\nstrict = true\n")
    assert find(deep) == tmp_path / "pyproject.toml"
    (tmp_path / "a" / "pyproject.toml").write_text("[tool.black]\nline-length = 1\n")  # not ours: looked past
    assert find(deep) == tmp_path / "pyproject.toml"
    (tmp_path / "a" / "rtrace.toml").write_text("strict = false\n")
    assert find(deep) == tmp_path / "a" / "rtrace.toml"
    (tmp_path / "a" / "b" / "pyproject.toml").write_text("[tool.rtrace]\n")
    assert find(deep) == deep / "pyproject.toml"
    (tmp_path / "a" / "b" / "pyproject.toml").write_text("not = [toml\n")  # another tool's broken file
    assert find(deep) == tmp_path / "a" / "rtrace.toml"


def test_every_key_is_read(tmp_path: Path) -> None:
    path = tmp_path / "rtrace.toml"
    path.write_text(
        'select = ["RT101", "RT102,RT103"]\nignore = "RT107"\nfail-on = "warning"\nack-timeout = "2s"\n'
        'burst-window = "15ms"\nreply-timeout = "1.5m"\nstrict = true\nbaseline = "known.json"\n'
    )
    assert load(path) == Settings(
        path=path, select=("RT101", "RT102", "RT103"), ignore=("RT107",), fail_on="warning", ack_timeout=2.0,
        burst_window=0.015, reply_timeout=90.0, strict=True, baseline=tmp_path / "known.json",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "says"),
    [("selekt = []\n", "did you mean 'select'"), ("zzz = 1\n", "known: select"),
     ("select = [1]\n", "list of rule ids"), ("strict = 'yes'\n", "true or false"),
     ("burst-window = '10'\n", "burst-window 10: a duration needs a unit"), ("baseline = ''\n", "a file name"),
     ("[x\n", "not valid TOML"), ("a = 1\nb = [1,\n", r"rtrace.toml:2:\d+: not valid TOML: "),
     ("select = ['RT1O1']\n", r"select: unknown rule 'RT1O1' \(did you mean 'RT101'\?\)"),
     ("ignore = ['stale-snapshot']\n", r"ignore: unknown rule 'stale-snapshot' \(did you mean 'stale-snapshot-")],
)  # fmt: skip
def test_a_wrong_value_names_the_file_and_the_key(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "rtrace.toml"
    path.write_text(text)
    with pytest.raises(SettingsError, match=says) as e:
        load(path)
    assert str(path) in str(e.value)


def test_pyproject_table_and_resolve(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "x"\n[tool.rtrace]\nfail-on = "info"\n')
    assert load(path).fail_on == "info"
    assert resolve(None, True, tmp_path) == Settings()
    assert resolve(path, False, Path("/")).fail_on == "info"
    assert resolve(None, False, tmp_path).path == path
    with pytest.raises(SettingsError, match="no such settings file"):
        resolve(tmp_path / "missing.toml", False)
    path.write_text("[tool]\nrtrace = 1\n")
    with pytest.raises(SettingsError, match="must be a table"):
        load(path)


def test_a_pyproject_that_is_not_valid_toml_is_reported_at_its_line_when_it_may_hold_our_settings(
    tmp_path: Path,
) -> None:
    """Its settings were dropped without a word; a broken file that cannot hold them (no `rtrace` in it) is still
    another tool's, looked past."""
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "x"\n[tool.rtrace]\nselect = [RT101]\n')
    with pytest.raises(SettingsError) as e:
        find(tmp_path)
    assert str(e.value).startswith(f"{path}:4:11: not valid TOML: ") and "[tool.rtrace]" in str(e.value)
    with pytest.raises(SettingsError, match=r"pyproject.toml: \[tool.rtrace\] select: unknown rule 'RT1O1'"):
        path.write_text('[tool.rtrace]\nselect = ["RT1O1"]\n')
        resolve(None, False, tmp_path)
    path.write_text("[tool.black\nline-length = 1\n")
    assert find(tmp_path) is None or not str(find(tmp_path)).startswith(str(tmp_path))
