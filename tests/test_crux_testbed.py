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
