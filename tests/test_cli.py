from __future__ import annotations

import subprocess
import sys

import pytest

from vsparta.cli import SUBCOMMANDS, main


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in ["demo", "train", "index", "serve", "search", "eval", "bench"]:
        assert name in out
    assert set(SUBCOMMANDS) >= {"demo", "train", "index", "serve", "search", "eval", "bench"}


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_each_subcommand_has_help(name: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "vsparta.cli", name, "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "usage: vsparta" in proc.stdout
