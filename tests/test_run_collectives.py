"""Collectives and fabric-only scenarios: ``collectives:`` in a scenario runs exactly what
``hpnsim collective`` and ``run_collective`` run, errors name ``collectives[i].field`` and
the line, and a scenario with neither jobs nor collectives is ``hpnsim fabric``'s report."""

from __future__ import annotations

import csv
import json
import textwrap
from pathlib import Path

import pytest

from hpnsim.cli.main import run as cli
from hpnsim.collectives import run_collective
from hpnsim.errors import InputError
from hpnsim.fabrics import build_fabric
from hpnsim.scenario.runner import run
from hpnsim.scenario.spec import parse_scenario

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: 4 hosts x 8 GPUs under one ToR pair, 2 uplinks per ToR: ECMP hashing collides here
SMALL = {"template": "hpn7", "segments": 1, "hosts_per_segment": 4, "backup_hosts": 0,
         "tor_uplinks": 2, "aggs_per_plane": 2}


def _cli(capsys, *argv):
    with pytest.raises(SystemExit) as done:
        cli([str(a) for a in argv])
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def _write(tmp_path, text, name="s.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_a_scenario_collective_is_run_collective_at_every_size():
    scenario = {"fabric": SMALL, "routing": "ecmp", "seed": 3,
                "collectives": [
                    {"name": "ar", "op": "all-reduce", "gpus": 32, "sizes": "1M:4M",
                     "algo": "hier"},
                    {"op": "allgather", "gpus": [*range(8, 16), *range(8)], "sizes": [4096, "8M"],
                     "algo": "ring", "protocol": "simple", "channels": 2, "qps": 2}]}
    result = run(scenario)
    fabric = build_fabric("hpn7", {k: v for k, v in SMALL.items() if k != "template"})
    ar, ag = result.collectives
    assert (ar.name, ag.name, ar.op, ag.op) == ("ar", "collective1", "allreduce", "allgather")
    assert [r.size for r in ar.results] == [2.0**20, 2.0**21, 2.0**22]
    for r in ar.results:
        direct = run_collective(fabric, "allreduce", range(32), r.size, algo="hier",
                                routing="ecmp", seed=3)
        assert (r.time, r.busbw, r.hash_collisions) == (direct.time, direct.busbw,
                                                        direct.hash_collisions)
    assert ar.results[0].hash_collisions > 0          # ECMP collides on this fabric
    for r, size in zip(ag.results, [4096.0, 8 * 2.0**20], strict=True):
        direct = run_collective(fabric, "allgather", [*range(8, 16), *range(8)], size,
                                algo="ring", protocol="simple", channels=2, qps=2,
                                routing="ecmp", seed=3)
        assert (r.size, r.time, r.busbw) == (size, direct.time, direct.busbw)
    assert ag.gpus[:2] == [8, 9] and len(ag.gpus) == 16
    assert result.jobs == [] and result.fabric_report is None   # not asked for
    rows = result.collective_rows()
    assert [(row["collective"], row["size"]) for row in rows][:4] == [
        ("ar", 2.0**20), ("ar", 2.0**21), ("ar", 2.0**22), ("collective1", 4096.0)]
    assert "top_links" not in rows[0]


def test_ring_allreduce_on_a_nonblocking_fat_tree_is_the_closed_form():
    """A k=4 fat-tree: 16 hosts of one GPU, every NIC 400 Gb/s = B = 50e9 B/s. Ring
    all-reduce over n = 16 GPUs, protocol Simple (efficiency 1): each GPU sends 2(n-1)
    chunks of S/n to its ring neighbour. Neighbours 2i, 2i+1 share a ToR; each ToR and each
    pod has one outgoing and one incoming ring flow, so no link carries two flows whatever
    ECMP hashes: the NIC is the bottleneck, at B. Time = NCCL latency + bytes / B:

        latency = base(ring, simple) + 2(n-1) network hops x 14 us = 8.4 us + 30 x 14 us
                = 428.4 us
        t(S)    = 428.4e-6 + 2 (n-1)/n x S / B = 428.4e-6 + 1.875 S / 50e9

    NCCL's payload rate on the NIC is B times the RoCEv2 framing efficiency at MTU 4096:
    4096 / (4096 + 82 header bytes) (NcclParams.network_efficiency), so B' = 49.02e9 B/s.
    busbw = 2(n-1)/n x S / t(S) -> B' as S grows.
    """
    result = run({"fabric": {"template": "fat_tree", "k": 4},
                  "collectives": [{"op": "allreduce", "sizes": "1G:4G:4", "algo": "ring",
                                   "protocol": "simple"}]})
    (sweep,) = result.collectives
    n, link = 16, 400e9 / 8 * 4096 / (4096 + 82)
    assert len(sweep.gpus) == n and result.fabric["gpus"] == n
    for r, size in zip(sweep.results, [2.0**30, 2.0**32], strict=True):
        t = 8.4e-6 + 2 * (n - 1) * 14e-6 + 2 * (n - 1) / n * size / link
        assert r.time == pytest.approx(t, rel=1e-12)
        assert r.busbw == pytest.approx(2 * (n - 1) / n * size / t, rel=1e-12)
        assert r.bottleneck.endswith("->pod0/seg0/tor[port0]") and r.max_link_flows == 1
    assert sweep.results[0].busbw == pytest.approx(link, rel=0.011)
    assert sweep.results[1].busbw == pytest.approx(link, rel=0.003)


GOOD = """\
    name: sweep
    fabric:
      template: hpn7
      segments: 1
      hosts_per_segment: 4
      backup_hosts: 0
    routing: hpn_dual_plane
    collectives:
      - name: ar
        op: allreduce
        gpus: 16
        sizes: 1M:2M
      - op: alltoall
        gpus: [0, 8, 16, 24]
        sizes: 64K
    """


@pytest.mark.parametrize(("old", "new", "message"), [
    ("op: allreduce", "op: allsum",
     "error: collectives[0].op: must be one of allreduce, allgather, reducescatter, alltoall, "
     "broadcast, reduce, sendrecv, send, got 'allsum' (line 10)"),
    ("sizes: 1M:2M", "sizes: 12 parsecs",
     "error: collectives[0].sizes: cannot parse size '12 parsecs'"),
    ("sizes: 1M:2M", "sizes: '1:3'",      # unquoted, YAML 1.1 reads 1:3 as 63 (base 60)
     "error: collectives[0].sizes: must be at least 4 bytes (one float element), got '1:3' "
     "(line 12)"),
    ("gpus: 16", "gpus: 1",
     "error: collectives[0].gpus: must be 2 or more (a collective needs two GPUs), got 1 "
     "(line 11)"),
    ("gpus: 16", "gpus: 64",
     "error: collectives[0].gpus: must be 2..32 (a collective needs two GPUs; the fabric has "
     "32), got 64; for a larger fabric set fabric.pods to 2 (--pods 2) (line 11)"),
    ("[0, 8, 16, 24]", "[0, 8, 16, 40]",
     "error: collectives[1].gpus: GPU 40 does not exist (the fabric has GPUs 0..31) (line 14)"),
    ("[0, 8, 16, 24]", "[0, 8, 8, 24]", "error: collectives[1].gpus: 8 appears twice (line 14)"),
    ("    sizes: 64K\n", "    sizes: 64K\n    algo: ring\n",
     "error: collectives[1].algo: alltoall supports direct, got 'ring' (line 16)"),
    ("    sizes: 64K\n", "    sizes: 64K\n    colour: red\n",
     "error: collectives[1].colour: unknown key (line 16)"),
    ("    sizes: 1M:2M\n", "    sizes: 1M:2M\n    root: 3\n",
     "error: collectives[0].root: only broadcast and reduce have a root; allreduce would "
     "ignore root 3 (line 13)"),
    ("  - op: alltoall", "  - name: ar\n    op: alltoall",
     "error: collectives[1].name: 'ar' is used by another job or collective (line 13)"),
    ("    sizes: 1M:2M\n", "    sizes: 1M:2M\n    channels: -1\n",
     "error: collectives[0].channels: Input should be greater than or equal to 0, got -1 "
     "(line 13)"),
])
def test_yaml_errors_name_the_collective_field_and_line(tmp_path, capsys, old, new, message):
    text = textwrap.dedent(GOOD)
    assert old in text
    code, out, err = _cli(capsys, "run", _write(tmp_path, text.replace(old, new, 1)))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(message), err


def test_the_command_and_the_yaml_share_one_validation(tmp_path, capsys):
    """The same bad value gives the same message, named by the flag in ``hpnsim collective``
    and by the YAML path (and line) in a scenario."""
    code, _, cli_err = _cli(capsys, "collective", "--segments", "1", "--hosts-per-segment",
                            "4", "--backup-hosts", "0", "--sizes", "1:3")
    assert code == 2
    text = textwrap.dedent(GOOD).replace("sizes: 1M:2M", "sizes: '1:3'")
    code, _, yaml_err = _cli(capsys, "run", _write(tmp_path, text))
    assert code == 2
    field, message = cli_err.strip().split(": ", 2)[1:]
    assert field == "--sizes"
    assert yaml_err.strip() == f"error: collectives[0].sizes: {message} (line 12)"


def test_empty_lists_and_traffic_keys_without_traffic_are_refused():
    with pytest.raises(InputError, match=r"^collectives: an empty list"):
        parse_scenario({"collectives": []})
    with pytest.raises(InputError, match=r"^jobs: required: routing sets how jobs and "):
        parse_scenario({"fabric": {"template": "fat_tree", "k": 4}, "routing": "spray"})
    with pytest.raises(InputError, match=r"^compare_alone: .* has no jobs"):
        parse_scenario({"collectives": [{"sizes": "1M"}], "compare_alone": True})
    s = parse_scenario({"fabric": {"template": "fat_tree", "k": 4}})
    assert s.wants_fabric_report and not s.jobs and not s.collectives


def test_collective_example_writes_one_csv_row_per_size(tmp_path, capsys):
    out_dir = tmp_path / "res"
    code, out, err = _cli(capsys, "run", EXAMPLES / "collective.yaml", "--out", out_dir)
    assert code in (0, None), err
    with open(out_dir / "collectives.csv") as f:
        rows = list(csv.DictReader(f))
    sizes = [2.0**k for k in range(20, 33)]                  # 1 MiB .. 4 GiB, factor 2
    assert [float(r["size"]) for r in rows] == sizes
    assert {r["collective"] for r in rows} == {"allreduce-2k"}
    assert {(r["op"], r["algo"], r["routing"], r["n_gpus"]) for r in rows} == {
        ("allreduce", "ring", "hpn_dual_plane", "2048")}
    assert sorted(p.name for p in out_dir.iterdir()) == [".hpnsim-files", "collectives.csv",
                                                         "results.json"]
    saved = json.loads((out_dir / "results.json").read_text())
    (sweep,) = saved["collectives"]
    assert [r["size"] for r in sweep["per_size"]] == sizes and sweep["n_gpus"] == 2048
    assert float(rows[-1]["busbw"]) == pytest.approx(sweep["per_size"][-1]["busbw"])
    # the text table is the one hpnsim collective prints, under the collective's name
    assert out.startswith("# allreduce-2k: allreduce on 2,048 GPUs of hpn7 (15,360 GPUs), "
                          "routing hpn_dual_plane, seed 0\n")
    rows_printed = [line for line in out.splitlines() if line and not line.startswith("#")]
    assert [float(line.split()[0]) for line in rows_printed] == sizes
    assert out.splitlines()[-2].startswith("# Avg bus bandwidth")
    assert out.splitlines()[-1].startswith("# GPU: H800, from the hpn7 hosts (")  # the fabric's


def test_a_fabric_only_scenario_is_hpnsim_fabric(tmp_path, capsys):
    units = {"switch_51.2T": {"power_w": 1000}}
    (tmp_path / "units.json").write_text(json.dumps(units))
    code, fabric_json, _ = _cli(capsys, "fabric", "hpn7", "--segments", "2", "--dual-tor",
                                "stacked", "--units", tmp_path / "units.json", "--json")
    assert code in (0, None)
    path = _write(tmp_path, """\
        fabric:
          template: hpn7
          segments: 2
          dual_tor: stacked
          units:
            switch_51.2T: {power_w: 1000}
        """)
    code, run_json, err = _cli(capsys, "run", path, "--json")
    assert code in (0, None), err
    data = json.loads(run_json)
    assert data["fabric_report"] == json.loads(fabric_json)
    assert data["jobs"] == [] and data["collectives"] == []
    assert data["fabric_report"]["bom"]["power_w"]["switches"] == (32 + 120) * 1000.0
    code, table, _ = _cli(capsys, "run", path)
    assert code in (0, None) and "fabric hpn7" in table and "GPUs per MW" in table


def test_a_fabric_only_scenario_reports_sizing_and_bad_units(tmp_path, capsys):
    result = run({"fabric": {"template": "hpn7", "gpus": 1000}})
    assert result.fabric_report["gpus"] == 1024 and result.notes == [
        "gpus: 1,000 GPUs round up to 1,024 for hpn7 (whole segments of 1,024 GPUs: 128 "
        "hosts x 8 GPUs)"]
    path = _write(tmp_path, """\
        fabric:
          template: hpn7
          units:
            switch_51.2T: {power_w: -680}
        """)
    code, out, err = _cli(capsys, "run", path)
    assert code == 2 and out == ""
    assert err.strip() == ("error: fabric.units: bad unit table: switch_51.2T.power_w: must "
                           "be a number >= 0, got -680 (line 3)")


def test_collectives_and_a_fabric_report_together():
    result = run({"fabric": {"template": "fat_tree", "k": 4}, "report_fabric": True,
                  "collectives": [{"gpus": 4, "sizes": "1M"}]})
    assert result.fabric_report["gpus"] == 16 and len(result.collectives) == 1
    data = result.to_dict()
    assert data["fabric_report"]["switches"] == {"tor": 8, "agg": 8, "core": 4}
    assert data["collectives"][0]["placement"] == [0, 1, 2, 3]
