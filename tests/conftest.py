"""Fixtures several test modules share."""

import pytest

from hpnsim.fabrics.lingjun import from_lingjun

#: four single-GPU hosts, two per ToR, one uplink per ToR to the one aggregation switch: a
#: flow from host 0 or 1 to host 2 or 3 has exactly one path, through that uplink (jobs on
#: hosts (0, 2) and (1, 3) share both ToR uplinks and nothing else)
TINY_TOPO = "ip,DSW,PSW,ASW\nh0,G1,P1,S1\nh1,G1,P1,S1\nh2,G1,P1,S2\nh3,G1,P1,S2\n"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The four-host Lingjun-format cluster of :data:`TINY_TOPO`."""
    path = tmp_path_factory.mktemp("topo") / "topo.csv"
    path.write_text(TINY_TOPO)
    return from_lingjun(str(path), gpus_per_host=1, tor_uplinks=1, aggs_per_psw=1)


@pytest.fixture
def refused_yaml(tmp_path, capsys):
    """``refused_yaml(text)``: run ``hpnsim run`` on a scenario YAML of ``text``, check it
    exits with status 2 and one line on stderr, and return that line (with its newline)."""
    from hpnsim.cli.main import run as cli

    def refuse(text: str) -> str:
        path = tmp_path / "scenario.yaml"
        path.write_text(text)
        with pytest.raises(SystemExit) as end:
            cli(["run", str(path)])
        err = capsys.readouterr().err
        assert end.value.code == 2 and err.count("\n") == 1, err
        return err
    return refuse


@pytest.fixture
def refused_cli():
    """``refused_cli(*args)``: run ``hpnsim ARGS`` in-process, check it exits with status 2
    and prints one line, and return that line (stripped)."""
    from typer.testing import CliRunner

    from hpnsim.cli.main import app

    def refuse(*args: str) -> str:
        result = CliRunner().invoke(app, list(args))
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        return result.output.strip()
    return refuse
