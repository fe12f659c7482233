"""Every ``hpnsim`` command README.md shows runs as written (issue 21: README cannot drift).

The commands are read from README.md itself: every line of a ``bash`` block and every inline
code span that starts with ``hpnsim``; ``a && b`` is two commands run in order; ``[...]``
(an optional part) is left out; ``FILE`` is the AICB example. Where a flag allows, the run is
made smaller (``demo --quick``, ``bench --quick``, fewer sizes and DP points) so the whole file
runs in about a minute; every other word is as README prints it. A comment README puts
after an export (``# header: ...``) is checked against the file written.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from hpnsim.cli.main import run

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: words that stand for something the reader supplies; a command with one is not run alone
_PLACEHOLDERS = ("DIR", "LABEL", "...", "{")


def _spans(text: str) -> list[str]:
    """Every command line of README.md: bash-block lines (continuations joined) and inline
    code spans, each starting with ``hpnsim``."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip().startswith("hpnsim "):
                out.append(line.strip())
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    out += [span for span in re.findall(r"`([^`]+)`", prose) if span.startswith("hpnsim")]
    return out


def _commands() -> list[tuple[str, list[list[str]], str]]:
    """(README text, the argv lists it runs, the comment after it)."""
    cases = []
    for span in dict.fromkeys(_spans(README.read_text(encoding="utf-8"))):
        line, _, comment = span.partition("#")
        line = re.sub(r"\[[^\]]*\]", "", line)                  # optional parts
        steps = [shlex.split(part) for part in line.split("&&")]
        if any(w.startswith("--install-completion") for s in steps for w in s):
            continue                                            # changes the user's shell
        if any(p in w for s in steps for w in s for p in _PLACEHOLDERS):
            continue
        runs = [s[1:] for s in steps if s and s[0] == "hpnsim"]
        if not runs or runs in ([["run"]], [["train"]]):   # none, or prose naming a command
            continue
        if runs == [["demo"]]:   # reduced, it is tests/test_demo.py's `demo --quick`
            continue
        cases.append((span, runs, comment.strip()))
    return cases


def _smaller(argv: list[str]) -> list[str]:
    """The same command on reduced sizes, where a flag allows it."""
    from hpnsim.workloads.aicb import example_path

    argv = [str(example_path()) if w == "FILE" else w for w in argv]
    if argv[0] in ("demo", "bench") and "--quick" not in argv:
        argv.append("--quick")
    if argv[0] == "collective":
        if "--sizes" in argv:
            argv[argv.index("--sizes") + 1] = "1M:4M"
        else:
            argv += ["--sizes", "1M"]
    if argv[0] == "scaling" and "--dp" in argv:
        i = argv.index("--dp") + 1
        argv[i] = ",".join(argv[i].split(",")[:2])
    if argv[0] == "sweep":
        argv += ["--workers", "2"]
    return argv


_CASES = _commands()


def test_readme_shows_the_commands_it_should():
    texts = " ".join(text for text, _, _ in _CASES)
    for command in ("run", "fabric", "collective", "traffic", "train", "scaling",
                    "aicb", "reliability", "sweep", "report", "bench", "schema"):
        assert f"hpnsim {command}" in texts, command


@pytest.mark.parametrize(("text", "steps", "comment"), _CASES,
                         ids=[re.sub(r"\W+", "-", t)[:60] for t, _, _ in _CASES])
def test_every_readme_command_runs(capsys, monkeypatch, tmp_path, text, steps, comment):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "experiments").symlink_to(ROOT / "experiments")
    for argv in steps:
        with pytest.raises(SystemExit) as done:
            run(_smaller(argv))
        out = capsys.readouterr()
        assert done.value.code in (0, None), f"{text}\n{out.err[-2000:]}"
    if comment.startswith("header:"):
        export = steps[-1][steps[-1].index("--export") + 1]
        assert (tmp_path / export).read_text().splitlines()[0].split() == comment.split()[1:]


def test_every_command_has_json_as_readme_says():
    """README: "Every command has --help and --json (schema prints JSON only)"."""
    import typer

    from hpnsim.cli.main import app

    def commands(group, prefix=""):    # a command group's (hpnsim wiring) subcommands
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from commands(command, f"{prefix}{name} ")
            else:
                yield f"{prefix}{name}", command

    lacking = [name for name, command in commands(typer.main.get_command(app))
               if "--json" not in [o for p in command.params for o in p.opts]]
    assert lacking == ["schema"]
    assert "Every command has `--help` and `--json` (`schema` prints JSON only)" in \
        README.read_text(encoding="utf-8").replace("\n", " ")


def test_readme_quotes_the_demos_takeaways_as_the_demo_prints_them():
    """README's demo figures are the demo's takeaway lines, computed (tools/readme_figures.py
    writes them; the parts they read run at the full demo's sizes)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_figures",
                                                  ROOT / "tools" / "readme_figures.py")
    figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figures)
    from hpnsim.demo.pipeline import DemoConfig, run_demo

    config = figures.demo_config()
    full = DemoConfig()
    for name in ("pod_gpus", "allreduce_gpus", "allreduce_size", "allreduce_algo", "gpu",
                 "allreduce_host_gpus", "seed", "packet", "packet_rail_hosts",
                 "packet_rail_bytes", "incast_senders", "incast_bytes"):
        assert getattr(config, name) == getattr(full, name), name
    block = figures.takeaway_block(run_demo(config).to_dict())
    assert figures.readme_block(README.read_text(encoding="utf-8")) == block
    assert len(block.splitlines()) == 4          # two host generations, transport, incast
