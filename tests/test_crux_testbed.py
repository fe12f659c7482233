"""examples/crux_testbed.yaml is the Crux paper's testbed as far as the fabric model reaches."""

from pathlib import Path

import numpy as np
import yaml

from hpnsim.fabrics.fabric import LinkKind, NodeKind
from hpnsim.scenario.prepare import build_scenario_fabric
from hpnsim.scenario.spec import parse_scenario

TESTBED = Path(__file__).resolve().parents[1] / "examples" / "crux_testbed.yaml"


def test_the_testbed_scenario_matches_the_paper():
    spec = parse_scenario(yaml.safe_load(TESTBED.read_text()))
    f = build_scenario_fabric(spec, {})
    # 12 hosts x 8 A100 (Cao et al., SIGCOMM 2024, section 7.1), two switch tiers
    assert (f.n_hosts, f.gpus_per_host) == (12, 8)
    assert set(f.meta["tiers"]) == {"tor", "agg"}
    assert all(j.gpu == "a100" for j in spec.jobs)
    # 4 x 200G RoCE NICs per host: 800 Gb/s from each host into the network
    up = (f.link_kind == LinkKind.ACCESS) & (f.node_kind[f.link_src] == NodeKind.NIC)
    per_host = np.bincount(f.node_host[f.link_src[up]], f.link_capacity[up])
    assert np.allclose(per_host, 800e9 / 8)
    # a GPT-style job beside three BERT jobs, each spread over at least two ToRs
    assert [j.model for j in spec.jobs] == ["llama-7b"] + ["bert-large"] * 3
    tor = f.gpu_tor[:, 0]
    for job in spec.jobs:
        gpus = job.placement(f.gpus_per_host)
        assert np.unique(tor[gpus]).size >= 2


def test_the_pcie_cases_put_two_jobs_under_each_switch():
    pcie = yaml.safe_load(TESTBED.with_name("crux_testbed_pcie.yaml").read_text())
    assert pcie["fabric"] == yaml.safe_load(TESTBED.read_text())["fabric"]   # same testbed
    spec = parse_scenario(pcie)
    f = build_scenario_fabric(spec, {})
    gpt, *berts = (np.array(j.placement(f.gpus_per_host)) for j in spec.jobs)
    held = np.concatenate([gpt, *berts])
    assert np.unique(held).size == held.size                  # no GPU held twice
    assert all(np.unique(f.gpu_tor[g, 0]).size >= 2 for g in (gpt, *berts))
    for bert in berts:
        # every BERT GPU's PCIe switch (its NIC) also holds a GPT GPU
        assert np.isin(f.gpu_nic[bert], f.gpu_nic[gpt]).all()
        assert np.unique(f.node_host[f.gpu_node[bert]]).size == 2
