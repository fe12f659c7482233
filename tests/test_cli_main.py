"""The console entry point: parse errors are one line and exit 2, like every bad input."""

from __future__ import annotations

import pytest

from hpnsim.cli.main import run


def _run(capsys, *argv):
    with pytest.raises(SystemExit) as done:
        run(list(argv))
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


@pytest.mark.parametrize(("argv", "field"), [
    (["collective", "--seed", "abc"], "--seed"),
    # --gpus is a string the scenario reads (a count, or indices and ranges): its errors
    # name the flag all the same
    (["collective", "--gpus", "1.5"], "--gpus"),
    (["train", "--model"], "arguments"),
    (["no-such-command"], "arguments"),
])
def test_parse_errors_are_one_line_and_exit_2(capsys, argv, field):
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: ")


def test_version_and_help_exit_0(capsys):
    from hpnsim import __version__

    assert _run(capsys, "--version")[:2] == (0, f"hpnsim {__version__}\n")
    code, out, _ = _run(capsys, "--help")
    assert code == 0 and "collective" in out and "train" in out


def test_shell_completion_completes_command_names():
    import os
    import subprocess
    import sys

    env = {**os.environ, "_HPNSIM_COMPLETE": "complete_bash", "COMP_WORDS": "hpnsim sch",
           "COMP_CWORD": "1"}
    done = subprocess.run([sys.executable, "-c", "from hpnsim.cli.main import run; run()"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["schema"]
